"""The search's logic on synthetic outcomes: greedy choice, revert loop, no-plan refusal.

The executor here is a table of per-row correctness vectors (which rows each unit's
quantization gets wrong), scored as accuracy by a judge that builds the task layer's
Metrics from them, so the rule, the bootstrap and the revert order are exercised exactly,
without building graphs; the real builds are tested in test_build.py (and on task data,
F1 included, in test_task_data.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pytest

from albert_edge.errors import NoPlanError, PrecisionPlanError
from albert_edge.mixed.evaluate import Assignment, Outcome
from albert_edge.mixed.search import Settings, min_rows
from albert_edge.mixed.search import search as _search
from albert_edge.mixed.units import Unit
from albert_edge.tasks import Metrics, TaskKind

N = 400
SIZE = {"fp32": 4, "int8": 1, "int4": 0.5, "int4-tensor": 0.45}  # per tensor: no block scales


class Table:
    """Rows each (unit, precision) gets wrong; a plan gets wrong the union of its units'."""

    workers = 1
    kind = "table"

    def __init__(self, units: Sequence[Unit], wrong: dict[tuple[str, str], set[int]]):
        self.units, self.wrong = {u.tensor: u for u in units}, wrong
        self.calls: list[Assignment] = []

    def map(self, assignments: Sequence[Assignment]) -> list[Outcome]:
        out = []
        for a in assignments:
            self.calls.append(a)
            correct = np.ones(N, dtype=bool)
            for t, p in a:
                correct[list(self.wrong.get((t, p), set()))] = False
            size = sum(self.units[t].params * SIZE[p] for t, p in a)
            out.append(Outcome({"correct": [correct]}, int(size), 1.0))
        return out


class Accuracy:
    """The judge of Table's outcomes: accuracy of the correctness vector."""

    def reference(self, out: Outcome) -> Metrics:
        return self(out)

    def __call__(self, out: Outcome) -> Metrics:
        correct = out.outputs["correct"][0].astype(np.float64)
        return Metrics(
            kind=TaskKind.CLASSIFICATION,
            values={"accuracy": float(correct.mean())},
            primary="accuracy",
            examples=len(correct),
            predictions=list(correct),
            resample=lambda idx: {"accuracy": correct[idx].mean(axis=1)},
        )


def search(*args, **kw):  # type: ignore[no-untyped-def]
    return _search(*args, judge=Accuracy(), **kw)


def _units() -> list[Unit]:
    return [Unit(n, n, 1000, (10, 100), ("fp32", "int8", "int4")) for n in ("a", "b", "c")]


def test_greedy_takes_the_smallest_admitted_candidate() -> None:
    units = _units()
    wrong = {("a", "int4"): set(range(8)), ("b", "int4"): {0}}  # a int4 loses 2 points
    plan = search(units, Table(units, wrong), Settings(max_drop=1.0, min_lower_bound=-3))
    assert plan.plan == {"a": "int8", "b": "int4", "c": "int4"}
    assert plan.final.why_not is None and plan.reverted == []


def test_combined_plan_over_budget_reverts_the_worst_offender() -> None:
    units = _units()
    # each unit alone loses 0.75 points at int4 (3 rows), different rows: together 2.25
    wrong = {
        ("a", "int4"): {0, 1, 2},
        ("b", "int4"): {3, 4, 5},
        ("c", "int4"): {6, 7, 8, 9},  # the worst alone: 1.0 point
    }
    s = Settings(max_drop=1.0, min_lower_bound=-3)
    result = search(units, Table(units, wrong), s)
    assert next(r["tensor"] for r in result.reverted) == "c"  # the worst offender first
    assert result.final.why_not is None
    assert -100 * result.final.delta <= 1.0
    assert len(result.combined) == len(result.reverted) + 1


def test_budget_nothing_meets_names_the_best_plan_and_its_loss() -> None:
    units = _units()
    wrong = {(u.tensor, p): set(range(20)) for u in units for p in ("int8", "int4")}
    with pytest.raises(NoPlanError, match=r"best plan found: a=int4, 5\.00 points lost"):
        search(units, Table(units, wrong), Settings(max_drop=1.0, min_lower_bound=-3))


def test_same_plan_from_the_same_outcomes_whatever_the_call_order() -> None:
    units = _units()
    wrong = {("a", "int4"): {0, 1, 2}, ("b", "int4"): {3, 4, 5}, ("c", "int4"): {6, 7, 8, 9}}
    s = Settings(max_drop=1.0, min_lower_bound=-3)
    first = search(units, Table(units, wrong), s)
    again = search(list(reversed(units)), Table(units, wrong), s)
    assert first.plan == again.plan


def test_settings_refuse_a_bad_budget_and_objective() -> None:
    with pytest.raises(PrecisionPlanError, match="--max-drop"):
        Settings(max_drop=-1)
    with pytest.raises(PrecisionPlanError, match="--objective"):
        Settings(max_drop=1, objective="watts")
    assert min_rows(1.0) == 200 and min_rows(10) == 50


