"""The documented minimums and finiteness rules of the depth package, as pure functions
(docs/depth.md, "Minimums"): what the CLI cases in tests/hostile/test_evidence.py reach
through a subprocess, checked here at the API."""

from __future__ import annotations

import math

import numpy as np
import pytest

from albert_edge.depth import Rule, choose, paired_bootstrap
from albert_edge.depth.features import DepthError
from albert_edge.depth.search import MIN_HELD_OUT_ROWS, SplitSettings, split_sizes
from albert_edge.depth.stats import MIN_BOOTSTRAP_ROWS, accuracy_interval
from albert_edge.errors import TooFewRowsError


def test_an_interval_needs_the_minimum_rows() -> None:
    ones = np.ones(MIN_BOOTSTRAP_ROWS - 1, dtype=bool)
    with pytest.raises(TooFewRowsError, match=f"at least {MIN_BOOTSTRAP_ROWS} rows"):
        accuracy_interval(ones)
    with pytest.raises(TooFewRowsError):
        paired_bootstrap(ones[:1], ones[:1])  # one row: a zero-width "proof"
    ok = np.arange(MIN_BOOTSTRAP_ROWS) % 2 == 0
    iv = accuracy_interval(ok)
    assert iv.low < iv.delta < iv.high


def test_held_out_minimum_and_a_split_said_aloud() -> None:
    assert MIN_HELD_OUT_ROWS == MIN_BOOTSTRAP_ROWS
    s = SplitSettings(fit_rows=100, held_out_rows=50)
    assert split_sizes(150, s) == (100, 50, None)
    fit, held, note = split_sizes(130, s)  # fewer than asked: a quarter held out, said
    assert (fit, held) == (98, 32) and note is not None and "the data has 130" in note
    with pytest.raises(TooFewRowsError, match="--held-out-rows 30"):
        split_sizes(200, SplitSettings(fit_rows=100, held_out_rows=5))
    with pytest.raises(TooFewRowsError, match="at least 120 labelled rows"):
        split_sizes(60, s)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_the_rule_refuses_non_finite_thresholds_and_evidence(bad: float) -> None:
    with pytest.raises(DepthError, match="finite"):
        Rule(max_point_loss=bad)
    with pytest.raises(DepthError, match="finite"):
        Rule(min_lower_bound=bad)
    rows = [{"depth": 1, "precision": "fp32", "delta": bad, "delta_low": bad}]
    result = choose(rows)
    assert result["chosen"] is None
    assert "not finite" in result["evidence"][0]["why_not"]


def test_a_speed_key_no_record_has_is_refused() -> None:
    rows = [{"depth": 1, "precision": "fp32", "delta": 0.0, "delta_low": 0.0, "ms": 1.0}]
    assert choose(rows, speed_key="ms")["speed_key"] == "ms"
    with pytest.raises(DepthError, match="speed key 'msec'"):
        choose(rows, speed_key="msec")
