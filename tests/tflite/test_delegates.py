"""GPU-clean passes, the GPU rule table and delegate coverage (albert_edge.tflite.delegates).

Unit tests run on hand-built graphs (tests/tflite/tiny_tflite.py) with the real LiteRT
interpreter; the route tests convert the embedded model. No GPU is needed: the coverage
is a prediction from the rule table; ``bench --backend litert-gpu`` checks it on a GPU.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from albert_edge.errors import PassError, UnsupportedError
from albert_edge.options import ConvertOptions
from albert_edge.tflite import flatbuffer as fb
from albert_edge.tflite.delegates import GPU_RULES, HYBRID_INT8, gpu_coverage
from albert_edge.tflite.passes import ImplicitBroadcastPass, TflitePass, run_passes
from albert_edge.tflite.passes.base import op_name
from tests.tflite.tiny_tflite import attention_mask_graph, embedding_then_float_graph, run

ROOT = Path(__file__).resolve().parents[2]
# What may stay on the CPU in a GPU-target ALBERT: the integer-indexed embedding prefix.
EMBEDDING_PREFIX = {"RESHAPE", "EMBEDDING_LOOKUP", "DEQUANTIZE"}


def _roundtrip(model: Any) -> Any:
    return fb.read_model(fb.write_model(model))


def _ops(model: Any) -> list[str]:
    return [op_name(model, op) for sg in model.subgraphs for op in sg.operators]


def _mask_feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "scores": rng.standard_normal((4, 8, 8)).astype(np.float32),
        "mask": np.array([[1, 1, 1, 0, 0, 1, 0, 0]], np.int32),
    }


# --- implicit_broadcast pass ----------------------------------------------------------


def test_implicit_broadcast_is_exact_and_leaves_one_boundary() -> None:
    model = _roundtrip(attention_mask_graph())
    before = fb.write_model(model)
    assert gpu_coverage(model)["max_boundaries"] == 3  # CPU, GPU, CPU (BROADCAST_TO), GPU
    log = run_passes(model, [ImplicitBroadcastPass()])
    assert log == [
        {"name": "implicit_broadcast", "broadcast_to_removed": 1, "broadcast_to_kept": 0}
    ]
    assert "BROADCAST_TO" not in _ops(model)
    assert fb.orphan_tensor_count(model) == 0
    after = fb.write_model(model)
    ref, got = run(before, **_mask_feeds()), run(after, **_mask_feeds())
    assert got["out"].shape == ref["out"].shape == (1, 4, 8, 8)
    np.testing.assert_array_equal(got["out"], ref["out"])  # same arithmetic, no expand
    cov = gpu_coverage(model)
    assert cov["max_boundaries"] == 1 and cov["subgraphs"][0]["cpu_op_types"] == ["RESHAPE"]


def test_implicit_broadcast_keeps_an_expand_a_non_broadcasting_op_needs() -> None:
    model = _roundtrip(attention_mask_graph(sink="SOFTMAX"))
    before = fb.write_model(model)
    log = run_passes(model, [ImplicitBroadcastPass()])
    assert log[0]["broadcast_to_removed"] == 0 and log[0]["broadcast_to_kept"] == 1
    assert fb.write_model(model) == before


def test_pass_contract_turns_a_broken_postcondition_into_pass_error() -> None:
    class Breaks(TflitePass):
        name = "breaks"

        def run(self, model: Any) -> dict[str, Any]:
            return {"changed": 1}

        def postcondition(self, model: Any) -> None:
            self.fail("promise broken")

    with pytest.raises(PassError, match="breaks pass: promise broken"):
        run_passes(_roundtrip(attention_mask_graph()), [Breaks()])


# --- rule table and coverage ----------------------------------------------------------


def test_every_rule_names_its_source() -> None:
    for op, rule in GPU_RULES.items():
        assert rule.reason, op
        assert "tensorflow/lite/" in rule.source or "measured" in rule.source, op
    assert not GPU_RULES["BROADCAST_TO"].supported
    assert not GPU_RULES["EMBEDDING_LOOKUP"].supported


def test_embedding_prefix_is_one_cpu_partition() -> None:
    cov = gpu_coverage(_roundtrip(embedding_then_float_graph()))
    assert cov["subgraphs"][0]["partitions"] == [
        {"accelerator": "cpu", "ops": 1},
        {"accelerator": "gpu", "ops": 2},
    ]
    assert cov["expected_to_build"] and not cov["fully_accelerated"]


def test_fp16_table_dequantize_stays_with_the_cpu_lookup() -> None:
    model = _roundtrip(embedding_then_float_graph(fp16_table=True))
    out = run(fb.write_model(model), ids=np.array([1, 2, 3, 4], np.int32))["out"]
    assert out.shape == (4, 3)
    cov = gpu_coverage(model)
    assert cov["subgraphs"][0]["cpu_op_types"] == ["DEQUANTIZE", "EMBEDDING_LOOKUP"]
    assert cov["max_boundaries"] == 1


def test_hybrid_int8_matmul_is_reported_as_not_building() -> None:
    cov = gpu_coverage(_roundtrip(embedding_then_float_graph(int8_weights=True)))
    assert not cov["expected_to_build"]
    assert any(
        e["op"] == "FULLY_CONNECTED" and e["reason"] == HYBRID_INT8 for e in cov["unsupported"]
    )


def test_tf_analyzer_misses_what_the_rule_table_catches() -> None:
    """TF's Analyzer (gpu_compatibility.cc) calls the BROADCAST_TO graph GPU-compatible;
    LiteRT's GPU accelerator rejects it, and so does our table."""
    tf = pytest.importorskip("tensorflow")
    data = fb.write_model(_roundtrip(attention_mask_graph()))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        tf.lite.experimental.Analyzer.analyze(model_content=data, gpu_compatibility=True)
    text = buf.getvalue()
    assert "BROADCAST_TO" in text  # it did read the op ...
    assert "looks compatible with GPU delegate" in text  # ... and passed it
    ours = {e["op"] for e in gpu_coverage(fb.read_model(data))["unsupported"]}
    assert "BROADCAST_TO" in ours


