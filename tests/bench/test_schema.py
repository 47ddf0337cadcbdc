"""The validator is the executable form of the schema in benchmarks/README.md."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from albert_edge.bench.schema import (
    LATENCY_KEYS,
    RESULT_KEYS,
    SCHEMA_ID,
    empty_result,
    new_report,
    validate_report,
)

README = Path(__file__).resolve().parents[2] / "benchmarks" / "README.md"


def _ok_result() -> dict[str, Any]:
    return empty_result(
        artifact="a",
        format="onnx",
        precision="fp32",
        backend="ort-cpu",
        device="cpu",
        batch=1,
        seq_len=128,
        threads=2,
        file_bytes=10,
        floor_bytes=9,
        ratio_to_floor=10 / 9,
        load_ms=1.0,
        first_inference_ms=2.0,
        latency_ms={"p50": 1.0, "p90": 1.1, "p99": 1.2, "mean": 1.05, "std": 0.1, "runs": 20},
        throughput_seq_per_s=1000.0,
        peak_rss_bytes=123,
        gops=1.0,
        roofline_fraction=0.1,
        status="ok",
    )


def _report(*results: dict[str, Any]) -> dict[str, Any]:
    return new_report(list(results), machine={"cpu": "x", "os": "y", "python": "3", "versions": {}})


def test_valid_report_passes() -> None:
    report = _report(_ok_result())
    assert report["schema"] == SCHEMA_ID
    assert validate_report(report) == []


def test_each_problem_is_named() -> None:
    missing = _ok_result()
    del missing["gops"]
    assert any("missing 'gops'" in p for p in validate_report(_report(missing)))

    unmeasured = _ok_result()
    unmeasured["latency_ms"] = None
    assert any("latency_ms was not measured" in p for p in validate_report(_report(unmeasured)))

    silent_skip = _ok_result()
    silent_skip.update(status="skipped", reason=None)
    assert any("must say why" in p for p in validate_report(_report(silent_skip)))

    bad_status = _ok_result()
    bad_status["status"] = "great"
    assert any("status='great'" in p for p in validate_report(_report(bad_status)))

    zero_runs = copy.deepcopy(_ok_result())
    zero_runs["latency_ms"]["runs"] = 0
    assert any("runs=0" in p for p in validate_report(_report(zero_runs)))

    wrong_type = _ok_result()
    wrong_type["batch"] = "1"
    assert any("batch='1'" in p for p in validate_report(_report(wrong_type)))

    assert any("schema=" in p for p in validate_report({**_report(), "schema": "other/9"}))


def test_readme_documents_every_field() -> None:
    text = README.read_text()
    for key in [*RESULT_KEYS, *LATENCY_KEYS, "schema", "created", "machine", "roofline"]:
        assert re.search(rf"`{re.escape(key)}`", text), f"benchmarks/README.md lacks `{key}`"
