"""The exit policies on hand-written logits: what exits when, and the spelling they parse from."""

from __future__ import annotations

import numpy as np
import pytest

from albert_edge.early_exit import Confidence, Off, Patience, parse_policy, simulate
from albert_edge.early_exit.policy import max_probability
from albert_edge.errors import UnsupportedError


def _logits(*rows: list[tuple[float, float]]) -> np.ndarray:
    return np.asarray(rows, dtype=np.float32)  # [rows, exits, 2]


def test_off_runs_every_layer_and_returns_the_last_exit():
    per_exit = _logits([(9, -9), (8, -8), (0, 1)])
    depth, out = simulate(per_exit, Off())
    assert depth.tolist() == [3]
    assert out.tolist() == [[0, 1]]


def test_confidence_exits_at_the_first_confident_head():
    # exit 1: p = 0.5 (not >= 0.9); exit 2: p = sigmoid(4) = 0.982
    per_exit = _logits([(0, 0), (4, 0), (0, 9)], [(0, 0), (0.1, 0), (0.2, 0)])
    depth, out = simulate(per_exit, Confidence(0.9))
    assert depth.tolist() == [2, 3]  # the unsure row runs to the last exit
    assert out[0].tolist() == [4, 0]
    assert max_probability(np.asarray([[0.0, 0.0]]))[0] == 0.5


def test_patience_counts_unchanged_predictions():
    per_exit = _logits(
        [(1, 0), (1, 0), (0, 1), (0, 1), (0, 1)],  # 0 0 1 1 1
        [(1, 0), (0, 1), (1, 0), (0, 1), (1, 0)],  # never settles
        [(0, 1), (0, 1), (0, 1), (1, 0), (1, 0)],  # 1 1 1
    )
    depth, _ = simulate(per_exit, Patience(1))
    assert depth.tolist() == [2, 5, 2]
    depth, out = simulate(per_exit, Patience(2))
    assert depth.tolist() == [5, 5, 3]  # row 0: 1 1 1 at exits 3..5 -> stops at 5
    assert out[2].tolist() == [0, 1]


def test_policies_parse_and_refuse():
    assert parse_policy("off") == Off()
    assert parse_policy("confidence:0.95") == Confidence(0.95)
    assert parse_policy("patience:2") == Patience(2)
    for bad in ("confidence:1.5", "confidence:x", "patience:0", "patience:1.5", "fast", "off:1"):
        with pytest.raises(UnsupportedError):
            parse_policy(bad)


def test_fixed_depth_stops_every_row_at_its_exit_and_spellings_round_trip():
    from albert_edge.early_exit.policy import FixedDepth, policy_text

    per_exit = _logits([(9, -9), (0, 1), (0, 2)], [(0, 0), (1, 0), (2, 0)])
    depth, out = simulate(per_exit, FixedDepth(2))
    assert depth.tolist() == [2, 2] and out.tolist() == [[0, 1], [1, 0]]
    assert simulate(per_exit, FixedDepth(9))[0].tolist() == [3, 3]  # the last exit stops
    for policy in (Off(), Confidence(0.55), Confidence(0.975), Patience(2), FixedDepth(3)):
        assert parse_policy(policy_text(policy)) == policy
    with pytest.raises(UnsupportedError, match="integer >= 1"):
        FixedDepth(0)
