"""The graph facts computed once (issue 25): one weight-MatMul count, and it is what ONNX
Runtime runs; one duplicate-groups definition every format uses.

Each test can fail: the counts are compared with ORT's own optimised graph, and the QDQ
case pins the one place where "stored" and "executed" differ.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

from albert_edge.duplicates import duplicate_groups
from albert_edge.onnx.inspect import matmul_counts, ort_optimized_model, weight_matmuls
from albert_edge.onnx.passes import base
from albert_edge.onnx.quant import quantize_model
from albert_edge.options import ConvertOptions

ROOT = Path(__file__).resolve().parents[2]


def _graph(nodes, inits, *, x_shape=(2, 16), y_shape=(2, 16), ms: bool = False) -> ir.Model:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))],
        initializer=inits,
    )
    opsets = [helper.make_opsetid("", 17)] + (
        [helper.make_opsetid("com.microsoft", 1)] if ms else []
    )
    proto = helper.make_model(graph, opset_imports=opsets)
    proto.ir_version = 8
    return ir.from_proto(proto)


def _shared_weight_graph() -> ir.Model:
    """Three weight MatMuls, two of them sharing one weight (ALBERT's layers in small)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((16, 16)) * 0.1).astype(np.float32), "W")
    v = numpy_helper.from_array((rng.standard_normal((16, 16)) * 0.1).astype(np.float32), "V")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h1"], name="m1"),
        helper.make_node("MatMul", ["h1", "W"], ["h2"], name="m2"),
        helper.make_node("MatMul", ["h2", "V"], ["y"], name="m3"),
    ]
    return _graph(nodes, [w, v])


@pytest.mark.parametrize(
    ("precision", "kernel"), [("int8-dynamic", "int8"), ("int4", "int8"), ("int4", "nbits")]
)
def test_the_one_count_is_what_onnx_runtime_runs(precision: str, kernel: str) -> None:
    options = ConvertOptions(precision=precision, int4_kernel=kernel, verify=False)
    q, report = quantize_model(_shared_weight_graph(), None, options)
    stored = matmul_counts(q)
    ran = matmul_counts(ir.from_proto(ort_optimized_model(q, "all")), executed=True)
    assert stored["matmuls_total"] == ran["matmuls_total"] == 3
    assert stored["matmuls_quantized"] == ran["matmuls_quantized"] == 3, (stored, ran)
    assert ran["float_matmuls"] == []
    # the manifest's quantization block reports the same count, not a second one
    for key in ("matmuls_total", "matmuls_quantized", "matmuls_fp16", "float_matmuls"):
        assert report[key] == stored[key], key
    # the shared weight is stored once and read by both of its MatMuls
    assert max(s["consumers"] for s in report["shared_weights"]) == 2


def _qdq_graph(weight_dtype: int) -> ir.Model:
    codes = np.arange(-8, 8, dtype=np.int8).repeat(16).reshape(16, 16)
    w = numpy_helper.from_array(codes, "Wq")
    if weight_dtype == TensorProto.FLOAT:
        w = numpy_helper.from_array(codes.astype(np.float32), "Wq")
    scale = numpy_helper.from_array(np.array(0.01, np.float32), "s")
    nodes = [
        helper.make_node("DequantizeLinear", ["Wq", "s"], ["W"], name="dq"),
        helper.make_node("MatMul", ["x", "W"], ["y"], name="m"),
    ]
    return _graph(nodes, [w, scale])


def test_a_qdq_matmul_is_quantized_in_the_file_and_float_where_ort_left_it_unfused() -> None:
    model = _qdq_graph(TensorProto.INT8)
    (use,) = weight_matmuls(model)
    assert use.how == "qdq" and use.quantized and use.weight == "Wq"
    # stored: DequantizeLinear → MatMul is the pair ORT fuses into an integer kernel at load
    assert matmul_counts(model)["matmuls_quantized"] == 1
    # executed: in the graph ORT runs, a MatMul still fed by DequantizeLinear was not fused
    executed = matmul_counts(model, executed=True)
    assert executed["matmuls_quantized"] == 0 and executed["float_matmuls"] == ["m"]


def test_fp16_and_float_weights_are_counted_apart() -> None:
    w = numpy_helper.from_array(np.ones((16, 16), np.float16), "W")
    cast = helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16, name="c")
    mm = helper.make_node("MatMul", ["xh", "W"], ["yh"], name="m")
    back = helper.make_node("Cast", ["yh"], ["y"], to=TensorProto.FLOAT, name="c2")
    counts = matmul_counts(_graph([cast, mm, back], [w]))
    assert (counts["matmuls_total"], counts["matmuls_quantized"], counts["matmuls_fp16"]) == (
        1,
        0,
        1,
    )
    assert counts["float_matmuls"] == [] and counts["by_kind"] == {"MatMul:fp16": 1}
    fp32 = matmul_counts(_shared_weight_graph())
    assert fp32["float_matmuls"] == ["m1", "m2", "m3"] and fp32["matmuls_quantized"] == 0


def test_duplicate_groups_is_one_definition_every_format_feeds() -> None:
    assert duplicate_groups([("a", b"x"), ("b", b"y"), ("c", b"x"), ("d", b"x")]) == [
        ["a", "c", "d"]
    ]
    assert duplicate_groups([(1, "k1"), (2, "k2")]) == []
    same = np.ones((4, 4), np.float32)
    model = _graph(
        [
            helper.make_node("Add", ["x", "A"], ["h"], name="a1"),
            helper.make_node("Add", ["h", "B"], ["y"], name="a2"),
        ],
        [numpy_helper.from_array(same, "A"), numpy_helper.from_array(same.copy(), "B")],
        x_shape=(4, 4),
        y_shape=(4, 4),
    )
    assert base.duplicate_groups(model) == [["A", "B"]]


def _metrics_module():
    spec = importlib.util.spec_from_file_location("cm", ROOT / "tools" / "codebase_metrics.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_codebase_metrics_counts_an_adapter_as_no_second_place(tmp_path: Path) -> None:
    cm = _metrics_module()
    pkg = tmp_path / "albert_edge"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "def duplicate_groups(items):\n    return [list(items)]\n\n\n"
        "def matmul_counts(m):\n    return {}\n"
    )
    (pkg / "fmt.py").write_text(
        "from albert_edge import duplicates\n\n\n"
        'def duplicate_groups(model):\n    """Adapter."""\n'
        "    return duplicates.duplicate_groups(model.items())\n\n\n"
        "def runtime_matmul_counts(m):\n    n = len(m)\n    return {'n': n}\n"
    )
    (tmp_path / "converters").mkdir()
    facts = cm.code_metrics(tmp_path)["graph_facts"]
    assert facts["duplicate-tensor groups"] == ["albert_edge/__init__.py:1 def duplicate_groups"]
    assert len(facts["quantized-MatMul count"]) == 2  # a real second count still counts
