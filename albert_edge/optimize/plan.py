"""The search plan as data: stages, joint candidates and the time budget.

A candidate is one point of depth × vocabulary × pruning × precision plan × exit policy;
the plan lists them in the order they are built (the fp32 form of a (vocabulary, depth) before its
quantized forms, so that the fp32 verdict can cut the rest: a model that already loses
more than the budget at fp32 cannot meet it at a narrower precision). The plan is written
to the work directory as ``plan.json`` before any work, so what a run will and will not
try is on disk, not only on stderr.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

PLAN_FORMAT = "albert-edge-optimize-plan/1"

# Precisions per (vocabulary, depth): fp32 judges the (vocabulary, depth) first; the
# others are built only where it is admitted.
FIRST = "fp32"
QUANTIZED = ("int8-dynamic", "auto")
# Dynamic exit: ONNX only (the stepped artifact albert_edge.early_exit builds), from the
# full-depth model at these precisions.
EXIT_PRECISIONS = ("fp32", "int8-dynamic")

# Rough seconds per unit of work, for the up-front plan only (re-estimated from what the
# run measures as it goes): a forward pass of one row through one layer of the embedded
# model's width (H = 128), and fixed costs per step. Scaled by (H / 128)^2. Measured on a
# 2-core AMD EPYC under a load of about 3 (a trained 6-layer H256 model: 0.6 ms per row
# and layer forward, 3-5 ms per row of a fine-tune with its teacher, 0.7 s per healing
# step), with room to spare.
FORWARD_ROW_LAYER_S = 0.0002
CONVERT_S = 12.0  # one convert (export, passes, quantize, verify) of the tiny model
AUTO_PLAN_S = 25.0  # one --precision auto search of the tiny model
EXIT_BUILD_S = 20.0  # heads, stepped artifact, threshold choice
TIMING_S = 20.0  # per finalist, interleaved rounds
POOL_START_S = 15.0  # the build workers' start (each imports torch) or joining a cluster
REUSED_S = 2.0  # a stage an earlier run sealed: its record read and its files hashed
NOT_BUILT = "not built"  # the verdict of a candidate that has no artifact
BASELINES = 2  # the given model's full-depth fp32 and int8-dynamic: always built first
FINETUNE_ROW_S = 0.002  # one row of the PABEE + distillation fine-tune, L = 4, H = 128
FINETUNE_SHARE = 0.2  # of the budget, at most, for the fine-tune
MIN_FINETUNE_ROWS = 2000
HEAL_STEP_S = 0.25  # one healing step (batch 32, teacher logits, re-segmented student)
HEAL_SHARE = 0.15  # of the budget, at most, for the healing fine-tune
HEAL_STEPS = (30, 600)  # fewest, most (albert_edge.vocab.heal's default)
# The prune stage (albert_edge.prune on the fit rows): importance over at most this many
# rows (prune's --importance-rows default), its level judged on a tenth of the fit rows
# (32 to 2,000) about five times per head count (every head count, FFN widths bisected in
# sixteenths), its healing fine-tune sized like the vocabulary's
PRUNE_IMPORTANCE_ROWS = 2048
PRUNE_SHARE = 0.5  # of --max-drop, at most, that the pruned level may lose on prune's rows
PRUNE_HEAL_SHARE = 0.1  # of the budget, at most, for prune's healing fine-tune
PRUNE_HEAL_STEPS = (30, 300)  # fewest, most (prune's --heal-steps default)
PRUNE_MIN_FIT = 3 * 32  # prune's importance, choose and report rows: 32 each at least


CLASSIFICATION = "classification"
QUESTION_ANSWERING = "question-answering"
# why a token or span head gets no PABEE fine-tune and no dynamic-exit candidates
NO_EXITS = {
    "token-classification": "a token-classification head has no per-depth exit heads over "
    "[CLS] to train or stop at (the depth stage re-fits its per-token head per depth)",
    QUESTION_ANSWERING: "a question-answering head has no per-depth exit heads over [CLS] "
    "to train or stop at (the depth stage re-fits its span head per depth)",
}
# heal serves classifier and token heads; an unhealed trimmed vocabulary is judged like
# every candidate: its fp32 form cuts the rest when it loses more than the budget
SPAN_HEAL = (
    "heal skipped: span heads (albert_edge.vocab.heal serves classifier and token heads); "
    "the trimmed vocabulary is judged unhealed by the same rule as every candidate"
)


# The vocabularies a candidate reads: the model's own, the trimmed one as the trim left it,
# and the trimmed one after the healing fine-tune. Unhealed and healed are judged apart: on
# text the trim covers (segmented as before) the unhealed model is the untrimmed one within
# noise, while the heal moves every weight to serve the words the trim re-segments, which
# can cost there and gain on unseen text (docs/vocabulary.md); the rule, on the choose
# rows, decides which one a depth ships.
VOCABS = ("full", "trim", "heal")
# the stage whose checkpoint each trimmed vocabulary is, and its own depth search
VOCAB_STAGES = {"trim": ("trim", "depth-trim"), "heal": ("heal", "depth-heal")}
# the pruned checkpoint's stage and its own depth search (its heads read its states)
PRUNE_STAGES = ("prune", "depth-prune")


@dataclass(frozen=True)
class Candidate:
    """One joint candidate. ``vocab``: ``full``, ``trim`` (trimmed, not healed) or
    ``heal`` (trimmed, then healed); ``precision``: fp32,
    int8-dynamic or ``auto`` (a precision plan under the budget left by its fp32 form);
    ``exit``: ``none`` or ``confidence`` (threshold chosen on the choose rows);
    ``pruned``: built from the prune stage's checkpoint (heads and FFN neurons of the
    searched model's shared layers removed, then healed), with its own depth search."""

    vocab: str
    depth: int
    precision: str
    exit: str = "none"
    source: str = "base"  # "base": the fine-tuned (or given) model; "given": as given
    pruned: bool = False

    @property
    def key(self) -> str:
        vocab = f"{self.vocab}-pruned" if self.pruned else self.vocab
        parts = [self.source, vocab, f"d{self.depth}", self.precision]
        if self.exit != "none":
            parts.append(f"exit-{self.exit}")
        return "-".join(parts)

    @property
    def parent(self) -> str | None:
        """The candidate whose fp32 verdict decides whether this one is built."""
        if self.precision == FIRST and self.exit == "none":
            return None
        return Candidate(self.vocab, self.depth, FIRST, "none", self.source, self.pruned).key

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages whose checkpoint and depth search this candidate builds from
        (beyond the split, the fine-tune and the depth search every candidate needs)."""
        if self.pruned:
            return PRUNE_STAGES
        return VOCAB_STAGES.get(self.vocab, ())

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Candidate:
        """The candidate a spec names (as ``plan.json`` or a report records it; a partial
        one, naming only its ``vocab``, is that vocabulary's full-depth fp32 form)."""
        return cls(
            vocab=str(spec["vocab"]),
            depth=int(spec.get("depth", 0)),
            precision=str(spec.get("precision", FIRST)),
            exit=str(spec.get("exit", "none")),
            source=str(spec.get("source", "base")),
            pruned=bool(spec.get("pruned", False)),
        )


@dataclass(frozen=True)
class CandidateBuild:
    """A candidate as a build worker gets it: ``budget_left``, the points of
    ``--max-drop`` its fp32 form left (all of them for an fp32 form), which a precision
    plan and an exit threshold are chosen under."""

    candidate: Candidate
    budget_left: float

    @property
    def key(self) -> str:
        return self.candidate.key

    def spec(self) -> dict[str, Any]:
        """What a candidate record and its sealed inputs hold of it (JSON)."""
        return {"key": self.key, **asdict(self.candidate), "budget_left": self.budget_left}


@dataclass(frozen=True)
class Stage:
    name: str
    estimate_s: float
    will_run: bool
    why: str = ""
    reused: bool = False  # sealed in the work directory by an earlier run: costs ~0


@dataclass
class Plan:
    """What a run will try, in order, and what it will not, with the reasons."""

    stages: list[Stage]
    candidates: list[Candidate]
    skipped: list[dict[str, str]] = field(default_factory=list)
    budget_s: float = 0.0
    estimate_s: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "budget_s": self.budget_s,
            "estimate_s": round(self.estimate_s, 1),
            "settings": self.settings,
            "stages": [asdict(s) for s in self.stages],
            "candidates": [{"key": c.key, **asdict(c)} for c in self.candidates],
            "skipped": self.skipped,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"

    def describe(self) -> list[str]:
        """The up-front lines: what runs, what does not and why, the estimate."""
        lines = [
            f"plan: {len(self.candidates)} candidates at most, about "
            f"{self.estimate_s / 60:.1f} min of {self.budget_s / 60:.1f} min to the fp32 "
            "verdicts; the quantized forms and exits of the admitted ones in the time left"
        ]
        for s in self.stages:
            if s.will_run and s.reused:
                lines.append(f"  will run  {s.name} (done by an earlier run: reused)")
            elif s.will_run:
                lines.append(f"  will run  {s.name} (~{s.estimate_s:.0f} s)")
            else:
                lines.append(f"  will not  {s.name}: {s.why}")
        for item in self.skipped:
            lines.append(f"  will not  {item['what']}: {item['why']}")
        return lines


@dataclass(frozen=True)
class Shape:
    """What the plan needs to know about the model and the data."""

    layers: int
    hidden: int
    depths: tuple[int, ...]  # representable depths, ascending, the last = layers
    fit_rows: int
    choose_rows: int
    single_sentence: bool
    target: str
    auto_min_rows: int
    # the model's head's task (albert_edge.tasks.TaskKind's value): classification, or a
    # token-classification / question-answering head (no PABEE fine-tune, no dynamic exit)
    task: str = "classification"
    # the cost of one example against one classification sentence (a SQuAD question runs
    # several windows of --seq-len tokens)
    row_cost: float = 1.0
    heads: int = 4  # attention heads per layer: the prune stage judges ~5 levels per head
    # why the model cannot be pruned again (a checkpoint with pruned_heads); "" where it can
    prune_why: str = ""


# A token or span head's depth search keeps the states of every position its head reads
# (a word's first piece; every position of a SQuAD window) at every layer, float32:
# at most this many bytes of them, so an albert-base shape on a SQuAD file still fits
DEPTH_STATE_BYTES = 2 * 2**30
DEPTH_ROWS = (20000, 5000)  # the depth search's own default fit / held-out rows
TOKEN_POSITIONS = 48  # kept positions per CoNLL sentence (its words), generously


def depth_rows(shape: Shape, seq_len: int) -> tuple[int, int]:
    """(fit, held-out) examples of a token or span head's depth search: what
    :data:`DEPTH_STATE_BYTES` of states holds (a SQuAD question: about three windows of
    ``seq_len``), from the flags and the model's shape alone (never the free memory), so a
    resumed run searches the same examples."""
    per = 3 * seq_len if shape.task == QUESTION_ANSWERING else TOKEN_POSITIONS
    total = max(4 * 30, DEPTH_STATE_BYTES // (per * shape.layers * shape.hidden * 4))
    held = min(DEPTH_ROWS[1], max(30, total // 5))
    return min(DEPTH_ROWS[0], total - held), held


def scale(shape: Shape) -> float:
    return max(1.0, (shape.hidden / 128.0) ** 2)


def heal_steps(shape: Shape, budget_s: float) -> int:
    """Healing steps that fit :data:`HEAL_SHARE` of the budget: from the flags and the
    model's shape alone (never from a timing), so a resumed run heals the same steps."""
    lo, hi = HEAL_STEPS
    return int(min(hi, max(lo, HEAL_SHARE * budget_s / (HEAL_STEP_S * scale(shape)))))


def prune_heal_steps(shape: Shape, budget_s: float) -> int:
    """Prune's healing steps that fit :data:`PRUNE_HEAL_SHARE` of the budget, from the
    flags and the model's shape alone, so a resumed run heals the same steps."""
    lo, hi = PRUNE_HEAL_STEPS
    return int(min(hi, max(lo, PRUNE_HEAL_SHARE * budget_s / (HEAL_STEP_S * scale(shape)))))


def prune_estimate(shape: Shape, budget_s: float) -> float:
    """Seconds of the prune stage: importance (a forward and a backward pass per row),
    about five levels per head count judged on prune's choose rows, its healing
    fine-tune, its report rows, and loading and writing the checkpoint."""
    row_pass = FORWARD_ROW_LAYER_S * shape.layers * scale(shape) * shape.row_cost
    held = min(2000, max(32, round(0.1 * shape.fit_rows)))
    importance = 3 * row_pass * min(shape.fit_rows, PRUNE_IMPORTANCE_ROWS)
    levels = 5 * shape.heads * row_pass * held
    heal = HEAL_STEP_S * scale(shape) * prune_heal_steps(shape, budget_s)
    return 15.0 + importance + levels + heal + 3 * row_pass * held


def finetune_row_s(shape: Shape) -> float:
    """Seconds per row of the fine-tune (teacher and student), from the shape alone."""
    return FINETUNE_ROW_S * scale(shape) * shape.layers / 4 * shape.row_cost


def finetune_rows(shape: Shape, budget_s: float) -> int:
    """Rows the fine-tune trains on (at most the fit rows): what fits
    :data:`FINETUNE_SHARE` of the budget, from the flags and the shape alone."""
    per_row = finetune_row_s(shape)
    return int(min(shape.fit_rows, max(MIN_FINETUNE_ROWS, FINETUNE_SHARE * budget_s / per_row)))


def stage_estimates(shape: Shape, finetune_epochs: int, budget_s: float) -> dict[str, float]:
    """Seconds per stage (rough; see the constants above)."""
    s = scale(shape)
    row_pass = FORWARD_ROW_LAYER_S * shape.layers * s * shape.row_cost
    return {
        "split": 15.0 + row_pass * 2 * shape.choose_rows,
        "finetune": 10.0 + finetune_row_s(shape) * finetune_rows(shape, budget_s) * finetune_epochs,
        "depth": 10.0 + row_pass * min(shape.fit_rows, sum(DEPTH_ROWS)) * 1.5,
        "trim": 5.0 + 0.002 * shape.fit_rows,
        "heal": 10.0 + HEAL_STEP_S * s * heal_steps(shape, budget_s),
        "prune": prune_estimate(shape, budget_s),
    }


def candidate_estimate(c: Candidate, shape: Shape) -> float:
    s = scale(shape)
    score = FORWARD_ROW_LAYER_S * c.depth * s * shape.choose_rows * 4 * shape.row_cost
    if c.exit != "none":
        return EXIT_BUILD_S * s + score
    if c.precision == "auto":
        return AUTO_PLAN_S * s * c.depth / shape.layers + CONVERT_S * s + score
    return CONVERT_S * s + score


def all_candidates(
    shape: Shape, vocabs: Sequence[str], finetuned: bool, pruned: bool = False
) -> list[Candidate]:
    """Every candidate in build order: the given model's full-depth fp32 and int8 (the
    baselines, always built first: something to ship however early time runs out), then
    per vocabulary (and the pruned checkpoint, where ``pruned``: the full vocabulary with
    heads and FFN neurons removed) the fp32 of every depth (deepest first), then their
    quantized forms (shallowest first), then the dynamic exits. Without a fine-tune the
    searched model is the given one."""
    src = "base" if finetuned else "given"
    forms = [(v, False) for v in vocabs] + ([("full", True)] if pruned else [])
    out = [
        Candidate("full", shape.layers, FIRST, source="given"),
        Candidate("full", shape.layers, "int8-dynamic", source="given"),
    ]
    for v, pr in forms:
        out += [Candidate(v, k, FIRST, source=src, pruned=pr) for k in reversed(shape.depths)]
    # the quantized forms shallowest first, the pruned and trimmed forms before the full
    # one at each depth: the smallest and fastest are built first, so when time runs out
    # what is cut is the deepest, largest forms, which the baselines already bound
    for k in shape.depths:
        for v, pr in reversed(forms):
            out += [Candidate(v, k, p, source=src, pruned=pr) for p in QUANTIZED]
    if shape.target == "onnx" and shape.layers > 1 and shape.task == CLASSIFICATION:
        for v, pr in forms:
            out += [
                Candidate(v, shape.layers, p, "confidence", source=src, pruned=pr)
                for p in EXIT_PRECISIONS
            ]
    return list({c.key: c for c in out}.values())


@dataclass
class _Levers:
    """Which optional stages a plan wants, and why not where it does not."""

    finetune: bool
    finetune_why: str
    trim: bool
    trim_why: str
    heal: bool
    heal_why: str
    prune: bool = False
    prune_why: str = "not asked (--no-prune)"


def _prune_why(shape: Shape, prune: bool) -> str:
    """Why the prune stage is not wanted before the budget is looked at; "" if it is."""
    if not prune:
        return "not asked (--no-prune)"
    if shape.prune_why:
        return shape.prune_why
    if shape.fit_rows < PRUNE_MIN_FIT:
        return (
            f"{shape.fit_rows} fit rows; prune splits them into importance, choose and "
            f"report rows, 32 each at least ({PRUNE_MIN_FIT})"
        )
    return ""


def _wanted(
    shape: Shape,
    finetune: bool,
    trim: bool,
    heal_available: bool,
    skipped: list[dict[str, str]],
    prune: bool = False,
) -> _Levers:
    """The levers the flags and the model's head allow, before the budget is looked at
    (a token or span head also has no dynamic exit: said in ``skipped``)."""
    want_ft, ft_why = finetune, ""
    if shape.task != CLASSIFICATION:
        no_exits = NO_EXITS.get(shape.task, f"a {shape.task} head has no exit heads")
        want_ft, ft_why = False, f"PABEE exits serve sequence classifiers; {no_exits}"
        skipped.append({"what": "dynamic exit", "why": no_exits})
    elif not shape.single_sentence:
        want_ft, ft_why = False, "PABEE exits train on single sentences only (docs/training.md)"
    elif not finetune:
        ft_why = "not asked (--no-finetune)"
    heal_why = ""
    span = shape.task == QUESTION_ANSWERING
    if span:
        heal_why = SPAN_HEAL
    elif not heal_available:
        heal_why = "no healing fine-tune in albert_edge.vocab in this build"
    elif not trim:
        heal_why = "no trimmed vocabulary to heal"
    want_heal = trim and heal_available and not span
    prune_why = _prune_why(shape, prune)
    return _Levers(
        want_ft,
        ft_why,
        trim,
        "" if trim else "not asked (--no-trim)",
        want_heal,
        heal_why,
        prune=not prune_why,
        prune_why=prune_why,
    )


@dataclass(frozen=True)
class _Draft:
    """One try at a plan: its stages and candidates, the fixed seconds (pool start,
    stages, timing) and the total with the fp32 skeleton of the candidates."""

    stages: list[Stage]
    candidates: list[Candidate]
    fixed: float
    total: float


def _draft(
    shape: Shape, levers: _Levers, est: Mapping[str, float], done: set[str], par: int
) -> _Draft:
    """The stages and candidates of ``levers``, and what they cost. A stage is worth its
    time where the stages, the baselines and the fp32 form of every (vocabulary, depth)
    fit: the quantized forms are pruned by those verdicts as the run goes, and cut from
    the end of the build order where time is short."""

    def stage(name: str, on: bool, why: str) -> Stage:
        cost = REUSED_S if name in done else est[name.split("-")[0]]
        return Stage(name, cost, on, "" if on else why, reused=on and name in done)

    tr, heal = levers.trim, levers.trim and levers.heal
    st = [
        stage("split", True, ""),
        stage("finetune", levers.finetune, levers.finetune_why),
        stage("depth", True, ""),
        stage("trim", tr, levers.trim_why),
        stage("depth-trim", tr, "no trimmed vocabulary"),
        stage("heal", heal, levers.heal_why),
        stage("depth-heal", heal, "no healed vocabulary"),
        stage("prune", levers.prune, levers.prune_why),
        stage("depth-prune", levers.prune, "no pruned checkpoint"),
    ]
    vocabs = [v for v, on in zip(VOCABS, (True, tr, heal), strict=True) if on]
    cands = all_candidates(shape, vocabs, levers.finetune, levers.prune)
    skeleton = [c for i, c in enumerate(cands) if i < BASELINES or c.parent is None]
    fixed = POOL_START_S + sum(s.estimate_s for s in st if s.will_run) + TIMING_S * 4
    total = fixed + sum(candidate_estimate(c, shape) for c in skeleton) / par
    return _Draft(st, cands, fixed, total)


def _fit_levers(
    shape: Shape,
    levers: _Levers,
    budget_s: float,
    est: Mapping[str, float],
    done: set[str],
    par: int,
) -> _Draft:
    """Drop levers while the plan does not fit ``budget_s``, in this order: the pruned
    checkpoint (its prune, its depth search and its candidates), the healed vocabulary
    (the unhealed trimmed one is still judged), the fine-tune, the trimmed vocabulary; a
    lever an earlier run left sealed is kept (reading it back costs nothing). ``levers``
    records why each dropped one is not run."""

    def too_long(total: float) -> str:
        return f"does not fit --max-minutes {budget_s / 60:g} (plan ~{total / 60:.1f} min)"

    d = _draft(shape, levers, est, done, par)
    if d.total > budget_s and levers.prune and not set(PRUNE_STAGES) <= done:
        levers.prune, levers.prune_why = False, too_long(d.total)
        d = _draft(shape, levers, est, done, par)
    if d.total > budget_s and levers.heal and not {"heal", "depth-heal"} <= done:
        levers.heal, levers.heal_why = False, too_long(d.total)
        d = _draft(shape, levers, est, done, par)
    if d.total > budget_s and levers.finetune and "finetune" not in done:
        levers.finetune, levers.finetune_why = False, too_long(d.total)
        d = _draft(shape, levers, est, done, par)
    if d.total > budget_s and levers.trim and not {"trim", "depth-trim"} <= done:
        levers.trim, levers.trim_why = False, too_long(d.total)
        d = _draft(shape, levers, est, done, par)
    return d


def _cut_to_budget(
    shape: Shape,
    cands: Sequence[Candidate],
    fixed: float,
    par: int,
    budget_s: float,
    skipped: list[dict[str, str]],
) -> tuple[list[Candidate], float]:
    """(the candidates kept in build order, the planned seconds): the precision plans
    where the choose rows are too few for them are listed in ``skipped``, then the fp32
    forms cut from the end of the build order where they do not fit, never the
    baselines; a quantized form or an exit is kept wherever its fp32 form is."""
    if shape.choose_rows < shape.auto_min_rows:
        dropped = [c for c in cands if c.precision == "auto"]
        cands = [c for c in cands if c.precision != "auto"]
        if dropped:
            skipped.append(
                {
                    "what": "precision plans (--precision auto)",
                    "why": f"{shape.choose_rows} choose rows, the plan search needs "
                    f"{shape.auto_min_rows} for this --max-drop",
                }
            )
    kept: list[Candidate] = []
    spent = fixed
    for i, c in enumerate(cands):
        cost = candidate_estimate(c, shape) / par
        if i >= BASELINES and c.parent is not None:
            # a quantized form or an exit: built only where its fp32 form is admitted and
            # while time remains (the run checks before each build), so it is planned
            # wherever its fp32 form is, and not counted in the up-front estimate
            if any(k.key == c.parent for k in kept):
                kept.append(c)
            else:
                skipped.append({"what": c.key, "why": "its fp32 form does not fit the budget"})
        elif i < BASELINES or spent + cost <= budget_s:
            kept.append(c)
            spent += cost
        else:
            skipped.append({"what": c.key, "why": "does not fit the time budget"})
    return kept, spent


def make_plan(
    shape: Shape,
    *,
    budget_s: float,
    finetune: bool,
    trim: bool,
    heal_available: bool,
    workers: int = 1,
    finetune_epochs: int = 1,
    settings: Mapping[str, Any] | None = None,
    reused: Collection[str] = (),
    prune: bool = False,
) -> Plan:
    """The stages and candidates that fit ``budget_s``, the rest listed with why.

    Candidates build ``workers`` at a time (their estimates are divided by it). Stages
    are dropped when the estimate exceeds the budget: the pruned checkpoint (``prune``:
    wanted; its prune and its depth search), the healed vocabulary (its heal and its
    depth search), then the fine-tune (the most expensive), then the trimmed
    vocabulary; candidates are cut from
    the end of the build order (the dynamic exits, then the quantized forms of the
    shallowest depths), never the baselines. ``reused``: stages an earlier run sealed in
    the work directory that this run reads back (``Search.reuse_plan``): each costs
    :data:`REUSED_S`, and a lever whose stages are all reused is never dropped, since
    dropping it would save nothing.
    """
    est = stage_estimates(shape, finetune_epochs, budget_s)
    par = max(1, workers)
    skipped: list[dict[str, str]] = []
    levers = _wanted(shape, finetune, trim, heal_available, skipped, prune)
    draft = _fit_levers(shape, levers, budget_s, est, set(reused), par)
    kept, spent = _cut_to_budget(shape, draft.candidates, draft.fixed, par, budget_s, skipped)
    return Plan(
        stages=draft.stages,
        candidates=kept,
        skipped=skipped,
        budget_s=budget_s,
        estimate_s=spent,
        settings=dict(settings or {}),
    )


def plan_budget_why(
    max_drop: float, budget_left: float, choose_rows: int, need_rows: int
) -> str | None:
    """Why a precision-plan candidate is not built although its fp32 form was admitted:
    its depth and vocabulary already spent the budget (``budget_left`` of ``max_drop``
    points left), or what is left is too small for ``choose_rows`` to judge (``need_rows``:
    :func:`albert_edge.mixed.min_rows` of it). None: build it."""
    spent = f"spent {max_drop - budget_left:.2f} of {max_drop:g} points"
    head = "no budget left for a precision plan after depth/vocabulary"
    if budget_left <= 0:
        return f"{head} ({spent})"
    if need_rows > choose_rows:
        return (
            f"{head} ({spent}; the {budget_left:.2f} left needs {need_rows} choose rows to "
            f"judge, there are {choose_rows})"
        )
    return None


def cut_by_fp32(candidate: Candidate, verdicts: Mapping[str, str | None]) -> str | None:
    """Why ``candidate`` is not built, given the rule's verdicts so far (key -> None when
    admitted, else the reason), or None to build it. Its fp32 parent not admitted cuts
    it; a parent not judged (failed, or not reached) cuts it too."""
    parent = candidate.parent
    if parent is None:
        return None
    if parent not in verdicts:
        return f"{parent} was not judged"
    why = verdicts[parent]
    if why == NOT_BUILT:
        return f"not built: its fp32 form ({parent}) was not built"
    if why is not None:
        return f"cut: its fp32 form ({parent}) already {why}"
    return None
