"""The search: each unit's sensitivity, a greedy plan, and NNCF's revert loop.

1. **Sensitivity** — every unit alone at each of its quantized candidates (the rest
   fp32), scored on the held-out examples with the task's metric (a ``judge``:
   :class:`albert_edge.mixed.rows.TaskScorer`) against the fp32 graph: point loss and its
   paired bootstrap interval (:func:`albert_edge.tasks.paired_metric_interval`, the
   project's one bootstrap: for accuracy, the correctness vectors' paired bootstrap draw
   for draw). These evaluations are independent and run on the executor.
2. **Greedy plan** — each unit takes the candidate best for the objective (fewest bytes,
   or least measured time) among those the admission rule admits alone. The rule is the
   depth package's :class:`~albert_edge.depth.choose.Rule` (point loss at most
   ``max_drop`` and the interval's lower bound at least ``min_lower_bound``): one
   definition of "inside the budget".
3. **Combined plan re-validated**; while it fails the rule, the worst offender — the
   quantized unit whose own loss at its current precision is largest — moves one step
   wider (int4-tensor → int4 → int8 → fp32) and the plan is validated again (NNCF's
   ``quantize_with_accuracy_control`` reverts the same way, reporting "N of M reverted").
   An integer graph's fallback (``from_narrowest``) starts from every unit integer and
   reverts in NNCF's order instead: each unit reverted alone from that start, ranked by
   the accuracy it recovers (:func:`_revert_ranking`).

Deterministic: the rows are drawn with a seed, every evaluation runs ONNX Runtime on one
thread, the bootstrap is seeded, ties break by tensor name, and the executor keeps the
order of its inputs; so the plan is the same for any worker count.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from albert_edge.depth.choose import Rule
from albert_edge.errors import NoPlanError, PrecisionPlanError
from albert_edge.tasks import paired_metric_interval

if TYPE_CHECKING:
    from albert_edge.mixed.setup import Assignment, Executor, Outcome
    from albert_edge.mixed.units import Unit
    from albert_edge.tasks import Metrics

OBJECTIVES = ("bytes", "latency")
# A time within this fraction of the fastest is a tie that the fewer bytes win: repeated
# timings on a 2-core VM do not resolve less (optimize's pick uses the same rule).
LATENCY_TIE = 0.10
WIDER = {"int4-tensor": "int4", "int4": "int8", "int8": "fp32"}
DEFAULT_ROWS = 1000
DEFAULT_SEED = 34


class Judge(Protocol):
    """Scores an evaluation's outputs with the task's metric; :meth:`reference` is called
    first, on the fp32 graph's (what a SQuAD v2.0 null threshold is chosen on)."""

    def reference(self, out: Outcome) -> Metrics: ...

    def __call__(self, out: Outcome) -> Metrics: ...


def min_rows(max_drop: float) -> int:
    """The fewest held-out examples a budget of ``max_drop`` points can be judged on: one
    example must move the metric by at most half the budget (100 / n ≤ max_drop / 2: an
    accuracy or a SQuAD F1 is a mean over examples), and never fewer than 50 (the
    bootstrap's percentiles need a spread)."""
    return max(50, math.ceil(200 / max_drop)) if max_drop > 0 else 10**9


@dataclass(frozen=True)
class Settings:
    """The budget and how the search spends it."""

    max_drop: float
    min_lower_bound: float = -1.5
    objective: str = "bytes"
    rows: int = DEFAULT_ROWS
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        if not self.max_drop >= 0 or not math.isfinite(self.max_drop):
            raise PrecisionPlanError(
                f"--max-drop must be a number of points >= 0, got {self.max_drop}"
            )
        if self.objective not in OBJECTIVES:
            raise PrecisionPlanError(
                f"unknown --objective {self.objective!r}; choose one of {', '.join(OBJECTIVES)}"
            )

    @property
    def rule(self) -> Rule:
        return Rule(max_point_loss=self.max_drop, min_lower_bound=self.min_lower_bound)


