"""A plan's costs: encoder FLOPs, and the FLOPs a batch-1 runtime at N threads pays when
its fused attention runs heads in rounds of N (the search's cost with
``--runtime-threads``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from albert_edge.prune.plan import (
    encoder_flops,
    encoder_parameters,
    heads_label,
    make_plan,
    paid_heads,
    per_layer,
    runtime_flops,
    uniform,
)
from albert_edge.prune.search import search

# the held-out model's shape: 6 layers, 2 groups, H 256, E 64, FFN 512, 4 heads
SHAPE = SimpleNamespace(
    hidden_size=256,
    embedding_size=64,
    num_attention_heads=4,
    intermediate_size=512,
    num_hidden_layers=6,
    num_hidden_groups=2,
    inner_group_num=1,
)


@pytest.mark.parametrize(
    ("heads", "threads", "paid"),
    [(3, None, 3), (3, 1, 3), (3, 2, 4), (2, 2, 2), (1, 2, 2), (4, 2, 4), (5, 4, 8), (3, 8, 8)],
)
def test_heads_are_paid_in_rounds_of_the_threads(
    heads: int, threads: int | None, paid: int
) -> None:
    assert paid_heads(heads, threads) == paid


def test_runtime_flops_pay_the_attention_of_the_rounded_heads_and_nothing_else() -> None:
    for h in range(1, 5):
        for f in (32, 512):
            assert runtime_flops(SHAPE, h, f, None) == encoder_flops(SHAPE, h, f)
            assert runtime_flops(SHAPE, h, f, 1) == encoder_flops(SHAPE, h, f)
    # 3 heads at 2 threads: the fused attention's terms of 4 heads, the output
    # projection (a plain matrix product) of 3
    T, H, d, passes = 128, 256, 64, 6
    fused_per_head = 3 * T * H * d + 2 * T * T * d
    three, four = runtime_flops(SHAPE, 3, 32, 2), runtime_flops(SHAPE, 4, 32, 2)
    assert three == encoder_flops(SHAPE, 3, 32) + 2 * passes * fused_per_head
    assert four - three == 2 * passes * T * d * H  # one head's output projection
    assert runtime_flops(SHAPE, 2, 32, 2) == encoder_flops(SHAPE, 2, 32)


def test_a_search_costed_at_two_threads_keeps_the_head_flops_would_trade() -> None:
    """Removing a head forces a wider FFN: by FLOPs 3 heads with 64 neurons win; at 2
    threads the third head is paid as the fourth, so 4 heads with 32 neurons cost less."""
    loss = {4: 0.0, 3: 0.3, 2: 5.0, 1: 5.0}

    def judge(h: int, f: int) -> dict:
        points = loss[h] + (0.6 if f < 64 and h == 3 else 0.0) + (0.4 if f < 32 else 0.0)
        return {"heads_keep": h, "ffn_keep": f, "delta": -points / 100, "delta_low": -points / 100}

    opts = SimpleNamespace(max_drop=0.5, min_lower_bound=-1.5)

    def chosen(threads: int | None) -> tuple[int, int]:
        cost = lambda h, f: float(runtime_flops(SHAPE, h, f, threads))  # noqa: E731
        return search(judge, cost, 4, 512, None, None, opts)[0]

    assert encoder_flops(SHAPE, 3, 64) < encoder_flops(SHAPE, 4, 32)
    assert chosen(None) == (3, 64)
    assert chosen(2) == (4, 32)


def test_per_layer_heads_cost_each_layer_at_its_passes() -> None:
    """Group 0 of 6 layers in 2 groups runs 3 times: its heads cost 3 passes each. One
    count equals the same count per layer; per layer, the cost is between the uniform ones."""
    assert per_layer(3, SHAPE) == (3, 3) and per_layer((2, 4), SHAPE) == (2, 4)
    assert encoder_flops(SHAPE, (3, 3), 32) == encoder_flops(SHAPE, 3, 32)
    assert encoder_parameters(SHAPE, (3, 3), 32) == encoder_parameters(SHAPE, 3, 32)
    lo, hi, mixed = (encoder_flops(SHAPE, h, 32) for h in (2, 4, (2, 4)))
    assert mixed - lo == hi - mixed  # each group runs 3 of the 6 passes
    # at 2 threads 3+4 heads pay as 4+4, 2+4 pays half its attention in one group
    assert runtime_flops(SHAPE, (3, 4), 32, 2) - encoder_flops(SHAPE, (4, 4), 32) < 0
    assert runtime_flops(SHAPE, (2, 4), 32, 2) == encoder_flops(SHAPE, (2, 4), 32)
    three = SimpleNamespace(**{**vars(SHAPE), "num_hidden_groups": 3})
    with pytest.raises(Exception, match="3 shared layers"):
        per_layer((2, 4), three)


def test_a_plan_keeps_each_layers_own_count_of_its_best_heads() -> None:
    import numpy as np

    heads = {0: np.array([4.0, 1.0, 3.0, 2.0]), 1: np.array([1.0, 2.0, 3.0, 4.0])}
    ffn = {0: np.arange(512.0), 1: np.arange(512.0)}
    plan = make_plan(heads, ffn, (2, 4), 32, SHAPE)
    assert plan.heads == {0: (0, 2), 1: (0, 1, 2, 3)}
    assert plan.heads_per_layer == (2, 4) and plan.heads_keep == (2, 4)
    assert plan.removed_heads() == {0: [1, 3]}
    assert plan.label() == "heads 2+4/4, FFN 32/512"
    assert make_plan(heads, ffn, 3, 32, SHAPE).heads_keep == 3
    assert uniform([3, 3]) == 3 and heads_label((2, 4)) == "2+4" and heads_label(3) == "3"
