"""ONNX Runtime session settings per CPU class: the recipe table, what the runner applies
(the artifact's recorded hints first), and the opt-in bench backend that times without."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from albert_edge.bench.targets import BACKENDS, Target, pick_backends
from albert_edge.errors import BenchmarkError, UnsupportedError
from albert_edge.kernels import KERNELS, host_kernel
from albert_edge.onnx.quant.recipes import (
    ORT_SESSION_HINTS,
    hints_note,
    runtime_hints,
    session_hint,
)
from albert_edge.onnx.runtime import OrtRunner, host_session_config

SPIN = "session.intra_op.allow_spinning"


def _bare_model(path: Path) -> Path:
    """A one-node graph with ALBERT's input names (the runner needs nothing else)."""
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence"])
    graph = helper.make_graph(
        [helper.make_node("Cast", ["input_ids"], ["logits"], to=TensorProto.FLOAT)],
        "g",
        [ids],
        [out],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, path)
    return path


def _entry(runner: OrtRunner, key: str) -> str:
    return runner.session.get_session_options().get_session_config_entry(key)


def test_hint_table_is_keyed_by_known_kernels_and_recorded_whole() -> None:
    assert set(ORT_SESSION_HINTS) <= set(KERNELS)
    # on a quiet machine ORT's default spinning was fastest on x86 (docs/onnx-speed.md):
    # no class carries a hint, and the card says to keep the defaults
    for kernel in ("x86-vnni", "x86-avx2", "arm64", "wasm"):
        assert session_hint(kernel) is None
    recorded = runtime_hints()["onnxruntime_session_config"]
    assert recorded == {k: dict(h.config) for k, h in ORT_SESSION_HINTS.items()}
    assert "default session settings" in hints_note() and f"{SPIN}=0" in hints_note()


def test_manifest_hints_win_over_the_table_for_the_host_class() -> None:
    try:
        kernel = host_kernel()
    except UnsupportedError:
        pytest.skip("a CPU below AVX2 has no kernel family (and no hints)")
    table = session_hint(kernel)
    assert host_session_config(None) == (dict(table.config) if table else {})
    spin = {"session.intra_op.spin_duration_us": "10"}
    recorded = {"quantization": {"runtime_hints": {"onnxruntime_session_config": {kernel: spin}}}}
    assert host_session_config(recorded) == {"session.intra_op.spin_duration_us": "10"}
    # a manifest that records hints, none for this class: ORT's defaults, not the table's
    other: dict[str, Any] = {
        "quantization": {"runtime_hints": {"onnxruntime_session_config": {"wasm": {}}}}
    }
    assert host_session_config(other) == {}
    # a manifest without hints (an artifact built before them): the table's
    assert host_session_config({"quantization": {}}) == host_session_config(None)


def test_runner_applies_the_hints_and_cpu_defaults_applies_none(tmp_path: Path) -> None:
    model = _bare_model(tmp_path / "model.onnx")
    feeds = {"input_ids": np.arange(6, dtype=np.int64).reshape(1, 6)}
    hinted = OrtRunner(model, threads=2)
    assert hinted.session_config == host_session_config(None)
    for key, value in hinted.session_config.items():
        assert _entry(hinted, key) == value
    bare = OrtRunner(model, threads=2, backend="cpu-defaults")
    assert bare.session_config == {}
    chosen = OrtRunner(model, threads=2, session_config={SPIN: "1"})
    assert chosen.session_config == {SPIN: "1"} and _entry(chosen, SPIN) == "1"
    for runner in (hinted, bare, chosen):  # same results whatever the pool does
        np.testing.assert_array_equal(runner.run(feeds)["logits"], feeds["input_ids"])


def test_ort_cpu_defaults_backend_runs_only_when_named(tmp_path: Path) -> None:
    assert BACKENDS["ort-cpu-defaults"].opt_in
    target = Target(path=tmp_path / "m.onnx", format="onnx", name="m")
    assert "ort-cpu-defaults" not in pick_backends(target, None)
    assert pick_backends(target, ["ort-cpu", "ort-cpu-defaults"]) == [
        "ort-cpu",
        "ort-cpu-defaults",
    ]
    tflite = Target(path=tmp_path / "m.tflite", format="tflite", name="m")
    with pytest.raises(BenchmarkError, match="none of --backend ort-cpu-defaults"):
        pick_backends(tflite, ["ort-cpu-defaults"])
