"""The paired bootstrap and the choice rule (pure functions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from albert_edge.depth import Rule, accuracy_interval, choose, format_choice, paired_bootstrap


def test_paired_bootstrap_is_seeded_and_paired() -> None:
    rng = np.random.default_rng(0)
    ref = rng.random(2000) < 0.8
    same = paired_bootstrap(ref, ref)
    assert (same.delta, same.low, same.high) == (0.0, 0.0, 0.0)  # pairing: no spread at all
    cand = ref.copy()
    cand[np.flatnonzero(ref)[:40]] = False  # 40 of 2000 rows newly wrong: -2 points
    iv = paired_bootstrap(cand, ref)
    assert iv.delta == pytest.approx(-0.02)
    assert iv.low < -0.02 < iv.high <= -0.01  # every resample loses only
    assert paired_bootstrap(cand, ref) == iv  # seeded: identical
    assert paired_bootstrap(cand, ref, seed=1) != iv
    acc = accuracy_interval(ref)
    assert acc.low < acc.delta < acc.high
    with pytest.raises(ValueError):
        paired_bootstrap(cand[:10], ref)


def _row(depth: int, precision: str, delta: float, low: float, ms: float | None) -> dict:
    return {"depth": depth, "precision": precision, "delta": delta, "delta_low": low,
            "delta_high": delta + 0.01, "held_out_accuracy": 0.9 + delta, "ms": ms}  # fmt: skip


def test_choose_admits_by_point_and_bound_then_fastest() -> None:
    rows = [
        _row(1, "int8", -0.006, -0.012, 1.0),  # point loss 0.6 > 0.5: out
        _row(2, "int8", -0.004, -0.016, 1.5),  # lower bound -1.6 < -1.5: out
        _row(3, "int8", -0.002, -0.010, 2.5),
        _row(3, "fp32", -0.001, -0.009, 2.0),  # admitted and fastest
        _row(4, "int8", 0.0, -0.005, 3.0),
    ]
    res = choose(rows, Rule(), speed_key="ms")
    assert (res["chosen"]["depth"], res["chosen"]["precision"]) == (3, "fp32")
    why = [r["why_not"] for r in res["evidence"]]
    assert why[0].startswith("point loss 0.60") and why[1].startswith("lower bound -1.60")
    assert why[2:] == [None, None, None]
    # without timing: the shallowest admitted
    assert choose(rows, Rule())["chosen"]["depth"] == 3
    # a missing timing never wins: speed is ignored unless every admitted row has it
    rows[3]["ms"] = None
    assert choose(rows, Rule(), speed_key="ms")["speed_key"] is None
    # a looser rule admits more; a rule nothing passes chooses nothing
    assert choose(rows, Rule(1.0, -2.0))["chosen"]["depth"] == 1
    none = choose(rows, Rule(0.0, 0.0))
    assert none["chosen"] is None and "keep full depth" in format_choice(none)
    text = format_choice(res)
    assert "point loss <= 0.5" in text and "**chosen**" in text


def test_depth_choose_cli(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_text(json.dumps([_row(1, "int8", -0.006, -0.012, 1.0), _row(2, "int8", 0, -0.01, 2)]))
    cmd = [sys.executable, "-m", "albert_edge.cli", "depth", "choose", str(f), "--speed-key", "ms"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Chosen: depth 2 int8" in r.stdout
    r = subprocess.run([*cmd, "--max-point-loss", "0"], capture_output=True, text=True)
    assert r.returncode == 0 and "Chosen: depth 2" in r.stdout
    r = subprocess.run([*cmd, "--min-lower-bound", "0"], capture_output=True, text=True)
    assert r.returncode == 1 and "keep full depth" in r.stdout
    f.write_text("{not json")
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and str(f) in r.stderr
