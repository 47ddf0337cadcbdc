"""The search: stages in order, candidates on the build workers, finalists timed here, the pick.

1. **Stages**, each sealed in the work directory and skipped when a rerun finds it done:
   the split (fit / choose / report rows, one seeded shuffle; ``--report-data`` and
   ``--choose-data`` give those parts instead, and rows the checkpoint records it trained
   on are never choose or report rows), the fine-tune with PABEE
   exits and distillation from the given checkpoint, the depth search, the vocabulary
   trim on the corpus (default: the fit rows' text, so the choose and report sentences
   stay unseen) and its depth search, and the healing fine-tune where
   :mod:`albert_edge.vocab` offers one and its depth search: the trimmed vocabulary
   unhealed and healed are two vocabularies, each judged by the rule; then the prune
   (:mod:`albert_edge.prune` on the fit rows: heads and FFN neurons of the shared layers)
   and the pruned checkpoint's depth search, the source of the pruned candidates.
2. **Candidates** (:mod:`albert_edge.optimize.plan`): the fp32 form of every (vocabulary,
   depth) first; only where the rule admits it are its int8, precision-plan and
   dynamic-exit forms built, each under the budget its fp32 form left.
3. **Timing**, here after every build, never on a Ray worker: every finalist on the same
   report rows one row at a time (:mod:`albert_edge.optimize.latency`): W1 and W2 as a
   distribution over rows (a dynamic exit's cost depends on the row).
4. **The pick**: among the admitted (choose rows), the fastest mean W1 over those rows
   (``--objective latency``; within :data:`LATENCY_TIE` of the fastest is a tie,
   broken by fewer bytes) or the fewest bytes (``bytes``); equal bytes go to the better
   choose score, then the key, never to a timing; the report rows are printed
   beside it, never chosen on. The timing is sealed in the work directory like a stage,
   so a run resumed after it picks from the same figures.

A token-classification or question-answering model (a CoNLL or SQuAD ``--data``) is
searched the same way in its task's metric (entity F1, SQuAD F1): its depth search is
the one every head has (:func:`albert_edge.depth.search.search_depths`), and the plan lists the PABEE fine-tune and the
dynamic exit (per-depth heads over [CLS], which such a head has none of) as not run, and
the healing fine-tune for a span head (``albert_edge.vocab.heal`` refuses them).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError
from albert_edge.mixed.search import LATENCY_TIE
from albert_edge.optimize.context import PruneSummary, RunContext, VocabSource, candidate_source
from albert_edge.optimize.options import Options
from albert_edge.optimize.plan import (
    PRUNE_SHARE,
    VOCAB_STAGES,
    Candidate,
    CandidateBuild,
    Plan,
    Shape,
    depth_rows,
    finetune_rows,
    heal_steps,
    make_plan,
    prune_heal_steps,
)
from albert_edge.optimize.schedule import Scheduler
from albert_edge.optimize.splits import reference_file, split_file
from albert_edge.optimize.stages import (
    depth_stage,
    finetune_stage,
    heal_settings,
    heal_stage,
    prune_settings,
    prune_stage,
    split_stage,
    trim_stage,
)
from albert_edge.optimize.work import SEED, OptimizeError, Work, disk_full, file_id

REQUIRED = ("split", "depth")  # the others are levers the search can go without
# a stage input sized by --max-minutes: a sealed stage that did at least as much of it is
# reused by a rerun with a smaller budget (Work.reusable)
GROWS = {"finetune": ("rows",), "heal": ("steps",)}
TIMING_ROUNDS = 3
RUNS_PER_VISIT = 20
MAX_FINALISTS = 6
# LATENCY_TIE: W1 differences below this share of the fastest are ties (a 2-core VM's
# fast and slow states move W1 by more than that between rounds); fewer bytes break them


@dataclass
class Progress:
    """Lines on stderr: the stage, candidate k of n, elapsed and the estimate."""

    quiet: bool
    t0: float = field(default_factory=time.monotonic)
    estimate_s: float = 0.0

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def __call__(self, text: str) -> None:
        if self.quiet:
            return
        e = self.elapsed()
        print(
            f"albert-edge optimize [{e / 60:4.1f}/{self.estimate_s / 60:.1f} min] {text}",
            file=sys.stderr,
            flush=True,
        )


# what one example costs against one classification sentence, for the plan's estimates
ROW_COST = {"token-classification": 1.5, "question-answering": 6.0}


def model_shape(
    opts: Options,
    n_rows: int,
    pair: bool,
    task: str = "classification",
    rows: tuple[int, int] | None = None,
) -> Shape:
    """The plan's view of the model and the data. ``rows``: (fit, choose) as the split
    plan draws them (given files, trained-on rows out); None: :func:`split_sizes`'."""
    from albert_edge.depth import representable_depths
    from albert_edge.layout import DEFAULT_MODEL
    from albert_edge.mixed import min_rows
    from albert_edge.optimize.splits import split_sizes

    path = opts.checkpoint if opts.checkpoint is not None else DEFAULT_MODEL
    cfg = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    layers = int(cfg["num_hidden_layers"])
    depths = representable_depths(
        layers, int(cfg.get("num_hidden_groups", 1)), int(cfg.get("inner_group_num", 1))
    )
    fit, held, _ = split_sizes(n_rows)
    if rows is not None:
        fit, held = rows
    return Shape(
        layers=layers,
        hidden=int(cfg["hidden_size"]),
        depths=tuple(depths),
        fit_rows=fit,
        choose_rows=held,
        single_sentence=not pair,
        target=opts.target,
        auto_min_rows=min_rows(opts.max_drop),
        task=task,
        row_cost=ROW_COST.get(task, 1.0) * (opts.seq_len / 128 if task != "classification" else 1),
        heads=int(cfg.get("num_attention_heads", 4)),
        prune_why=(
            "the model is pruned already (pruned_heads in its config.json): prune measures "
            "importance on every head of the unpruned model"
            if cfg.get("pruned_heads")
            else ""
        ),
    )


