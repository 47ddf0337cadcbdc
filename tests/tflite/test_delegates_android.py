"""The Android side agrees with the Python side: app rows and ``bench --adb`` rows land in
one report, the instrumented test checks the schema's keys, and the GPU artifact's
coverage that prepare_assets.sh writes is what the app reads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from albert_edge.bench.merge import merge_reports
from albert_edge.bench.report import to_markdown
from albert_edge.bench.schema import RESULT_KEYS, empty_result, new_report, validate_report
from albert_edge.errors import BenchmarkError
from tests.test_android_java import _java, java_build  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "android_demo" / "app" / "src"


def test_app_rows_and_adb_rows_land_in_one_report(
    java_build: dict,  # noqa: F811
    spiece_path: Path,
    tmp_path: Path,
) -> None:
    app = tmp_path / "app.json"
    r = _java(java_build, "dev.albertedge.core.BenchmarkReportDemo", str(spiece_path), str(app))
    assert r.returncode == 0, r.stdout + r.stderr
    adb_row = empty_result(
        artifact="model.tflite",
        format="tflite",
        precision="int8-dynamic",
        backend="android-gpu",
        device="android-gpu",
        batch=1,
        seq_len=128,
        threads=1,
        status="skipped",
        reason="GPU delegate not applied (benchmark_model fell back to CPU)",
    )
    adb = tmp_path / "adb.json"
    adb.write_text(json.dumps(new_report([adb_row])))
    merged = merge_reports([app, adb])
    assert validate_report(merged) == []
    assert [row["source"] for row in merged["results"]] == ["app.json", "app.json", "adb.json"]
    assert set(merged["settings"]["sources"]) == {"app.json", "adb.json"}
    md = to_markdown(merged)
    assert "android-gpu" in md

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "albert-edge-bench/1", "results": [{"artifact": 1}]}))
    with pytest.raises(
        BenchmarkError, match=re.escape("bad.json: not an albert-edge-bench/1 report")
    ):
        merge_reports([app, bad])


def test_instrumented_test_checks_schema_keys() -> None:
    src = (APP / "androidTest/java/dev/albertedge/demo/BenchmarkInstrumentedTest.kt").read_text()
    block = src[src.index("val REQUIRED") :]
    keys = re.findall(r'"([a-z_]+)"', block[: block.index(")")])
    assert keys and set(keys) <= set(RESULT_KEYS), set(keys) - set(RESULT_KEYS)
    assert '"albert-edge-bench/1"' in src


def test_prepare_assets_writes_what_the_app_reads() -> None:
    script = (ROOT / "android_demo/scripts/prepare_assets.sh").read_text()
    assets = (APP / "main/java/dev/albertedge/demo/ModelAssets.kt").read_text()
    written = set(re.findall(r'"(\w+)": sub\["\w+"\]', script)) | {"file"}
    read = set(re.findall(r'it\.get(?:String|Int)\("(\w+)"\)', assets))
    assert read == written == {"file", "ops", "gpu_ops", "cpu_partitions"}
    assert "--target gpu" in script and "model_gpu.tflite" in script
