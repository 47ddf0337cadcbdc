"""``bench --recommend``: the pure selection rule, and the real CLI end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from albert_edge.bench.recommend import _why_not, choose, max_drop, parse_candidates
from albert_edge.errors import BenchmarkError


def _row(precision: str, ms: float | None, size: int, **kw: object) -> dict[str, object]:
    return {
        "target": "onnx",
        "precision": precision,
        "mean_p50_ms": ms,
        "file_bytes": size,
        "eligible": True,
        **kw,
    }


def test_choose_takes_the_fastest_eligible() -> None:
    rows = [
        _row("fp32", 10.0, 400),
        _row("int8-dynamic", 5.0, 100),
        _row("int4", 4.0, 60, eligible=False),
    ]
    assert choose(rows)["precision"] == "int8-dynamic"  # type: ignore[index]


def test_choose_breaks_a_near_tie_by_size() -> None:
    rows = [_row("fp16", 5.0, 200), _row("int8-dynamic", 5.1, 100)]
    assert choose(rows)["precision"] == "int8-dynamic"  # type: ignore[index]
    rows = [_row("fp16", 5.0, 200), _row("int8-dynamic", 6.0, 100)]
    assert choose(rows)["precision"] == "fp16"  # type: ignore[index]


def test_choose_none_when_nothing_is_eligible() -> None:
    assert choose([_row("fp32", None, 1), _row("int8-dynamic", 1.0, 1, eligible=False)]) is None


def test_accuracy_bar_per_precision() -> None:
    assert max_drop("int8-static") == max_drop("int8-dynamic") == 0.5
    assert max_drop("int4") == 1.5
    ok = _row("int4", 1.0, 1, accuracy=0.80, verified=True)
    assert _why_not(ok, 0.81) is None  # 1.0 pt <= 1.5
    bad = _row("int8-dynamic", 1.0, 1, accuracy=0.80, verified=True)
    assert "loses 1.00 accuracy points" in str(_why_not(bad, 0.81))
    assert "verification" in str(_why_not(_row("fp16", 1.0, 1, verified=False), None))


def test_parse_candidates_refuses_unknown_names() -> None:
    assert parse_candidates("onnx:int4, tflite:fp32") == (("onnx", "int4"), ("tflite", "fp32"))
    with pytest.raises(BenchmarkError, match="unknown 'onnx:int2'"):
        parse_candidates("onnx:int2")


def test_cli_recommends_a_measured_verified_artifact(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    ckpt = make_checkpoint("tiny")
    out = tmp_path / "rec.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "bench",
            str(ckpt),
            "--recommend",
            "--candidates",
            "onnx:fp32,onnx:int8-dynamic,onnx:int8-static",
            "--seq-lens",
            "8,32",
            "--threads",
            "1",
            "--runs",
            "5",
            "--warmup",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    rows = {r["precision"]: r for r in result["candidates"]}
    # int8-static needs calibration text; without --data it is refused with the reason
    assert "pass --data" in rows["int8-static"]["why_not"]
    for p in ("fp32", "int8-dynamic"):
        assert rows[p]["verified"] is True and rows[p]["eligible"] is True
        assert set(rows[p]["p50_ms"]) == {"8", "32"}
        assert rows[p]["file_bytes"] > 0
    pick = result["recommendation"]
    assert pick["precision"] in ("fp32", "int8-dynamic")
    assert pick["mean_p50_ms"] == min(rows[p]["mean_p50_ms"] for p in ("fp32", "int8-dynamic")) or (
        pick["file_bytes"] < max(rows[p]["file_bytes"] for p in ("fp32", "int8-dynamic"))
    )
    assert f"ship: onnx {pick['precision']}" in proc.stdout
    assert not any(Path(r.get("artifact", "/nonexistent")).exists() for r in rows.values())