@dataclass
class Trial:
    """One evaluated assignment against the fp32 graph (fractions: 0.01 = 1 point)."""

    assignment: dict[str, str]
    delta: float
    delta_low: float
    delta_high: float
    model_bytes: int
    seconds: float
    why_not: str | None = None

    def row(self) -> dict[str, Any]:
        return {
            "delta": self.delta,
            "delta_low": self.delta_low,
            "delta_high": self.delta_high,
            "model_bytes": self.model_bytes,
            "seconds": round(self.seconds, 4),
            "why_not": self.why_not,
        }

    def loss_text(self, metric: str = "accuracy") -> str:
        """ "0.56 points lost [95 % CI ...]", naming the metric unless it is accuracy."""
        lost, lo, hi = (
            round(-100 * x, 2) + 0.0 for x in (self.delta, self.delta_high, self.delta_low)
        )
        unit = "" if metric == "accuracy" else f" {metric}"
        return f"{lost:.2f}{unit} points lost [95 % CI {lo:+.2f}, {hi:+.2f}]"


@dataclass
class SearchResult:
    units: list[Unit]
    sensitivity: dict[str, dict[str, Trial]]  # tensor -> candidate -> its trial alone
    plan: dict[str, str]
    final: Trial
    reverted: list[dict[str, Any]] = field(default_factory=list)
    combined: list[Trial] = field(default_factory=list)
    metric: str = "accuracy"  # the task's primary metric, which the budget is in
    reference_value: float = 0.0  # the fp32 graph's, on the held-out examples
    rows: int = 0
    evaluations: int = 0
    seconds: float = 0.0
    executor: dict[str, Any] = field(default_factory=dict)

    def trials(self) -> list[Trial]:
        """Every assignment evaluated: each unit alone, then each combined plan."""
        return [t for by in self.sensitivity.values() for t in by.values()] + self.combined


def _trial(
    assignment: Assignment, out: Outcome, reference: Metrics, rule: Rule, judge: Judge
) -> Trial:
    iv = paired_metric_interval(judge(out), reference)
    t = Trial(dict(assignment), iv.delta, iv.low, iv.high, out.model_bytes, out.seconds)
    t.why_not = rule.why_not(t.row())
    return t


def _assign(units: Sequence[Unit], plan: Mapping[str, str]) -> Assignment:
    return tuple(sorted((u.tensor, plan.get(u.tensor, "fp32")) for u in units))


def _greedy(
    units: Sequence[Unit], sens: dict[str, dict[str, Trial]], objective: str
) -> dict[str, str]:
    """Each unit's best admitted candidate for the objective (fp32 when none is).

    Bytes are the unit's own (its parameters at the candidate's width, as the plan's floor
    counts them), not the single-unit file's size: a file with one small int4 weight also
    pays for the 4-bit decode function once, which every int4 unit of a plan shares.
    Between candidates of one width (a TFLite table's ``int4`` in blocks and
    ``int4-tensor``) the single-unit file's measured bytes decide: the scales."""
    from albert_edge.facts import PRECISION_BYTES

    plan = {}
    for u in units:
        admitted = [(c, t) for c, t in sens[u.tensor].items() if t.why_not is None]

        def key(ct: tuple[str, Trial], u: Unit = u) -> tuple[float, float, str]:
            c, t = ct
            return (u.params * PRECISION_BYTES[c], t.model_bytes, c)

        if objective == "latency" and admitted:
            # a candidate within LATENCY_TIE of the fastest is a tie the fewer bytes win:
            # a table's gather costs the same at any width, and its single-unit timings
            # differ by noise alone (a word table stayed fp32 at 4x its int8 bytes)
            fastest = min(t.seconds for _, t in admitted)
            admitted = [ct for ct in admitted if ct[1].seconds <= fastest * (1 + LATENCY_TIE)]
        plan[u.tensor] = min(admitted, key=key)[0] if admitted else "fp32"
    return plan


def _worst(
    units: Sequence[Unit], plan: dict[str, str], sens: dict[str, dict[str, Trial]]
) -> str | None:
    """The quantized unit whose own loss at its current precision is largest (it can
    still move wider); ties: the lower interval bound, then the name."""
    movable = _movable(units, plan)
    if not movable:
        return None

    def offence(u: Unit) -> tuple[float, float, str]:
        t = sens[u.tensor][plan[u.tensor]]
        return (-t.delta, -t.delta_low, u.tensor)

    return max(movable, key=offence).tensor


