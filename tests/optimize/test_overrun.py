"""A run whose budget is spent before any candidate is admitted still ships: the given model's
own fp32 form (the one candidate the rule always admits) is built past the budget, bounded by
``OVERRUN_S``, and the report says so; every other candidate is stopped or never started.

The builds run on an in-process :class:`albert_edge.optimize.pool.Pool` (the search's own
scheduling protocol), so the test measures the scheduling rule, not a model build."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from albert_edge.optimize.api import check
from albert_edge.optimize.context import RunContext
from albert_edge.optimize.options import Options
from albert_edge.optimize.search import Search

DEV = Path(__file__).resolve().parents[1] / "data" / "sst2" / "dev.tsv"


class _SlowPool:
    """Runs a build when it is waited on; the first candidate takes ``first_s`` seconds,
    every other one ``other_s`` (longer than any wait the search gives it)."""

    kind = "local"

    def __init__(self, first: str, first_s: float, other_s: float) -> None:
        self.first, self.first_s, self.other_s = first, first_s, other_s
        self.started: dict[int, tuple[str, float]] = {}
        self.cancelled: list[str] = []

    def submit(self, fn: Any, ctx: RunContext, build: Any, tmp: str) -> int:
        h = len(self.started)
        self.started[h] = (build.key, time.monotonic())
        return h

    def _needs(self, h: int) -> float:
        key, t0 = self.started[h]
        return t0 + (self.first_s if key == self.first else self.other_s) - time.monotonic()

    def wait(self, handles: list[int], timeout: float) -> tuple[list[int], list[int]]:
        soonest = min(handles, key=self._needs)
        need = self._needs(soonest)
        if need > timeout:
            time.sleep(max(0.0, min(timeout, 0.05)))
            return [], list(handles)
        time.sleep(max(0.0, need))
        return [soonest], [h for h in handles if h != soonest]

    def result(self, h: int) -> dict[str, Any]:
        key, _ = self.started[h]
        choose = {"delta": 0.0, "low": 0.0, "high": 0.0}
        return {"key": key, "built": True, "why_not": None, "file_bytes": 1000, "choose": choose}

    def cancel(self, h: int) -> None:
        self.cancelled.append(self.started[h][0])

    def close(self) -> None:
        pass


def _ctx(tmp_path: Path) -> RunContext:
    """A run's context as the stages would leave it (no stage runs: the pool builds nothing)."""
    split = tmp_path / "split"
    return RunContext(
        given=None,
        target="onnx",
        objective="latency",
        seq_len=128,
        max_drop=0.5,
        min_lower_bound=-1.5,
        layers=4,
        fit=split / "fit.tsv",
        choose=split / "choose.tsv",
        choose_rows=436,
        report=split / "report.tsv",
        reference_choose=split / "reference-choose.npy",
        reference_report=split / "reference-report.npy",
        split="0" * 64,
    )


def _search(tmp_path: Path) -> Search:
    opts = Options(
        checkpoint=None,
        data=DEV,
        max_drop=0.5,
        output=tmp_path / "out",
        max_minutes=5.0,
        quiet=True,
    )
    search = Search(opts, check(opts))
    search.work.open()
    return search


def test_nothing_admitted_when_the_budget_ends_builds_the_given_fp32_past_it(
    tmp_path: Path,
) -> None:
    search = _search(tmp_path)
    first = search.plan.candidates[0]
    assert first.source == "given" and first.precision == "fp32"
    # 0.5 s left before the reserve (a quarter of so small a budget) for the candidates
    search.budget_s = (search.progress.elapsed() + 0.5) / 0.75
    pool = _SlowPool(first.key, first_s=1.5, other_s=60.0)
    search.run_candidates(_ctx(tmp_path), pool)

    assert [r["key"] for r in search.admitted()] == [first.key]
    assert any("built past it" in n and first.key in n for n in search.notes)
    assert all(k != first.key for k in pool.cancelled)
    others = [r for k, r in search.records.items() if k != first.key]
    assert others and all(not r.get("built") for r in others)  # stopped or never started


def test_budget_already_spent_still_starts_the_given_fp32(tmp_path: Path) -> None:
    search = _search(tmp_path)
    first = search.plan.candidates[0]
    search.budget_s = 0.0  # spent before the first candidate
    pool = _SlowPool(first.key, first_s=0.2, other_s=60.0)
    search.run_candidates(_ctx(tmp_path), pool)

    assert [r["key"] for r in search.admitted()] == [first.key]
    others = [r for k, r in search.records.items() if k != first.key]
    assert others and all(not r.get("built") for r in others)
