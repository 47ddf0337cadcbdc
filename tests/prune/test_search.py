"""The level a budget admits: cheapest admitted by the rule, found by bisection per head
count, every judged level in the evidence (a pure function: judged by a table here)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from albert_edge.prune import PruneError
from albert_edge.prune.search import ffn_levels, search


def _opts(max_drop: float | None) -> SimpleNamespace:
    return SimpleNamespace(max_drop=max_drop, min_lower_bound=-1.5)


def _judge(loss: dict[int, float], seen: list[tuple[int, int]]):  # type: ignore[no-untyped-def]
    """Loss in points = per removed head ``loss[h]`` + 0.01 per removed 1/16 of 64."""

    def judge(h: int, f: int) -> dict:
        seen.append((h, f))
        points = loss[h] + 0.01 * (64 - f) / 4
        return {"heads_keep": h, "ffn_keep": f, "delta": -points / 100, "delta_low": -points / 100}

    return judge


def test_cheapest_admitted_level_wins_and_evidence_has_every_judged_level() -> None:
    seen: list[tuple[int, int]] = []
    judge = _judge({4: 0.0, 3: 0.2, 2: 0.45, 1: 2.0}, seen)
    chosen, evidence, rule = search(
        judge, lambda h, f: 10 * h + f / 64, 4, 64, None, None, _opts(0.5)
    )
    # heads 3: every width admitted (0.2 + 0.15 at 4 neurons); heads 2: 0.45 + x <= 0.5
    # -> 44 neurons (5 steps removed: 0.05); heads 1 fails at full width and ends the walk
    assert chosen == (2, 44)
    assert rule == {"max_point_loss": 0.5, "min_lower_bound": -1.5}
    assert (1, 64) in seen and not any(h == 1 and f < 64 for h, f in seen)
    assert len(seen) < 4 * len(ffn_levels(64))  # bisection, not the whole grid
    assert {(r["heads_keep"], r["ffn_keep"]) for r in evidence} == set(seen) | {(4, 64)}
    assert [r for r in evidence if r["chosen"]] == [
        r for r in evidence if (r["heads_keep"], r["ffn_keep"]) == (2, 44)
    ]
    assert all((r["why_not"] is None) == (-100 * r["delta"] <= 0.5 + 1e-9) for r in evidence)


def test_fixed_axis_searches_the_other_and_no_budget_takes_the_level() -> None:
    seen: list[tuple[int, int]] = []
    judge = _judge({4: 0.0, 3: 0.2, 2: 0.45, 1: 2.0}, seen)
    chosen, _, _ = search(judge, lambda h, f: 10 * h + f, 4, 64, 3, None, _opts(0.3))
    assert chosen == (3, 24)  # 0.2 + 0.01 per sixteenth removed <= 0.3: 10 of 16 removed
    chosen, evidence, rule = search(judge, lambda h, f: 0.0, 4, 64, 2, 16, _opts(None))
    assert (chosen, rule, len(evidence)) == ((2, 16), None, 1)


def test_a_budget_nothing_meets_is_refused() -> None:
    judge = _judge({4: 0.0, 3: 5.0, 2: 5.0, 1: 5.0}, [])
    with pytest.raises(PruneError, match=r"--max-drop 0.0: no pruned level .*nothing written"):
        search(judge, lambda h, f: h + f, 4, 64, None, None, _opts(0.0))


def test_ffn_levels_are_sixteenths() -> None:
    assert ffn_levels(512) == list(range(32, 513, 32))
    assert ffn_levels(8) == list(range(1, 9))