# --- options and routes ---------------------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        {"target": "onnx", "precision": "fp16"},
        {"target": "tflite", "precision": "int8-dynamic"},
        {"target": "tflite", "precision": "int8-full"},
    ],
)
def test_target_gpu_refuses_what_the_gpu_cannot_build(kw: dict[str, str]) -> None:
    with pytest.raises(UnsupportedError, match="--target gpu"):
        ConvertOptions(accelerator="gpu", **kw)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )


def _gpu_report(path: Path) -> dict[str, Any]:
    r = _cli("inspect", str(path), "--json")
    assert r.returncode == 0, r.stderr
    report: dict[str, Any] = json.loads(r.stdout)["delegates"]["gpu"]
    return report


def _assert_gpu_clean(cov: dict[str, Any]) -> None:
    assert cov["expected_to_build"]
    for sg in cov["subgraphs"]:
        assert sg["boundaries"] <= 1 and sg["cpu_partitions"] <= 1, sg
        assert set(sg["cpu_op_types"]) <= EMBEDDING_PREFIX, sg
        if sg["partitions"][0]["accelerator"] == "cpu":
            assert sg["partitions"][0]["ops"] == sg["cpu_ops"]  # CPU prefix only
    assert all(e["op"] != "BROADCAST_TO" for e in cov["unsupported"])