class Timed(Table):
    """As Table, with int8 units measured faster than int4 ones (seconds per unit at
    each precision: ``cost``)."""

    cost: ClassVar[dict[str, float]] = {"int4": 0.5, "int8": 0.1, "fp32": 0.3}

    def map(self, assignments: Sequence[Assignment]) -> list[Outcome]:
        outs = super().map(assignments)
        return [
            Outcome(o.outputs, o.model_bytes, 1.0 + sum(self.cost[p] for _, p in a))
            for a, o in zip(assignments, outs, strict=True)
        ]


class NearTie(Timed):
    """Every precision within a few per cent of the others (a table's gather)."""

    cost: ClassVar[dict[str, float]] = {"int4": 0.03, "int8": 0.0, "fp32": 0.01}


def test_latency_objective_takes_the_fastest_admitted_candidate() -> None:
    units = _units()
    fast = search(units, Timed(units, {}), Settings(max_drop=1.0, objective="latency"))
    small = search(units, Timed(units, {}), Settings(max_drop=1.0, objective="bytes"))
    assert set(fast.plan.values()) == {"int8"} and set(small.plan.values()) == {"int4"}


def test_latency_within_the_tie_goes_to_the_fewer_bytes() -> None:
    """Times within LATENCY_TIE of the fastest are noise: the narrowest width wins, so a
    table that runs as fast at int4 is not kept at fp32 because one timing was lower."""
    from albert_edge.mixed.search import LATENCY_TIE

    assert 1.0 + LATENCY_TIE >= 1.03
    units = _units()
    tied = search(units, NearTie(units, {}), Settings(max_drop=1.0, objective="latency"))
    assert set(tied.plan.values()) == {"int4"}


def test_integer_fallback_starts_from_every_unit_integer_and_reverts() -> None:
    units = [Unit(n, n, 1000, (10, 100), ("fp32", "int8")) for n in ("a", "b", "c")]
    wrong = {("a", "int8"): {0}, ("b", "int8"): {0}, ("c", "int8"): {0, 1, 2, 3}}
    s = Settings(max_drop=0.5, min_lower_bound=-3)
    result = search(units, Table(units, wrong), s, from_narrowest=True)
    assert result.combined[0].assignment == {"a": "int8", "b": "int8", "c": "int8"}
    assert [(r["tensor"], r["to"]) for r in result.reverted] == [("c", "fp32")]
    assert result.plan == {"a": "int8", "b": "int8", "c": "fp32"}


class Interacting(Table):
    """As Table, plus rows lost only while b and c are both integer (an interaction no
    single-unit trial shows)."""

    def map(self, assignments: Sequence[Assignment]) -> list[Outcome]:
        outs = super().map(assignments)
        for a, o in zip(assignments, outs, strict=True):
            if dict(a).get("b") == "int8" and dict(a).get("c") == "int8":
                o.outputs["correct"][0][[10, 11, 12, 13, 14, 15]] = False
        return outs


def test_integer_fallback_reverts_what_recovers_most_from_the_integer_start() -> None:
    """NNCF's order: the unit whose revert from the all-integer plan recovers most goes
    first — not the one that loses most alone in a float graph (a here)."""
    units = [Unit(n, n, 1000, (10, 100), ("fp32", "int8")) for n in ("a", "b", "c")]
    wrong = {("a", "int8"): {0, 1}, ("b", "int8"): {2}, ("c", "int8"): set()}
    s = Settings(max_drop=1.0, min_lower_bound=-3)
    result = search(units, Interacting(units, wrong), s, from_narrowest=True)
    first = result.reverted[0]
    # b recovers the six interaction rows and its own (c: the six; a: its two); the
    # single-unit order would have reverted a first, recovering two rows of nine
    assert first["tensor"] == "b"
    assert first["loss_if_reverted_alone_points"] == 0.5  # a's two rows are left
    assert result.plan == {"a": "int8", "b": "fp32", "c": "int8"}
    assert result.final.why_not is None
    # three single-unit ranking builds beside the sensitivity and the combined plans
    assert result.evaluations == 1 + 3 + len(result.combined) + 3


def test_one_scale_table_is_taken_when_admitted_and_reverts_to_blocks() -> None:
    """int4 and int4-tensor have one width (the floor's); the single-unit files' measured
    bytes (the blocks' scales) decide between them, and a revert moves int4-tensor to int4."""
    table = Unit(
        "t", "word table (V x E)", 1000, (100, 10), ("fp32", "int8", "int4", "int4-tensor")
    )
    units = [table, *_units()[:2]]
    s = Settings(max_drop=1.0, min_lower_bound=-3)
    assert search(units, Table(units, {}), s).plan["t"] == "int4-tensor"
    # alone within budget (0.75 points), together with a's int4 over it: t is the worst
    wrong = {("t", "int4-tensor"): {0, 1, 2}, ("a", "int4"): {3, 4}}
    result = search(units, Table(units, wrong), s)
    assert result.reverted[0] == {
        **result.reverted[0],
        "tensor": "t",
        "from": "int4-tensor",
        "to": "int4",
    }
    assert result.plan == {"t": "int4", "a": "int4", "b": "int4"}