def _movable(units: Sequence[Unit], plan: dict[str, str]) -> list[Unit]:
    return [u for u in units if plan[u.tensor] != "fp32" and WIDER[plan[u.tensor]] in u.candidates]


def _revert_ranking(
    units: Sequence[Unit],
    plan: dict[str, str],
    run: Executor,
    reference: Metrics,
    rule: Any,
    judge: Judge,
) -> list[tuple[str, Trial]]:
    """Each quantized unit moved one step wider from ``plan`` alone and evaluated, best
    first: the order an integer graph's fallback reverts in. This is NNCF's ranking
    (``quantize_with_accuracy_control`` reverts each quantizer group from the fully
    quantized model and sorts by the metric it recovers), and it is what an integer graph
    needs: a unit's loss when it alone is integer in a float graph says little about what
    reverting it recovers among integer neighbours (measured on TFLite ``int8-full``: the
    single-unit order reverted eight units with no gain and only the ninth recovered the
    loss). Ties: the higher lower bound of the interval, then the name."""
    movable = _movable(units, plan)
    assigns = [_assign(units, {**plan, u.tensor: WIDER[plan[u.tensor]]}) for u in movable]
    outcomes = run.map(assigns) if assigns else []
    trials = [
        (u.tensor, _trial(a, o, reference, rule, judge))
        for u, a, o in zip(movable, assigns, outcomes, strict=True)
    ]
    return sorted(trials, key=lambda tt: (-tt[1].delta, -tt[1].delta_low, tt[0]))


def search(
    units: Sequence[Unit],
    run: Executor,
    settings: Settings,
    progress: Callable[[str], None] = lambda _: None,
    *,
    judge: Judge,
    from_narrowest: bool = False,
) -> SearchResult:
    """Sensitivity, greedy plan, revert loop; raises :class:`NoPlanError` when no plan
    quantizing anything meets the budget (with the best one found and its loss).

    ``from_narrowest``: start the revert loop from every unit at its narrowest candidate
    instead of the greedy plan — an integer graph's fallback (NNCF's start: quantize
    everything, then revert the worst offender while over budget), so the fewest units
    go back to float. The greedy start would drop every unit whose single-unit trial
    misses the budget, though those trials all share the loss of the integer ops around
    the units (measured: 8 of 9 TFLite int8-full units in float at 0.15 points)."""
    start = time.perf_counter()
    sens, reference, singles = _sensitivity(units, run, settings.rule, judge, progress)
    plan = (
        {u.tensor: u.candidates[-1] for u in units}
        if from_narrowest
        else _greedy(units, sens, settings.objective)
    )
    loop = _RevertLoop(units, run, reference, settings.rule, judge, progress)
    trial = loop.revert_until_admitted(plan, sens, from_narrowest)
    result = SearchResult(
        list(units),
        sens,
        plan,
        trial,
        loop.reverted,
        loop.combined,
        metric=reference.primary,
        reference_value=float(reference.value),
        rows=int(reference.examples),
        evaluations=singles + len(loop.combined) + loop.rank_evals,
        seconds=time.perf_counter() - start,
        executor={"kind": run.kind, "workers": run.workers},
    )
    if trial.why_not is not None or all(p == "fp32" for p in plan.values()):
        raise NoPlanError(_no_plan_message(result, settings))
    return result


