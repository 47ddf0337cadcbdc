"""The candidates of a plan on the build pool: order, verdicts, the budget, the overrun.

A candidate starts when its fp32 form is judged (a quantized form or an exit of a
(vocabulary, depth) the rule refused at fp32 is cut, never built), its stages ran, its
precision plan has budget left to judge, no earlier run sealed it, and the time left
holds its estimate. When the budget runs out the builds still running are stopped,
except the given model's own fp32 form while nothing is admitted: a run never ships
nothing (:data:`OVERRUN_S` past the budget at most). Progress lines name candidate k of
n with its verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from albert_edge.mixed.search import min_rows
from albert_edge.optimize.context import RunContext
from albert_edge.optimize.options import Options
from albert_edge.optimize.plan import (
    NOT_BUILT,
    Candidate,
    CandidateBuild,
    Plan,
    Shape,
    candidate_estimate,
    cut_by_fp32,
    plan_budget_why,
)
from albert_edge.optimize.work import Work

# How far past --max-minutes the given model's own fp32 form may still finish when nothing is
# admitted yet (a run that ships nothing throws away every stage it paid for).
OVERRUN_S = 600.0


def not_built(c: Candidate, why: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """The record of a candidate that has no artifact (``spec``: its build's, where it
    got that far)."""
    from dataclasses import asdict

    return {
        "key": c.key,
        "spec": spec if spec is not None else asdict(c),
        "built": False,
        "why_not": why,
    }


class Search(Protocol):
    """What the scheduler reads and updates of a run (:class:`albert_edge.optimize.search.Search`)."""

    out_of_time: bool

    @property
    def opts(self) -> Options: ...
    @property
    def plan(self) -> Plan: ...
    @property
    def shape(self) -> Shape: ...
    @property
    def work(self) -> Work: ...
    @property
    def workers(self) -> int: ...
    @property
    def slowdown(self) -> float: ...
    @property
    def records(self) -> dict[str, dict[str, Any]]: ...
    @property
    def stages(self) -> dict[str, dict[str, Any]]: ...
    @property
    def notes(self) -> list[str]: ...
    @property
    def progress(self) -> Callable[[str], None]: ...

    def build_of(self, c: Candidate) -> CandidateBuild: ...
    def inputs(self, ctx: RunContext, build: CandidateBuild) -> dict[str, Any]: ...
    def missing(self, c: Candidate) -> str | None: ...
    def left(self) -> float: ...
    def reserve(self) -> float: ...
    def admitted(self) -> list[dict[str, Any]]: ...
    def overrun(self, c: Candidate) -> None: ...
    def measured(self, planned_s: float, took_s: float) -> None: ...


class Scheduler:
    """One pass over ``search.plan.candidates`` on ``pool``, recording every verdict in
    ``search.records``."""

    def __init__(self, search: Search, ctx: RunContext, pool: Any) -> None:
        self.search, self.ctx, self.pool = search, ctx, pool
        self.todo = list(search.plan.candidates)
        self.first = self.todo[0] if self.todo else None  # the given model's full-depth fp32
        self.n = len(self.todo)
        self.running: dict[Any, tuple[Candidate, dict[str, Any]]] = {}
        self.verdicts: dict[str, str | None] = {}
        self.k = 0
        self.finished = 0

    def run(self) -> None:
        while self.todo or self.running:
            for c in list(self.todo):
                if self.waits(c):
                    continue
                self.todo.remove(c)
                self.start(c)
            if self.running:
                self.collect()
        if self.search.out_of_time:
            self.search.notes.append(
                "the time budget ran out: the pick is the best candidate measured so far"
            )

    # --- verdicts ------------------------------------------------------------------------

    def record(self, c: Candidate, rec: dict[str, Any]) -> None:
        """Keep ``rec`` as ``c``'s verdict and say it on stderr."""
        self.k += 1
        self.search.records[c.key] = rec
        self.verdicts[c.key] = rec.get("why_not") if rec.get("built") else NOT_BUILT
        word = "admitted" if rec.get("built") and rec.get("why_not") is None else "out"
        why = "" if word == "admitted" else f": {rec.get('why_not')}"
        extra = ""
        if rec.get("built"):
            ch = rec["choose"]
            extra = (
                f", {rec['file_bytes']:,} bytes, choose {100 * ch['delta']:+.2f} pt "
                f"[{100 * ch['low']:+.2f}, {100 * ch['high']:+.2f}]"
            )
        cached = " (earlier run)" if rec.get("cached") else ""
        self.search.progress(f"candidate {self.k} of {self.n}: {c.key} {word}{why}{extra}{cached}")

    def waits(self, c: Candidate) -> bool:
        """Whether ``c``'s fp32 form is still to be judged (queued or building)."""
        if c.parent is None or c.parent in self.verdicts:
            return False
        waiting = {t.key for t in self.todo} | {r[0].key for r in self.running.values()}
        return c.parent in waiting

    def cut(self, c: Candidate) -> str | None:
        """Why ``c`` is not built now that its turn came, else None: its fp32 verdict, or
        a stage its checkpoint (a trimmed vocabulary, the pruned one) needs that did not
        run."""
        why = cut_by_fp32(c, self.verdicts)
        if why is None and c.stages and self.ctx.derived(c) is None:
            stage = self.search.missing(c) or c.stages[-1]
            why = f"the {stage} stage did not run ({self.search.stages.get(stage, {}).get('why')})"
        return why

    def no_plan_budget(self, build: CandidateBuild) -> str | None:
        """Why a precision plan is not built: what its depth and vocabulary left of the
        budget is spent, or too small for the choose rows to judge; None: build it."""
        left = build.budget_left
        return plan_budget_why(
            self.search.opts.max_drop, left, self.ctx.choose_rows, min_rows(left)
        )

    # --- starting and collecting builds ----------------------------------------------------

    def start(self, c: Candidate) -> None:
        """Cut ``c``, read it back from an earlier run, skip it for time, or submit it."""
        from albert_edge.optimize.build import build_candidate

        search = self.search
        why = self.cut(c)
        if why is not None:
            self.record(c, not_built(c, why))
            return
        build = search.build_of(c)
        why = self.no_plan_budget(build) if c.precision == "auto" else None
        if why is not None:
            self.record(c, not_built(c, why, build.spec()))
            return
        inputs = search.inputs(self.ctx, build)
        cached = search.work.cached("candidates", c.key, inputs)
        if cached is not None:
            cached["cached"] = True
            self.record(c, cached)
            return
        est = candidate_estimate(c, search.shape) * search.slowdown / max(1, search.workers)
        late = search.out_of_time or est > search.left() - search.reserve()
        if late and c == self.first and not search.admitted():
            search.overrun(c)  # built all the same: a run never ships nothing
        elif late:
            search.out_of_time = True
            self.record(c, not_built(c, "time ran out before it was built", build.spec()))
            return
        tmp = search.work.begin("candidates", c.key)
        self.running[self.pool.submit(build_candidate, self.ctx, build, str(tmp))] = (c, inputs)

    def collect(self) -> None:
        """Wait for the next build to finish (the given fp32 form past the budget while
        nothing is admitted; every build stopped when the budget ran out) and record it."""
        search = self.search
        done, _ = self.pool.wait(list(self.running), search.left() - search.reserve())
        keep = [h for h, (c, _) in self.running.items() if c == self.first]
        if not done and keep and not search.admitted():
            # the given model's fp32 form is the one candidate the rule always admits:
            # it finishes past the budget (bounded) rather than ship nothing
            search.overrun(self.running[keep[0]][0])
            done, _ = self.pool.wait(keep, OVERRUN_S)
        if not done:  # the budget ran out with builds still running: stop them
            search.out_of_time = True
            for h, (c, _) in list(self.running.items()):
                self.pool.cancel(h)
                self.record(c, not_built(c, "time ran out while it was being built"))
            self.running.clear()
            return
        for h in done:
            c, inputs = self.running.pop(h)
            rec = self.pool.result(h)
            self.finished += 1
            if "build_s" in rec and self.finished > search.workers:  # the first pay the imports
                took = float(rec["build_s"]) + float(rec.get("score_s", 0.0))
                search.measured(candidate_estimate(c, search.shape), took)
            rec.setdefault("key", c.key)
            if rec.get("built"):
                rec = search.work.finish("candidates", c.key, inputs, rec)
            self.record(c, rec)
