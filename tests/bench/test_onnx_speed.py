"""benchmarks/onnx_speed.py's pieces that need no shared data: the no-hints twin of an
artifact (same model bytes, ORT's own session defaults) and the per-op ORT profile.
Nothing here asserts a time. Slow: one tiny int8 conversion (about 20 s alone)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

import pytest

from albert_edge.onnx.runtime import OrtRunner, host_session_config
from albert_edge.runtime import model_file

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def int8_artifact(
    make_checkpoint: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = tmp_path_factory.mktemp("speed") / "int8"
    convert(
        make_checkpoint("tiny"),
        out,
        ConvertOptions(target="onnx", precision="int8-dynamic", verify=False),
    )
    return out


def test_without_hints_twin_runs_the_same_bytes_with_ort_defaults(
    int8_artifact: Path, tmp_path: Path
) -> None:
    speed = importlib.import_module("benchmarks.onnx_speed")
    twin = speed._without_hints(int8_artifact, tmp_path / "twin")
    original = model_file(int8_artifact)
    assert twin.read_bytes() == original.read_bytes()
    assert OrtRunner(twin).session_config == {}  # the sealed manifest says: no hints here
    assert OrtRunner(original).session_config == host_session_config(None)


def test_ort_profile_sums_every_node_by_op_type(int8_artifact: Path) -> None:
    speed = importlib.import_module("benchmarks.onnx_speed")
    prof = speed.ort_profile(model_file(int8_artifact), 1, 3, {})
    ops = {r["op"] for r in prof["by_op"]}
    assert "QAttention" in ops and "DynamicQuantizeMatMul" in ops
    assert prof["nodes"] == sum(r["nodes"] for r in prof["by_op"])
    assert sum(r["share"] for r in prof["by_op"]) == pytest.approx(1.0)


def test_artifact_records_the_hints_and_its_card_says_them(int8_artifact: Path) -> None:
    from albert_edge.manifest import read_manifest
    from albert_edge.onnx.quant.recipes import hints_note, runtime_hints

    quant = read_manifest(int8_artifact)["quantization"]
    assert quant["runtime_hints"] == runtime_hints()
    assert quant["runtime_note"] == hints_note()
    assert hints_note() in (int8_artifact / "README.md").read_text()
    assert OrtRunner(model_file(int8_artifact)).session_config == host_session_config(
        {"quantization": quant}
    )