def heal_available() -> bool:
    """Whether :mod:`albert_edge.vocab` offers a healing fine-tune to compose."""
    import importlib.util

    return importlib.util.find_spec("albert_edge.vocab.heal") is not None


class _Dry(Exception):
    """The dry pass met a stage this run would have to do: it ends there."""


class Search:
    """One run of the search over a work directory."""

    def __init__(self, opts: Options, rows: Any, split: Any = None) -> None:
        """``split``: the :class:`~albert_edge.optimize.splits.SplitPlan` of ``rows``."""
        self.opts = opts
        self.work = Work(opts.work())
        self.progress = Progress(opts.quiet)
        self.budget_s = opts.max_minutes * 60.0
        self.task = str(rows.kind.value)
        counts = None
        if split is not None:
            counts = (
                len(split.parts["fit"]),
                len(split.given.get("choose", split.parts["choose"])),
            )
        self.shape = model_shape(opts, len(rows.examples), bool(rows.pair), self.task, counts)
        import os

        workers = opts.workers or (os.cpu_count() or 1) if opts.cluster is None else 2
        self.workers = workers
        self.plan: Plan = self.make_plan(self.budget_s)
        self.progress.estimate_s = self.plan.estimate_s
        self.records: dict[str, dict[str, Any]] = {}
        self.stages: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []
        self.out_of_time = False
        self.timing: dict[str, Any] | None = None
        self.slowdown = 1.0  # measured / planned seconds so far (never below 1)
        self.ratios: list[float] = []
        self._dry: set[str] | None = None  # during reuse_plan: the stages found reusable
        self.rows_of: dict[str, dict[str, Any]] = {}  # each part's source (the split's)

    def make_plan(self, budget_s: float, reused: frozenset[str] = frozenset()) -> Plan:
        return make_plan(
            self.shape,
            budget_s=budget_s,
            finetune=self.opts.finetune,
            trim=self.opts.trim,
            heal_available=heal_available(),
            workers=self.workers,
            settings=self.settings(),
            reused=reused,
            prune=self.opts.prune,
        )

    def reuse_plan(self) -> frozenset[str]:
        """Plan again knowing what an earlier run left in the work directory: a dry pass
        over the stages (nothing runs) finds each one sealed and reusable, in order, up
        to the first that is not; those cost ~0 in the plan and are never dropped to fit
        ``--max-minutes`` (a rerun with a smaller budget keeps the fine-tune, trim and
        heal an earlier run paid for). The call made with the work directory locked is the
        one that counts (another run may be writing it before)."""
        saved, self.plan = self.plan, self.make_plan(float("inf"))  # every stage wanted
        self._dry = set()
        try:
            self.run_stages()
        except _Dry:
            pass
        finally:
            found = frozenset(self._dry)
            self._dry, self.plan, self.stages = None, saved, {}
        self.plan = self.make_plan(self.budget_s, found)
        self.progress.estimate_s = self.plan.estimate_s
        return found

    def settings(self) -> dict[str, Any]:
        o = self.opts
        out: dict[str, Any] = {
            "max_drop_points": o.max_drop,
            "min_lower_bound_points": o.min_lower_bound,
            "target": o.target,
            "objective": o.objective,
            "seq_len": o.seq_len,
            "max_minutes": o.max_minutes,
            "seed": SEED,
        }
        if self.task != "classification":
            out["task"] = self.task
        return out

    def left(self) -> float:
        return self.budget_s - self.progress.elapsed()

    def reserve(self) -> float:
        """Seconds kept back for timing the finalists and writing the output."""
        return min(0.25 * self.budget_s, 30.0 + 10.0 * MAX_FINALISTS)

    # --- stages -----------------------------------------------------------------------

    def stage(self, name: str, inputs: Mapping[str, Any], fn: Callable[[Path], Any]) -> Any:
        planned = next((s for s in self.plan.stages if s.name == name), None)
        if planned is not None and not planned.will_run:
            self.stages[name] = {"ran": False, "why": planned.why}
            return None
        found = self.work.reusable("stages", name, inputs, GROWS.get(name, ()))
        if self._dry is not None:  # reuse_plan: nothing runs
            if found is None:
                raise _Dry(name)
            self._dry.add(name)
            return {**found, "cached": True}
        if found is not None:  # sealed by an earlier run, perhaps with more rows / steps
            inputs = found["inputs"]
        est = (planned.estimate_s if planned else 0.0) * self.slowdown
        if found is None and est > self.left() - self.reserve():
            why = f"time ran out (~{est:.0f} s needed, {max(0.0, self.left()):.0f} s left)"
            if name in REQUIRED:
                raise OptimizeError(
                    f"the {name} stage needs ~{est:.0f} s and {max(0.0, self.left()):.0f} s "
                    "of --max-minutes are left: raise --max-minutes"
                )
            self.progress(f"stage {name}: skipped, {why}")
            self.stages[name] = {"ran": False, "why": why}
            return None
        self.progress(f"stage {name} (~{est:.0f} s)")
        t0 = time.monotonic()
        try:
            rec = self.work.run("stages", name, inputs, fn)
        except AlbertEdgeError as exc:
            # a full disk stops the run; a trim --corpus asked for is never dropped
            if name in REQUIRED or disk_full(exc) is not None or self.asked(name):
                raise
            # an optional lever that cannot run here: the search goes on without it
            why = f"failed: {exc}"
            self.progress(f"stage {name}: {why}")
            self.stages[name] = {"ran": False, "why": why}
            return None
        self.stages[name] = {"ran": True, "cached": rec["cached"]}
        if rec["cached"]:
            self.progress(f"stage {name}: done by an earlier run, reused")
        elif planned is not None and planned.estimate_s > 0:
            self.measured(planned.estimate_s, time.monotonic() - t0)
        return rec

    def asked(self, name: str) -> bool:
        """Whether the user asked for this stage by name: ``--corpus`` asks for the trim
        (its failure ends the run instead of being noted and skipped)."""
        return name == "trim" and self.opts.corpus is not None

    def measured(self, planned_s: float, took_s: float) -> None:
        """Scale what is left of the plan by how much slower than planned the work runs
        here (a loaded machine): the estimate on stderr and the skip decisions follow."""
        self.ratios.append(took_s / planned_s)
        before = self.slowdown
        self.slowdown = max(1.0, sum(self.ratios) / len(self.ratios))
        rest = max(0.0, self.plan.estimate_s - self.progress.elapsed() / before)
        self.progress.estimate_s = self.progress.elapsed() + rest * self.slowdown

    def run_stages(self) -> RunContext:
        """The stages in order (the split, the fine-tune, the depth search, the trimmed
        vocabularies and their searches): what the candidates build from."""
        ctx = self.split()
        ctx = self.finetune(ctx)
        ctx, extra = self.depth(ctx)
        ctx = self.vocabularies(ctx, extra)
        return self.pruning(ctx, extra)

    def split(self) -> RunContext:
        """The split stage: the fit / choose / report files and the given model's outputs
        on the held ones, and the run's context around them."""
        from albert_edge.tasks.seen import SEEN_FILE

        o = self.opts
        given = o.checkpoint
        seen = None if given is None else Path(given) / SEEN_FILE
        split = self.stage(
            "split",
            {
                "data": file_id(o.data),
                "checkpoint": file_id(given),
                "seq_len": o.seq_len,
                "seed": SEED,
                "report_data": file_id(o.report_data) if o.report_data else None,
                "choose_data": file_id(o.choose_data) if o.choose_data else None,
                "trained_rows": file_id(seen) if seen is not None and seen.is_file() else None,
                "learned": "choose from half of --report-data when --data's rows look learned",
            },
            split_stage(o.data, given, o.seq_len, o.given_files()),
        )
        sdir = self.work.dir("stages", "split")
        self.rows_of = dict(split.get("provenance") or {})
        if split.get("learned") and self._dry is None:  # --data's rows look learned
            self.warn(str(split["learned"]))  # once: not in reuse_plan's dry passes
        return RunContext(
            given=Path(given) if given is not None else None,
            target=o.target,
            objective=o.objective,
            seq_len=o.seq_len,
            max_drop=o.max_drop,
            min_lower_bound=o.min_lower_bound,
            layers=self.shape.layers,
            fit=split_file(sdir, "fit", self.task),
            choose=split_file(sdir, "choose", self.task),
            choose_rows=int(split["rows"]["choose"]),
            report=split_file(sdir, "report", self.task),
            reference_choose=reference_file(sdir, "choose", self.task),
            reference_report=reference_file(sdir, "report", self.task),
            split=str(split["inputs_sha256"]),
        )

    def finetune(self, ctx: RunContext) -> RunContext:
        """The PABEE + distillation fine-tune on the fit rows: the searched model (the
        given one where it does not run)."""
        gid = file_id(self.opts.checkpoint)
        rows = finetune_rows(self.shape, self.budget_s)
        ft = self.stage(
            "finetune",
            {
                "checkpoint": gid,
                "fit": file_id(ctx.fit),
                "rows": rows,
                "recipe": "pabee+distil, 1 epoch, seed 13",
            },
            finetune_stage(ctx.given, ctx.fit, rows),
        )
        base = self.work.dir("stages", "finetune") / "model" if ft else ctx.given
        return replace(ctx, base=base, base_id=ft["inputs_sha256"] if ft else gid)

    def depth(self, ctx: RunContext) -> tuple[RunContext, dict[str, Any]]:
        """The depth search of the searched model; (the context, the search's split
        settings every vocabulary's search repeats)."""
        # a token or span head's search windows its examples at --seq-len, as they are
        # scored, on as many examples as its states' memory bound holds
        depth_split: dict[str, Any] | None = None
        if self.task != "classification":
            fit_rows, held_rows = depth_rows(self.shape, self.opts.seq_len)
            depth_split = {
                "max_length": self.opts.seq_len,
                "fit_rows": fit_rows,
                "held_out_rows": held_rows,
            }
        extra = dict(depth_split or {})
        depth = self.stage(
            "depth",
            {"checkpoint": ctx.base_id, "fit": file_id(ctx.fit), "seed": SEED, **extra},
            depth_stage(ctx.base, ctx.fit, depth_split),
        )
        if depth is None:
            raise OptimizeError("the depth search did not run: raise --max-minutes")
        search = self.work.dir("stages", "depth") / "search"
        return replace(ctx, search=search, search_id=depth["inputs_sha256"]), extra

    def vocabularies(self, ctx: RunContext, extra: Mapping[str, Any]) -> RunContext:
        """The vocabulary trim on the corpus and its depth search, then the healing
        fine-tune and its depth search: each vocabulary that ran is in the context."""
        corpus = self.opts.corpus if self.opts.corpus is not None else ctx.fit
        ctx = replace(ctx, corpus=corpus)
        trim = self.stage(
            "trim",
            {"checkpoint": ctx.base_id, "corpus": file_id(corpus)},
            trim_stage(ctx.base, corpus),
        )
        if trim is None:
            for name in ("depth-trim", "heal", "depth-heal"):
                self.stages[name] = {"ran": False, "why": "no trimmed vocabulary"}
            return ctx
        # the trimmed vocabulary as the trim left it, with its own depth search: its
        # heads read its states
        trimmed, source = self.vocabulary("trim", trim["inputs_sha256"], ctx.fit, extra)
        ctx = replace(ctx, trim=source)
        steps = heal_steps(self.shape, self.budget_s)
        heal = self.stage(
            "heal",
            {
                "trimmed": trim["inputs_sha256"],
                "teacher": ctx.base_id,
                "data": file_id(ctx.fit),
                "seed": SEED,
                "steps": steps,
                "settings": heal_settings(),
            },
            heal_stage(trimmed, ctx.base, ctx.fit, steps),
        )
        if heal is None:
            self.stages["depth-heal"] = {"ran": False, "why": "no healed vocabulary"}
            return ctx
        _, source = self.vocabulary("heal", heal["inputs_sha256"], ctx.fit, extra)
        return replace(ctx, heal=source)

    def pruning(self, ctx: RunContext, extra: Mapping[str, Any]) -> RunContext:
        """The prune stage on the searched model at full depth (fit rows only, a share of
        ``--max-drop``) and the pruned checkpoint's own depth search: the pruned
        candidates build from them."""
        steps = prune_heal_steps(self.shape, self.budget_s)
        share = round(PRUNE_SHARE * self.opts.max_drop, 6)
        settings = prune_settings(share, steps, self.opts.seq_len)
        rec = self.stage(
            "prune",
            {"checkpoint": ctx.base_id, "fit": file_id(ctx.fit), "settings": settings},
            prune_stage(ctx.base, ctx.fit, share, steps, self.opts.seq_len),
        )
        if rec is None:
            self.stages["depth-prune"] = {"ran": False, "why": "no pruned checkpoint"}
            return ctx
        summary = PruneSummary.from_json(rec["pruned"])
        if "prune" in self.stages:  # not in reuse_plan's dry passes
            self.stages["prune"].update(pruned=summary.to_json(), describe=summary.describe())
        checkpoint, where = candidate_source(
            self.work.root, {"vocab": "full", "pruned": True}, None
        )
        assert checkpoint is not None  # the prune stage's checkpoint
        search = self.stage(
            "depth-prune",
            {"checkpoint": rec["inputs_sha256"], "fit": file_id(ctx.fit), "seed": SEED, **extra},
            depth_stage(checkpoint, ctx.fit, dict(extra) or None),
        )
        if search is None:
            return ctx
        source = VocabSource(checkpoint, where, str(search["inputs_sha256"]))
        return replace(ctx, pruned=source, prune=summary)

    def warn(self, line: str) -> None:
        """A warning: on stderr whatever ``--quiet`` says, and in the report's notes."""
        print(f"albert-edge optimize: {line}", file=sys.stderr, flush=True)
        self.notes.append(line)

    def vocabulary(
        self, vocab: str, checkpoint_id: str, fit: Path, extra: Mapping[str, Any]
    ) -> tuple[Path, VocabSource | None]:
        """The depth search of a trimmed vocabulary's checkpoint (where both live in the
        work directory: :func:`~albert_edge.optimize.context.candidate_source`); (the
        checkpoint, the vocabulary as its candidates build from it, None where its search
        did not run)."""
        checkpoint, where = candidate_source(self.work.root, {"vocab": vocab}, None)
        assert checkpoint is not None  # a trimmed vocabulary is a stage's checkpoint
        search = self.stage(
            VOCAB_STAGES[vocab][1],
            {"checkpoint": checkpoint_id, "fit": file_id(fit), "seed": SEED, **extra},
            depth_stage(checkpoint, fit, dict(extra) or None),
        )
        if search is None:
            return checkpoint, None
        return checkpoint, VocabSource(checkpoint, where, str(search["inputs_sha256"]))

    # --- candidates -------------------------------------------------------------------

    def build_of(self, c: Candidate) -> CandidateBuild:
        """``c`` as a worker builds it: with the points its fp32 form left of the budget."""
        left = self.opts.max_drop
        if c.parent is not None:
            d = self.records[c.parent]["choose"]["delta"]
            left = round(max(0.0, self.opts.max_drop + 100.0 * min(0.0, d)), 6)
        return CandidateBuild(c, left)

    def inputs(self, ctx: RunContext, build: CandidateBuild) -> dict[str, Any]:
        """What a candidate's sealed record is keyed by: its spec, and what of the run it
        was built from."""
        c = build.candidate
        ids = ctx.identity()
        vocab = ctx.vocab(c.vocab)
        if vocab is not None:  # the trimmed vocabulary's search, not the other's
            ids["vocab_id"] = vocab.id
        if c.pruned and ctx.pruned is not None:  # the pruned checkpoint's search
            ids["prune_id"] = ctx.pruned.id
        ids.update(max_drop=self.opts.max_drop, min_lower_bound=self.opts.min_lower_bound)
        if c.source == "given":
            ids["base_id"] = file_id(self.opts.checkpoint)
        if c.exit != "none":
            ids["records"] = "choose_exit_share"  # what the timing mixes by
        return {"spec": build.spec(), "context": ids}

    def missing(self, c: Candidate) -> str | None:
        """The first stage ``c`` builds from (a trimmed vocabulary's, the pruned
        checkpoint's) that did not run, None where all ran."""
        return next((n for n in c.stages if not self.stages.get(n, {}).get("ran")), None)

    def run_candidates(self, ctx: RunContext, pool: Any) -> None:
        """Every planned candidate on ``pool`` (:class:`~albert_edge.optimize.schedule.Scheduler`)."""
        Scheduler(self, ctx, pool).run()

    # --- timing and the pick -------------------------------------------------------------

    def overrun(self, c: Candidate) -> None:
        """Say once that the budget is overrun to build ``c``, the given model's full-depth
        fp32 form, because nothing is admitted yet: every stage paid for would otherwise
        end in no artifact at all (at most :data:`OVERRUN_S` past the budget)."""
        note = (
            f"the time budget ran out before any candidate was admitted: {c.key} (the given "
            "model's own fp32 form) was built past it, so that the run ships an artifact"
        )
        if note not in self.notes:
            self.notes.append(note)
            self.progress(note)

    def admitted(self) -> list[dict[str, Any]]:
        return [r for r in self.records.values() if r.get("built") and r.get("why_not") is None]

    def time_finalists(self, w2_len: int, report: Path | None = None) -> None:
        """Every finalist on the same report rows, one row at a time, here
        (:mod:`albert_edge.optimize.latency`): W1 and W2 as mean, p50 and p95 over rows;
        the objective compares the means. ``report``: the report split's file."""
        from albert_edge.bench.schema import machine_info
        from albert_edge.optimize.latency import ROUNDS, TIMING_ROWS, time_rows
        from albert_edge.optimize.scoring import task_rows

        finalists = self.finalists()
        if not finalists or report is None:
            return
        inputs = {
            "finalists": {r["key"]: r.get("inputs_sha256") for r in finalists},
            "seq_len": self.opts.seq_len,
            "rows": TIMING_ROWS,
            "rounds": ROUNDS,
            "report": file_id(report),
            "method": "per report row, W1 padded to --seq-len and W2 at its length",
        }
        need = 10.0 * len(finalists)
        if self.work.cached("timing", "finalists", inputs) is None and self.left() < need:
            self.notes.append(
                f"not timed: {max(0.0, self.left()):.0f} s left of the budget, timing "
                f"{len(finalists)} finalists needs ~{need:.0f} s; picked by bytes"
            )
            return
        paths = {r["key"]: self.work.dir("candidates", r["key"]) / "artifact" for r in finalists}
        rows = task_rows(report, self.opts.checkpoint)

        def measure(d: Path) -> dict[str, Any]:
            got = time_rows(
                paths,
                rows,
                self.opts.seq_len,
                seconds=max(need, self.left() - 30.0),
                progress=self.progress,
            )
            return {**got, "machine": machine_info()}

        # sealed: a run resumed after the timing picks from the same figures
        rec = self.work.run("timing", "finalists", inputs, measure)
        for r in finalists:
            got = rec["by_key"].get(r["key"])
            if not got:
                continue
            for w in ("w1", "w2"):
                r[w] = got[w]
                r[f"{w}_ms"] = got[w]["mean"]
        self.timing = {
            "seq_len": self.opts.seq_len,
            "rows": rec.get("rows"),
            "rows_from": "the report rows (the first of the split's seeded order)",
            "rounds": rec.get("rounds"),
            "threads": 1,
            "statistic": "per row: the fastest of the rounds; per candidate: mean, p50, p95 "
            "over rows; the objective compares means",
            "machine": rec.get("machine"),
            "reused": bool(rec.get("cached")),
            "tie": LATENCY_TIE,
        }

    def finalists(self) -> list[dict[str, Any]]:
        """The admitted candidates worth timing: the first :data:`MAX_FINALISTS` by the
        objective's proxy (bytes; or the layers a row runs, then bytes), and the given
        model's full-depth int8 artifact, the baseline every ratio in the report is to."""

        def layers(r: Mapping[str, Any]) -> float:
            share = (r.get("exit") or {}).get("choose_exit_share")  # choose rows, never report
            if share:
                return float(sum(k * p for k, p in enumerate(share, start=1)))
            return float(r["spec"]["depth"])

        def proxy(r: Mapping[str, Any]) -> tuple[Any, ...]:
            if self.opts.objective == "latency":
                return (layers(r), r["file_bytes"], r["key"])
            return (r["file_bytes"], layers(r), r["key"])

        ok = sorted(self.admitted(), key=proxy)
        out = ok[:MAX_FINALISTS]
        base = self.baseline_key()
        out += [r for r in ok[MAX_FINALISTS:] if r["key"] == base]
        return out

    def baseline_key(self) -> str:
        return f"given-full-d{self.shape.layers}-int8-dynamic"

    def pick(self) -> dict[str, Any]:
        ok = self.admitted()
        if not ok:
            raise OptimizeError(
                "no candidate was built and admitted within the time budget; raise "
                "--max-minutes or --max-drop"
            )
        inf = float("inf")

        def w1(r: Mapping[str, Any]) -> float:
            return float(r.get("w1_ms", inf))  # the mean over the timed report rows

        def smallest(r: Mapping[str, Any]) -> tuple[float, float, str]:
            # equal bytes (a trimmed vocabulary healed or not: the same shapes) go to the
            # better choose score, then the key: never to a timing, which differs between
            # two runs of the same inputs
            return (float(r["file_bytes"]), -float(r["choose"]["delta"]), r["key"])

        if self.opts.objective == "latency":
            # W1 by its mean over the report rows; within LATENCY_TIE of the fastest is a
            # tie a shared machine's timing cannot resolve: the fewest bytes wins it
            best = min(w1(r) for r in ok)
            return min((r for r in ok if w1(r) <= best * (1.0 + LATENCY_TIE)), key=smallest)
        return min(ok, key=smallest)