def _sensitivity(
    units: Sequence[Unit],
    run: Executor,
    rule: Rule,
    judge: Judge,
    progress: Callable[[str], None],
) -> tuple[dict[str, dict[str, Trial]], Metrics, int]:
    """Every unit alone at each of its quantized candidates, the rest fp32, against the
    fp32 graph: the trials by unit and candidate, the fp32 graph's metrics (the
    reference every later trial is judged against) and how many evaluations it took."""
    fp32 = {u.tensor: "fp32" for u in units}
    jobs: list[tuple[str, str]] = [
        (u.tensor, c) for u in units for c in u.candidates if c != "fp32"
    ]
    assignments = [_assign(units, fp32)] + [_assign(units, {**fp32, t: c}) for t, c in jobs]
    progress(f"sensitivity: {len(jobs)} single-unit builds on {run.workers} {run.kind} worker(s)")
    outcomes = run.map(assignments)
    reference = judge.reference(outcomes[0])
    base = _trial(assignments[0], outcomes[0], reference, rule, judge)
    sens: dict[str, dict[str, Trial]] = {u.tensor: {"fp32": base} for u in units}
    for (t, c), a, out in zip(jobs, assignments[1:], outcomes[1:], strict=True):
        sens[t][c] = _trial(a, out, reference, rule, judge)
    return sens, reference, len(assignments)


@dataclass
class _RevertLoop:
    """The combined plan validated, and while it fails the rule its worst offender moved
    one step wider; what it evaluated is kept for the result."""

    units: Sequence[Unit]
    run: Executor
    reference: Metrics
    rule: Rule
    judge: Judge
    progress: Callable[[str], None]
    combined: list[Trial] = field(default_factory=list)
    reverted: list[dict[str, Any]] = field(default_factory=list)
    rank_evals: int = 0

    def revert_until_admitted(
        self, plan: dict[str, str], sens: dict[str, dict[str, Trial]], from_narrowest: bool
    ) -> Trial:
        """Validate ``plan`` (changed in place) until the rule admits it or no unit can
        move wider; the last combined trial. ``from_narrowest``: revert in NNCF's order
        (:func:`_revert_ranking`), else the worst single-unit offender first."""
        units, reference = self.units, self.reference
        ranking: list[tuple[str, Trial]] | None = None
        while True:
            a = _assign(units, plan)
            trial = _trial(a, self.run.map([a])[0], reference, self.rule, self.judge)
            self.combined.append(trial)
            self.progress(
                f"combined plan: {trial.loss_text(reference.primary)}"
                + (f" ({trial.why_not})" if trial.why_not else "")
            )
            if trial.why_not is None:
                return trial
            if from_narrowest and ranking is None:
                ranking = _revert_ranking(units, plan, self.run, reference, self.rule, self.judge)
                self.rank_evals = len(ranking)
                self.progress(
                    "revert order: "
                    + ", ".join(f"{t} ({r.loss_text(reference.primary)})" for t, r in ranking)
                )
            movable = {u.tensor for u in _movable(units, plan)}
            ranked = [t for t, _ in ranking or () if t in movable]
            worst = ranked[0] if ranked else _worst(units, plan, sens)
            if worst is None:
                return trial
            self._revert(plan, worst, trial, dict(ranking or ()).get(worst))
            if ranking is not None:  # a unit moves one step per ranking (int8 -> fp32 here)
                ranking = [(t, r) for t, r in ranking if t != worst]

    def _revert(self, plan: dict[str, str], worst: str, trial: Trial, alone: Trial | None) -> None:
        """Move ``worst`` one step wider in ``plan`` and record it (with the loss of
        reverting it alone, where the ranking measured that)."""
        self.reverted.append(
            {
                "tensor": worst,
                "from": plan[worst],
                "to": WIDER[plan[worst]],
                "plan_loss_points": round(-100 * trial.delta, 4),
                **(
                    {"loss_if_reverted_alone_points": round(-100 * alone.delta, 4)} if alone else {}
                ),
            }
        )
        plan[worst] = WIDER[plan[worst]]


def _no_plan_message(result: SearchResult, settings: Settings) -> str:
    tried = [t for t in result.trials() if any(p != "fp32" for p in t.assignment.values())]
    best = min(tried, key=lambda t: (-t.delta, t.model_bytes)) if tried else result.final
    quantized = ", ".join(f"{k}={v}" for k, v in sorted(best.assignment.items()) if v != "fp32")
    return (
        f"no precision plan that quantizes anything stays within --max-drop "
        f"{settings.max_drop} (rule: {settings.rule.describe().replace('full depth', 'fp32')}); "
        f"best plan found: {quantized or 'all fp32'}, {best.loss_text(result.metric)}; nothing "
        "was written"
    )
