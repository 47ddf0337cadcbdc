"""``inspect`` on ONNX files: size accounting, weight-MatMul counts (float and quantized),
the factorization check, and the CLI's ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from albert_edge.errors import AlbertEdgeError
from albert_edge.inspect import inspect_path
from albert_edge.onnx.inspect import METADATA_KEY, inspect_onnx
from albert_edge.options import ConvertOptions

RNG = np.random.default_rng(0)

ARTIFACT_KEYS = {
    "file_bytes",
    "unique_tensor_bytes",
    "duplicate_tensor_bytes",
    "floor_bytes",
    "ratio_to_floor",
    "matmuls_total",
    "matmuls_quantized",
    "factorized_embedding_intact",
    "precision",
    "unique_params",
    "initializers",
    "op_counts",
}


@pytest.fixture(scope="module")
def artifacts(make_checkpoint, tmp_path_factory) -> dict[str, Path]:
    from albert_edge.convert import convert

    out = {}
    root = tmp_path_factory.mktemp("inspect")
    for optimize in ("none", "fuse"):
        out[optimize] = root / optimize
        convert(
            make_checkpoint("tiny"),
            out[optimize],
            ConvertOptions(optimize=optimize, verify=False),
        )
    return out


@pytest.mark.parametrize("optimize", ["none", "fuse"])
def test_inspect_converted_artifact(artifacts, optimize: str) -> None:
    model = artifacts[optimize] / "onnx" / "model.onnx"
    info = inspect_path(model)
    assert set(info) >= ARTIFACT_KEYS
    assert info["file_bytes"] == model.stat().st_size
    assert info["duplicate_tensor_bytes"] == 0
    # the floor: the checkpoint's parameters at fp32, which the artifact stores all of
    assert info["floor_bytes"] == 4 * info["checkpoint_params"]
    assert (
        abs(info["unique_params"] - info["checkpoint_params"]) <= 0.01 * info["checkpoint_params"]
    )
    assert info["ratio_to_floor"] == pytest.approx(
        info["file_bytes"] / info["floor_bytes"], abs=1e-4
    )
    assert info["ratio_to_floor"] <= 1.02
    assert info["factorized_embedding_intact"] is True
    assert info["precision"] == "fp32" and info["matmuls_quantized"] == 0
    assert info["albert"]["vocab_size"] == 30000 and info["albert"]["embedding_size"] == 16
    assert info["head"] == "sequence-classification" and info["optimize"] == optimize
    layers = 3  # tiny: L=3, K=1
    # per layer: q, k, v, dense, ffn, ffn_output (fused: one Attention for q/k/v);
    # plus the E->H projection, the pooler and the classifier
    per_layer = 4 if optimize == "fuse" else 6
    assert info["matmuls_total"] == layers * per_layer + 3
    assert info["op_counts"].get("Attention", 0) == (layers if optimize == "fuse" else 0)
    manifest = json.loads((artifacts[optimize] / "manifest.json").read_text())
    for key, value in manifest["sizes"].items():
        assert info[key] == value, key


def test_inspect_cli_json(artifacts, capsys) -> None:
    from albert_edge.cli import main

    assert main(["inspect", str(artifacts["fuse"]), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert set(info) >= ARTIFACT_KEYS
    assert info["factorized_embedding_intact"] is True


def _save(
    tmp_path: Path, nodes, inputs, outputs, inits, meta: dict | None = None, name: str = "m.onnx"
) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    if meta is not None:
        helper.set_model_props(model, {METADATA_KEY: json.dumps(meta)})
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def _f(name: str, *shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def test_duplicates_and_broken_factorization_are_reported(tmp_path: Path) -> None:
    table = RNG.standard_normal((10, 4)).astype(np.float32)
    w = RNG.standard_normal((6, 6)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"]),
        helper.make_node("MatMul", ["emb", "proj"], ["h"]),
        helper.make_node("MatMul", ["h", "W1"], ["h1"]),
        helper.make_node("MatMul", ["h1", "W2"], ["h2"]),
        helper.make_node("Gather", ["folded", "ids"], ["h3"]),
        helper.make_node("Add", ["h2", "h3"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(table, "table"),
        numpy_helper.from_array(RNG.standard_normal((4, 6)).astype(np.float32), "proj"),
        numpy_helper.from_array(w, "W1"),
        numpy_helper.from_array(w.copy(), "W2"),
        numpy_helper.from_array(RNG.standard_normal((10, 6)).astype(np.float32), "folded"),
    ]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["b", "s"])
    meta = {"vocab_size": 10, "embedding_size": 4, "hidden_size": 6}
    info = inspect_onnx(_save(tmp_path, nodes, [ids], [_f("y", "b", "s", 6)], inits, meta))
    assert info["duplicate_tensor_bytes"] == w.nbytes
    assert info["unique_params"] == 40 + 24 + 36 + 60
    assert info["matmuls_total"] == 3
    assert info["factorized_embedding_intact"] is False
    assert any("V x H (10x6)" in p and "folded" in p for p in info["factorization_problems"])


def test_quantized_weight_consumers_are_counted(tmp_path: Path) -> None:
    """QDQ int8, MatMulInteger, MatMulNBits (int4) count as quantized; a float MatMul
    does not; an activation x activation MatMul is not a weight MatMul at all."""
    k, n, block = 32, 8, 32
    wq = RNG.integers(-127, 127, (k, k)).astype(np.int8)
    packed = RNG.integers(0, 255, (n, k // block, block // 2)).astype(np.uint8)
    nodes = [
        helper.make_node("DequantizeLinear", ["Wq", "s", "zp"], ["Wdq"]),
        helper.make_node("MatMul", ["x", "Wdq"], ["a"]),  # QDQ int8
        helper.make_node("DynamicQuantizeLinear", ["a"], ["aq", "as", "azp"]),
        helper.make_node("MatMulInteger", ["aq", "Wq2", "azp", "wzp"], ["b_int"]),
        helper.make_node("Cast", ["b_int"], ["b"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["b", "Wf"], ["c"]),  # float
        helper.make_node(
            "MatMulNBits",
            ["c", "B4", "scales4"],
            ["d"],
            domain="com.microsoft",
            K=k,
            N=n,
            bits=4,
            block_size=block,
        ),
        helper.make_node("Transpose", ["d"], ["dt"], perm=[1, 0]),
        helper.make_node("MatMul", ["d", "dt"], ["y"]),  # activation x activation
    ]
    inits = [
        numpy_helper.from_array(wq, "Wq"),
        numpy_helper.from_array(np.array(0.01, np.float32), "s"),
        numpy_helper.from_array(np.array(0, np.int8), "zp"),
        numpy_helper.from_array(wq.copy() + 1, "Wq2"),
        numpy_helper.from_array(np.array(0, np.int8), "wzp"),
        numpy_helper.from_array(RNG.standard_normal((k, k)).astype(np.float32), "Wf"),
        numpy_helper.from_array(packed, "B4"),
        numpy_helper.from_array(np.ones((n, k // block), np.float32), "scales4"),
    ]
    info = inspect_onnx(_save(tmp_path, nodes, [_f("x", 2, k)], [_f("y", 2, 2)], inits))
    assert info["matmuls_total"] == 4
    assert info["matmuls_quantized"] == 3
    assert info["matmuls_by_op"]["MatMul"] == {"total": 2, "quantized": 1}
    assert info["precision"] == "int4"
    # parameters: Wq, Wq2, Wf (k*k each) and the int4 weight unpacked (k*n); no scales/zps
    assert info["unique_params"] == 3 * k * k + k * n
    assert info["factorized_embedding_intact"] is None  # no V/E/H known


def test_weight_quantized_at_run_time_counts_as_fp32(tmp_path: Path) -> None:
    """optimum's int8 export feeds MatMulInteger from DynamicQuantizeLinear(fp32
    initializer): int8 compute, fp32 storage. It is a weight MatMul, not a quantized one."""
    k = 16
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xzp"]),
        helper.make_node("DynamicQuantizeLinear", ["W"], ["Wq", "Ws", "Wzp"]),
        helper.make_node("MatMulInteger", ["xq", "Wq", "xzp", "Wzp"], ["y_int"]),
        helper.make_node("Cast", ["y_int"], ["y"], to=TensorProto.FLOAT),
    ]
    inits = [numpy_helper.from_array(RNG.standard_normal((k, k)).astype(np.float32), "W")]
    info = inspect_onnx(_save(tmp_path, nodes, [_f("x", 2, k)], [_f("y", 2, k)], inits))
    assert info["matmuls_total"] == 1 and info["matmuls_quantized"] == 0
    assert info["matmuls_by_op"]["MatMulInteger"] == {"total": 1, "quantized": 0}


def test_external_data_counts_in_file_bytes(tmp_path: Path) -> None:
    w = numpy_helper.from_array(RNG.standard_normal((64, 64)).astype(np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "g",
        [_f("x", 1, 64)],
        [_f("y", 1, 64)],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "ext.onnx"
    onnx.save(
        model, str(path), save_as_external_data=True, location="ext.onnx.data", size_threshold=0
    )
    info = inspect_onnx(path)
    assert info["file_bytes"] == path.stat().st_size + (tmp_path / "ext.onnx.data").stat().st_size
    assert info["unique_params"] == 64 * 64


def test_unreadable_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"\x00not a model")
    with pytest.raises(AlbertEdgeError, match=r"model.onnx: not a readable ONNX model"):
        inspect_onnx(bad)
    with pytest.raises(AlbertEdgeError, match="no such ONNX file"):
        inspect_onnx(tmp_path / "missing.onnx")
