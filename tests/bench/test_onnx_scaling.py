"""benchmarks/onnx_scaling.py's pieces that need no shared data: the per-run ORT profile
(kernel times assigned to the run that holds them), the session settings each variant
names, and the worker that runs a spec in its own process. Nothing here asserts a time.
Slow: one tiny int8 conversion (about 20 s alone)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

import pytest

from albert_edge.runtime import model_file

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def int8_model(
    make_checkpoint: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = tmp_path_factory.mktemp("scaling") / "int8"
    convert(
        make_checkpoint("tiny"),
        out,
        ConvertOptions(target="onnx", precision="int8-dynamic", verify=False),
    )
    return model_file(out)


def test_ort_profile_assigns_every_kernel_to_its_run(int8_model: Path) -> None:
    sc = importlib.import_module("benchmarks.onnx_scaling")
    spec = {"mode": "profile", "kind": "ort", "path": str(int8_model), "threads": 1}
    prof = sc.worker({**spec, "runs": 3, "warmup": 2})
    assert len(prof["run_us"]) == len(prof["kernel_sum_us"]) == 3  # warm-up runs left out
    ops = {n["op"] for n in prof["nodes"].values()}
    assert {"QAttention", "DynamicQuantizeMatMul"} <= ops
    assert all(len(n["us"]) == 3 for n in prof["nodes"].values())
    assert all(0 < k <= r for k, r in zip(prof["kernel_sum_us"], prof["run_us"], strict=True))


def test_variants_name_the_session_settings_they_time(int8_model: Path) -> None:
    sc = importlib.import_module("benchmarks.onnx_scaling")
    files = {"default": int8_model, "mha": int8_model, "litert": int8_model}
    assert sc.variant_spec("default@1", files)["threads"] == 1
    assert sc.variant_spec("default", files)["threads"] == 2
    nospin = sc.variant_spec("nospin", files)["config"]
    assert nospin == {"session.intra_op.allow_spinning": "0"}
    assert sc.variant_spec("extended", files)["opt_level"] == "ORT_ENABLE_EXTENDED"
    assert sc.variant_spec("litert", files)["kind"] == "litert"
    for key in sc.VARIANTS:  # every variant's settings open a session on the file
        spec = sc.variant_spec(key, files)
        if spec["kind"] == "ort":
            sc._ort_session({**spec, "pin_main": None})


def test_worker_times_a_spec_in_its_own_process(int8_model: Path) -> None:
    sc = importlib.import_module("benchmarks.onnx_scaling")
    spec = {**sc.variant_spec("default@1", {"default": int8_model}), "mode": "time"}
    out = sc.run_worker({**spec, "runs": 3, "warmup": 1})
    assert len(out["ms"]) == 3 and all(v > 0 for v in out["ms"])