def test_cli_target_gpu_embedded_model(tmp_path: Path) -> None:
    out = tmp_path / "gpu"
    r = _cli("convert", "--to", "tflite", "--target", "gpu", "-o", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["precision"] == "fp16"
    assert manifest["accelerators"]["suits"]["gpu"].startswith("yes")
    _assert_gpu_clean(_gpu_report(out / "model.tflite"))

    bad = tmp_path / "int8gpu"
    r = _cli(
        "convert",
        "--to",
        "tflite",
        "--target",
        "gpu",
        "--precision",
        "int8-dynamic",
        "-o",
        str(bad),
    )
    assert r.returncode != 0 and "--target gpu" in r.stderr and len(r.stderr.splitlines()) == 1
    assert not bad.exists()


@pytest.mark.slow
def test_default_fp32_is_gpu_clean_and_int8_reports_its_unsupported_ops(tmp_path: Path) -> None:
    fp32, int8 = tmp_path / "fp32", tmp_path / "int8"
    assert _cli("convert", "--to", "tflite", "-o", str(fp32), "--no-verify").returncode == 0
    _assert_gpu_clean(_gpu_report(fp32 / "model.tflite"))
    r = _cli(
        "convert", "--to", "tflite", "--precision", "int8-dynamic", "-o", str(int8), "--no-verify"
    )
    assert r.returncode == 0, r.stderr
    cov = _gpu_report(int8 / "model.tflite")
    assert not cov["expected_to_build"]
    assert any(e["op"] == "FULLY_CONNECTED" for e in cov["unsupported"])


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_albert_base_shape_gpu_target(tmp_path: Path, make_checkpoint: Any, precision: str) -> None:
    ck = make_checkpoint("albert-base")
    out = tmp_path / precision
    r = _cli(
        "convert",
        str(ck),
        "--to",
        "tflite",
        "--target",
        "gpu",
        "--precision",
        precision,
        "-o",
        str(out),
        "--no-verify",
    )
    assert r.returncode == 0, r.stderr
    _assert_gpu_clean(_gpu_report(out / "model.tflite"))


def test_delegate_takes_the_largest_gpu_partition_only() -> None:
    cov = gpu_coverage(_roundtrip(attention_mask_graph()))
    sizes = [p["ops"] for p in cov["subgraphs"][0]["partitions"] if p["accelerator"] == "gpu"]
    assert len(sizes) == 2 and cov["delegated_ops"] == max(sizes) < cov["gpu_ops"]


@pytest.mark.slow
def _scaled_copy_matches_of_that_run(model: Any) -> dict[int, tuple[int, Any]]:
    """``scaled_copies.scaled_copy_matches`` as ``convert`` ran it for issue 16's artifact:
    each FC weight matched to the first other 2-D constant it is a column-scaled copy of,
    γ recovered from the pivots (today's matcher prefers a γ the graph already holds)."""

    names, types = fb.builtin_names(), fb.tensor_type_names()
    floats: dict[int, Any] = {}
    for sg in model.subgraphs:
        for t in sg.tensors:
            matrix = t.buffer and types.get(t.type) == "FLOAT32" and len(t.shape or ()) == 2
            big = matrix and len(fb.buffer_bytes(model, t.buffer)) >= 1024  # _MIN_SLICE_BYTES
            if big and int(t.buffer) not in floats:
                floats[int(t.buffer)] = fb.tensor_array(model, t)
    fcs = {
        int(sg.tensors[op.inputs[1]].buffer)
        for sg in model.subgraphs
        for op in sg.operators
        if names.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex])) == "FULLY_CONNECTED"
    }
    matches: dict[int, tuple[int, Any]] = {}
    for b_id in fcs & set(floats):
        B = floats[b_id]
        for a_id, A in floats.items():
            if a_id == b_id or A.shape != B.shape or a_id in matches:
                continue
            rows, cols = np.abs(A).argmax(axis=0), np.arange(A.shape[1])
            pivot = A[rows, cols]
            if np.any(pivot == 0):
                continue
            gamma = (B[rows, cols] / pivot).astype(np.float32)
            if float(np.abs(A * gamma[None, :] - B).max()) <= 1e-6 * (float(np.abs(B).max()) or 1):
                matches[b_id] = (a_id, gamma)
                break
    return matches


def test_rule_table_reproduces_litert_on_the_pre_pass_fp32_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 16 ran LiteRT's GPU accelerator (H100) on the embedded fp32 artifact as
    ``convert`` wrote it before the GPU-clean passes: 215 ops on the GPU, 43 on the CPU.
    The rule table + largest-partition rule predicts exactly that for the same graph."""
    import albert_edge.tflite.passes as passes
    from albert_edge.convert import convert
    from albert_edge.tflite import scaled_copies

    monkeypatch.setattr(passes, "GPU_CLEAN_PASSES", ())
    # the graph of that run: γ's MULs as the scaled-copy matcher of then placed them, and
    # not merged (both changed after it; today's pre-pass graph has 251 ops)
    monkeypatch.setattr(scaled_copies, "scaled_copy_matches", _scaled_copy_matches_of_that_run)
    monkeypatch.setattr(passes.MergeDuplicateOpsPass, "run", lambda self, model: {})
    monkeypatch.setattr(passes.MergeDuplicateOpsPass, "postcondition", lambda self, model: None)
    # the file of that run: one seq-128 signature (the defaults now add 16/32/64)
    opts = ConvertOptions(target="tflite", seq_lens=(128,), verify=False)
    convert(None, tmp_path / "a", opts)
    cov = gpu_coverage(fb.read_model((tmp_path / "a" / "model.tflite").read_bytes()))
    assert (cov["ops"], cov["delegated_ops"]) == (258, 215)
