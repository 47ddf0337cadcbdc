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


def _per_layer_judge(loss: dict, seen: list):  # type: ignore[no-untyped-def]
    """Points lost per level: ``loss[heads]`` for a count or a per-layer tuple, plus
    0.01 per removed sixteenth of 64 FFN neurons."""

    def judge(h, f: int) -> dict:  # type: ignore[no-untyped-def]
        key = h if isinstance(h, int) else tuple(h)
        seen.append((key, f))
        points = loss[key] + 0.01 * (64 - f) / 4
        return {"heads_keep": h if isinstance(h, int) else list(h), "ffn_keep": f,
                "delta": -points / 100, "delta_low": -points / 100}  # fmt: skip

    return judge


def _flops(h, f: int) -> float:  # type: ignore[no-untyped-def]
    counts = [h, h] if isinstance(h, int) else list(h)
    return 10 * sum(counts) + f / 64


def test_two_shared_layers_give_up_heads_one_layer_at_a_time() -> None:
    """Uniform 2 heads lose 0.9 (refused); layer 0 can lose two heads (0.3), layer 1 one
    (0.4 with both): the descent reaches (2, 3), the cheapest admitted, and stops."""
    loss = {4: 0.0, 3: 0.1, 2: 0.9, 1: 5.0, (3, 4): 0.05, (4, 3): 0.2, (2, 3): 0.3,
            (3, 2): 0.95, (1, 3): 2.0, (2, 2): 0.9}  # fmt: skip
    seen: list = []
    chosen, evidence, _ = search(
        _per_layer_judge(loss, seen), _flops, 4, 64, None, 64, _opts(0.5), layers=2
    )
    assert chosen == ((2, 3), 64)
    assert ((2, 3), 64) in seen and ((1, 3), 64) in seen and ((3, 2), 64) in seen
    chosen_rows = [r for r in evidence if r.get("chosen")]
    assert [(r["heads_keep"], r["ffn_keep"]) for r in chosen_rows] == [([2, 3], 64)]


def test_one_shared_layer_or_fixed_heads_stay_uniform() -> None:
    loss = {4: 0.0, 3: 0.1, 2: 0.9, 1: 5.0}
    chosen, _, _ = search(_per_layer_judge(loss, []), _flops, 4, 64, None, 64, _opts(0.5))
    assert chosen == (3, 64)
    chosen, _, _ = search(_per_layer_judge(loss, []), _flops, 4, 64, 3, 64, _opts(0.5), layers=2)
    assert chosen == (3, 64)
