"""int4 stored, int8 computed (``--int4-kernel int8``, the default int4 form).

What :mod:`albert_edge.onnx.quant.int4` promises, each checked so it can fail:

* ``pack``/``decode``: the int8 weight is exactly ``q · m`` with ``|q| ≤ 7``, within the
  recipe's bound (63 portable, 126 full range), and dequantized within half a block step
  of the fp32 weight;
* the model-local functions ``albert_edge.Int4Weight`` / ``Int4Rows`` / ``Int4Scales``
  compute in ONNX Runtime what their numpy references compute;
* ONNX Runtime folds them at load: the graph it runs reads stored int8 weights, and
  ``check_int4_folds`` fails where it cannot;
* ``PackInt4Pass`` leaves no weight in int8, and its postcondition fails where one is left;
* end to end on a tiny random checkpoint: manifest, inspector and the graph ORT runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from albert_edge.errors import PassError, QuantizationError
from albert_edge.onnx.inspect import ort_optimized_model
from albert_edge.onnx.passes import run_passes
from albert_edge.onnx.quant import QuantState, build_passes, recipe
from albert_edge.onnx.quant.int4 import (
    DOMAIN,
    OP,
    ROWS_OP,
    SCALES_OP,
    PackInt4Pass,
    check_int4_folds,
    codes_block,
    codes_of,
    declare,
    decode,
    decode_rows,
    multiplier_max,
    pack,
)
from albert_edge.onnx.quant.recipes import SATURATION_FREE_MAX_ABS
from albert_edge.onnx.quant.tables import decode_log_scales, quantize_blocks, table_scale_format
from tests.onnx.graphs import clone, op_types, run_ort
from tests.onnx.test_quant_passes import _f, _model, _state, _two_matmuls, _x

INT4_OPS = {OP, ROWS_OP, SCALES_OP}


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _weight(k: int, n: int, block: int, seed: int = 0) -> np.ndarray:
    """[K, N] fp32 with columns and blocks of very different magnitudes, so that the
    block multipliers span 1..M."""
    rng = _rng(seed)
    col = np.exp(rng.uniform(-2, 1, n))
    blk = np.exp(rng.uniform(-3, 0, (k // block, 1, n)))
    w = rng.standard_normal((k // block, block, n)) * blk * col
    return w.reshape(k, n).astype(np.float32)


# --- pack / decode -----------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "bound"), [(SATURATION_FREE_MAX_ABS, 63), (127, 126)])
@pytest.mark.parametrize("scale_shape", [(24,), (), (1,)])
def test_pack_decode_round_trip(limit: int, bound: int, scale_shape: tuple[int, ...]) -> None:
    k, n, block = 64, 24, 16
    w = _weight(k, n, block)
    codes, mult, w8, scale = pack(w, scale_shape, block, limit)
    big_m = multiplier_max(limit)
    assert 7 * big_m == bound
    assert codes.dtype == mult.dtype == np.uint8 and w8.dtype == np.int8
    assert codes.shape == (k // block, block // 2, n) and mult.shape == (k // block, 1, n)
    assert scale.dtype == np.float32 and scale.shape == scale_shape
    # decode (the function's numpy reference) is exactly q · m, |q| ≤ 7, |q·m| ≤ 7·M
    got = decode(codes, mult)
    np.testing.assert_array_equal(got, w8)
    m = mult.astype(np.int32)  # [K/B, 1, N]
    assert m.min() >= 1 and m.max() <= big_m
    blocks = got.astype(np.int32).reshape(k // block, block, n)
    assert np.all(blocks % m == 0) and np.abs(blocks // m).max() <= 7
    assert np.abs(got.astype(np.int32)).max() == bound  # the largest block of a column
    assert len(np.unique(m)) > 3  # the multipliers are used, not all M
    # the scale: absmax / (7·M), per column or per tensor
    w64 = w.astype(np.float64)
    absmax = np.abs(w64).max(axis=0) if scale_shape == (n,) else np.abs(w64).max()
    np.testing.assert_allclose(
        np.broadcast_to(scale, (n,)), np.broadcast_to(absmax / bound, (n,)), rtol=1e-6
    )
    # each block's step m·scale covers its absmax, and the next smaller one does not
    step = m * np.broadcast_to(scale, (n,)).astype(np.float64)  # [K/B, 1, N]
    bmax = np.abs(w64.reshape(k // block, block, n)).max(axis=1, keepdims=True)
    assert np.all(bmax <= 7 * step * (1 + 1e-6))
    smaller = (m - 1) * np.broadcast_to(scale, (n,)).astype(np.float64)
    assert np.all((m == 1) | (bmax > 7 * smaller))
    # dequantized: within half a block step of the fp32 weight, every element
    err = np.abs(
        got.astype(np.float64).reshape(k // block, block, n) * np.broadcast_to(scale, (n,))
        - w64.reshape(k // block, block, n)
    )
    assert np.all(err <= 0.5 * step * (1 + 1e-6) + 1e-12), float((err / step).max())


def test_pack_zero_weight_and_zero_block() -> None:
    k, n, block = 32, 4, 16
    codes, mult, w8, scale = pack(np.zeros((k, n), np.float32), (n,), block, 64)
    assert not w8.any() and not decode(codes, mult).any()
    assert np.all(codes == 0x88) and np.all(mult == 1) and np.all(np.isfinite(scale))
    w = _weight(k, n, block)
    w[:block, 1] = 0.0  # one all-zero block of column 1
    codes, mult, w8, scale = pack(w, (n,), block, 64)
    assert mult[0, 0, 1] == 1 and not decode(codes, mult)[:block, 1].any()
    np.testing.assert_array_equal(decode(codes, mult), w8)
    assert np.all(scale > 0)


@pytest.mark.parametrize(("k", "block"), [(48, 32), (24, 5), (18, 3)])
def test_pack_refuses_a_block_that_does_not_cut_k_in_even_blocks(k: int, block: int) -> None:
    with pytest.raises(QuantizationError, match="does not divide"):
        pack(np.ones((k, 4), np.float32), (4,), block, 64)


def test_codes_block() -> None:
    # powers of two (int4_block_size), capped to K
    assert codes_block(256, 512) == 256 and codes_block(256, 768) == 256
    assert codes_block(256, 384) == 128 and codes_block(256, 64) == 64
    assert codes_block(256, 16) == 16 and codes_block(32, 4096) == 32
    assert codes_block(256, 8) == 8 and codes_block(256, 2) == 2
    # no power of two ≥ 16 divides K: the largest even divisor up to the request
    assert codes_block(64, 100) == 50 and codes_block(256, 100) == 100
    assert codes_block(256, 30) == 30 and codes_block(16, 36) == 12
    for req, k in [(256, 100), (64, 100), (128, 312), (256, 1000), (16, 36)]:
        b = codes_block(req, k)
        assert b is not None and k % b == 0 and b % 2 == 0 and b <= max(req, 16)
    # odd K cannot put two rows in a byte: that weight stays int8
    for k in (1, 15, 33, 101):
        assert codes_block(256, k) is None


# --- the model-local functions in ONNX Runtime --------------------------------------------


def _call(
    op: str, inputs: dict[str, np.ndarray], out_shape: list[int], out_type: int, feed: bool = True
) -> tuple[ir.Model, dict[str, np.ndarray]]:
    """A one-node model calling ``albert_edge.<op>`` on ``inputs``, fed at run time
    (``feed``) or stored as initializers; returns it and its feeds."""
    node = helper.make_node(op, list(inputs), ["y"], name="call", domain=DOMAIN)
    dtype = helper.np_dtype_to_tensor_dtype
    graph_inputs = [_f(k, *v.shape, dtype=dtype(v.dtype)) for k, v in inputs.items()]
    inits = [numpy_helper.from_array(v, k) for k, v in inputs.items()]
    model = _model(
        [node],
        graph_inputs if feed else [],
        [_f("y", *out_shape, dtype=out_type)],
        [] if feed else inits,
    )
    declare(model, op)
    return model, (dict(inputs) if feed else {})


@pytest.mark.parametrize("feed", [True, False])
def test_int4_weight_function_equals_decode(feed: bool) -> None:
    k, n, block = 64, 12, 16
    codes, mult, w8, _ = pack(_weight(k, n, block, seed=1), (n,), block, 127)
    assert mult.max() > 9  # the full range is exercised (products up to 126)
    model, feeds = _call(OP, {"codes": codes, "m": mult}, [k, n], TensorProto.INT8, feed=feed)
    (got,) = run_ort(model, feeds)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, decode(codes, mult))
    np.testing.assert_array_equal(got, w8)
    # any valid codes: nibbles 1..15 (q = -7..7), both halves of a block distinct
    rng = _rng(2)
    lo, hi = rng.integers(1, 16, (2, 3, 8, 5))
    codes = (lo | (hi << 4)).astype(np.uint8)
    mult = rng.integers(1, 19, (3, 1, 5)).astype(np.uint8)
    model, feeds = _call(OP, {"codes": codes, "m": mult}, [48, 5], TensorProto.INT8)
    (got,) = run_ort(model, feeds)
    np.testing.assert_array_equal(got, decode(codes, mult))
    # the layout: row j of a block in the low nibble, row j + B/2 in the high one
    np.testing.assert_array_equal(got[:8], (lo[0] - 8) * mult[0])
    np.testing.assert_array_equal(got[8:16], (hi[0] - 8) * mult[0])


def test_int4_rows_function_equals_decode_rows() -> None:
    codes = _rng(3).integers(0, 256, (37, 8)).astype(np.uint8)
    model, feeds = _call(ROWS_OP, {"codes": codes}, [37, 16], TensorProto.INT8)
    (got,) = run_ort(model, feeds)
    np.testing.assert_array_equal(got, decode_rows(codes))
    # low nibble first: element 2j of a row is the low nibble of byte j
    np.testing.assert_array_equal(got[:, 0::2], (codes % 16).astype(np.int8) - 8)
    np.testing.assert_array_equal(got[:, 1::2], (codes // 16).astype(np.int8) - 8)


@pytest.mark.parametrize("v", [40, 41])  # odd V: the last byte's high nibble is padding
def test_int4_scales_function_equals_decode_log_scales(v: int) -> None:
    w = (_rng(4).standard_normal((v, 16)) * np.exp(_rng(5).uniform(-4, 0, (v, 1)))).astype(
        np.float32
    )
    w[3] = 0.0  # an all-zero row
    codes, stored, sup = quantize_blocks(w, 4, 16, scales="u4log")
    assert sup is not None and stored.shape == ((v + 1) // 2,) and stored.dtype == np.uint8
    k = np.stack([stored % 16, stored // 16], axis=-1).reshape(-1)
    want = (np.float32(sup) * decode_log_scales(k)).reshape(-1, 1)
    inputs = {"packed": stored, "super": np.asarray(sup, np.float32)}
    model, feeds = _call(SCALES_OP, inputs, [len(k), 1], TensorProto.FLOAT)
    (got,) = run_ort(model, feeds)
    assert got.shape == (len(k), 1) and got.dtype == np.float32
    np.testing.assert_array_max_ulp(got, want, maxulp=1)
    # the stored scale is never smaller than the row's own step (no code clips), and is
    # within a quarter octave of it unless the row is below the 4-octave range
    step = np.abs(w).max(axis=1) / 7
    scale = got[:v, 0].astype(np.float64)
    assert np.all(scale >= step * (1 - 1e-6))
    inside = step >= sup * 2 ** (-15 / 4)
    assert inside.sum() > v // 2
    assert np.all(scale[inside] <= step[inside] * 2**0.25 * (1 + 1e-6))
    # the codes are those of that scale: the table is within half a step of w
    q = decode_rows(codes).astype(np.float64)
    assert np.all(np.abs(q * scale[:, None] - w) <= 0.5 * scale[:, None] * (1 + 1e-6))


def test_table_scale_format_uses_log_scales_only_for_small_folded_rows() -> None:
    # a byte per row would cost ≥ 2 % of a row of 4-bit codes below E = 100
    assert table_scale_format(4, tied=False, dim=64, fold=True) == "u4log"
    assert table_scale_format(4, tied=False, dim=99, fold=True) == "u4log"
    assert table_scale_format(4, tied=False, dim=100, fold=True) == "u8"
    assert table_scale_format(4, tied=False, dim=64, fold=False) == "u8"  # nbits route
    assert table_scale_format(4, tied=True, dim=64, fold=True) == "fp32"
    assert table_scale_format(8, tied=False, dim=64, fold=True) == "fp16"
    with pytest.raises(QuantizationError, match="one per row"):
        quantize_blocks(np.ones((4, 32), np.float32), 4, 16, scales="u4log")


def test_functions_are_standard_ops_and_pass_the_full_checker() -> None:
    model = _model([], [], [], [])
    for op in sorted(INT4_OPS):
        declare(model, op)
        declare(model, op)  # once
    assert len(model.functions) == 3 and model.opset_imports[DOMAIN] == 1
    allowed = {"Constant", "Cast", "Mod", "Div", "Concat", "Sub", "Mul", "Shape", "Reshape"}
    allowed |= {"Unsqueeze", "Pow"}
    for fn in model.functions.values():
        assert set(fn.opset_imports) == {""}
        assert {n.op_type for n in fn} <= allowed and {n.domain for n in fn} == {""}
    codes, mult, _, _ = pack(_weight(32, 4, 16), (4,), 16, 64)
    m, _ = _call(OP, {"codes": codes, "m": mult}, [32, 4], TensorProto.INT8, feed=False)
    onnx.checker.check_model(ir.to_proto(m), full_check=True)


# --- ONNX Runtime folds them at load -------------------------------------------------------


def _int4_matmul(k: int = 32, n: int = 8, stored: bool = True) -> tuple[ir.Model, np.ndarray]:
    """x → DynamicQuantizeLinear → MatMulInteger(·, Int4Weight(codes, m)) → Cast → Mul,
    the int8-dynamic graph ORT's quantizer writes, with codes stored (or fed)."""
    codes, mult, w8, scale = pack(_weight(k, n, 16, seed=6), (n,), 16, 64)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], name="dq"),
        helper.make_node(OP, ["codes", "m"], ["W"], name="decode", domain=DOMAIN),
        helper.make_node("MatMulInteger", ["xq", "W", "xz", "wz"], ["acc"], name="mm"),
        helper.make_node("Cast", ["acc"], ["accf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["xs", "ws"], ["s"], name="s"),
        helper.make_node("Mul", ["accf", "s"], ["y"], name="y"),
    ]
    inits = [
        numpy_helper.from_array(mult, "m"),
        numpy_helper.from_array(np.zeros(n, np.int8), "wz"),
        numpy_helper.from_array(scale, "ws"),
    ]
    inputs = [_f("x", 2, k)]
    if stored:
        inits.append(numpy_helper.from_array(codes, "codes"))
    else:
        inputs.append(_f("codes", *codes.shape, dtype=TensorProto.UINT8))
    model = _model(nodes, inputs, [_f("y", 2, n)], inits)
    declare(model, OP)
    return model, w8


def test_onnx_runtime_folds_int4_weight_to_a_stored_int8_tensor() -> None:
    model, w8 = _int4_matmul()
    x = _x(2, 32)
    before = run_ort(clone(model), {"x": x})[0]
    ran = ort_optimized_model(ir.to_proto(model), level="all")
    assert not [n.op_type for n in ran.graph.node if n.domain == DOMAIN or n.op_type in INT4_OPS]
    assert not {"Mod", "Div", "Concat", "Reshape"} & {n.op_type for n in ran.graph.node}
    inits = {t.name: t for t in ran.graph.initializer}
    weight_ops = [
        n for n in ran.graph.node if n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul")
    ]
    assert len(weight_ops) == 1
    b = weight_ops[0].input[1]
    assert b in inits and inits[b].data_type == TensorProto.INT8
    np.testing.assert_array_equal(numpy_helper.to_array(inits[b]), w8)
    # same result folded or not
    sess = ort.InferenceSession(ran.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], before, rtol=1e-6, atol=1e-6)
    # the check that proves it on every artifact, on the bytes written
    entry = check_int4_folds(model, ir.to_proto(model).SerializeToString())
    assert entry == {"name": "check-int4-folds", "runtime_int8_weight_ops": 1, "int8_weight_ops": 1}


def test_int4_folds_check_fails_when_the_codes_are_not_constant() -> None:
    model, _ = _int4_matmul(stored=False)
    # ORT inlines the call but cannot fold it: the weight is computed at every run
    ran = ort_optimized_model(ir.to_proto(model), level="all")
    assert {"Mod", "Reshape"} <= {n.op_type for n in ran.graph.node}
    with pytest.raises(QuantizationError, match="check-int4-folds: ONNX Runtime runs 0 weight op"):
        check_int4_folds(model, ir.to_proto(model).SerializeToString())


# --- PackInt4Pass ------------------------------------------------------------------------


def _int4_recipe_until_pack(model: ir.Model) -> tuple[ir.Model, QuantState]:
    """The int4 recipe's passes before quant-int4-pack, run on ``model``: ORT's int8 graph."""
    st = _state("int4")
    passes = build_passes(recipe("int4"), st)
    names = [p.name for p in passes]
    out, _ = run_passes(model, passes[: names.index("quant-int4-pack")])
    return out, st


def test_int4_recipe_end_to_end_on_a_shared_weight() -> None:
    model = _two_matmuls()
    x = _x(2, 16)
    before = run_ort(clone(model), {"x": x})[0]
    st = _state("int4")
    passes = build_passes(recipe("int4"), st)
    out, log = run_passes(model, passes)
    kinds = op_types(out)
    assert kinds.count("MatMulInteger") == 2 and kinds.count(OP) == 1  # one decode, two uses
    assert not [
        v
        for v in out.graph.initializers.values()
        if v.const_value.dtype == ir.DataType.INT8 and len(v.const_value.shape) == 2
    ]
    (node,) = [n for n in out.graph if n.op_type == OP]
    codes, mult = codes_of(node)  # type: ignore[misc]
    assert codes.shape == (1, 8, 16) and np.abs(decode(codes, mult).astype(int)).max() == 63
    pack_log = next(e for e in log if e["name"] == "quant-int4-pack")
    assert pack_log["weights"] == 1 and pack_log["blocks"] == {"W": 16}
    folds = check_int4_folds(out, ir.to_proto(out).SerializeToString())  # what convert runs
    assert folds["runtime_int8_weight_ops"] == folds["int8_weight_ops"] == 2
    after = run_ort(out, {"x": x})[0]
    sqnr = 10 * np.log10(np.sum(before**2) / np.sum((before - after) ** 2))
    assert sqnr > 15, sqnr


def test_pack_postcondition_fails_when_a_weight_stays_int8() -> None:
    class Lazy(PackInt4Pass):
        def call(self, model: ir.Model) -> ir.passes.PassResult:
            return ir.passes.PassResult(model, modified=False)

    model, st = _int4_recipe_until_pack(_two_matmuls())
    assert "W_quantized" in model.graph.initializers
    with pytest.raises(PassError, match=r"2 weight\(s\) still stored int8: W_quantized"):
        Lazy(st, 64)(model)


def test_pack_postcondition_fails_above_the_limit_and_on_computed_codes() -> None:
    model, st = _int4_recipe_until_pack(_two_matmuls())
    p = PackInt4Pass(st, 64)
    p(model)
    p.ensures(model)
    node = next(n for n in model.graph if n.op_type == OP)
    m = node.inputs[1]
    assert m is not None and m.const_value is not None
    ok = m.const_value
    m.const_value = ir.tensor(np.full(ok.shape.numpy(), 18, np.uint8), name=m.name)
    with pytest.raises(PassError, match=r"\|w\| 126 > 64"):
        p.ensures(model)
    m.const_value = ok
    p.ensures(model)
    # an Int4Weight reading a graph input is not stored: ORT could never fold it
    fed = ir.Value(
        name="codes_in", type=ir.TensorType(ir.DataType.UINT8), shape=ir.Shape([1, 8, 16])
    )
    model.graph.inputs.append(fed)
    node.replace_input_with(0, fed)
    with pytest.raises(PassError, match="inputs are not stored constants"):
        p.ensures(model)


def test_odd_k_weight_stays_int8_and_is_reported() -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "A"], ["h"], name="m1"),
        helper.make_node("MatMul", ["h", "B"], ["y"], name="m2"),
    ]
    rng = _rng(7)
    inits = [
        numpy_helper.from_array(rng.standard_normal((16, 15)).astype(np.float32), "A"),
        numpy_helper.from_array(rng.standard_normal((15, 16)).astype(np.float32), "B"),
    ]
    model = _model(nodes, [_f("x", 2, 16)], [_f("y", 2, 16)], inits)
    out, log = run_passes(model, build_passes(recipe("int4"), _state("int4")))
    pack_log = next(e for e in log if e["name"] == "quant-int4-pack")
    assert pack_log["kept_int8_odd_k"] == ["B"] and pack_log["blocks"] == {"A": 16}
    # A is decoded by Int4Weight, B (K=15) stays a stored int8 tensor
    a, b = (n.inputs[1] for n in out.graph if n.op_type == "MatMulInteger")
    assert a is not None and b is not None
    assert a.producer().op_type == OP and a.const_value is None  # type: ignore[union-attr]
    t = b.const_value
    assert b.producer() is None and t is not None
    assert t.dtype == ir.DataType.INT8 and tuple(t.shape) == (15, 16)


# --- end to end on a tiny random checkpoint ---------------------------------------------


@pytest.fixture(scope="module")
def tiny_int4(make_checkpoint, tmp_path_factory) -> dict[str, Path]:
    """``convert`` of one tiny random checkpoint: fp32 and int4 (default flags, verified)."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    root = tmp_path_factory.mktemp("int4-e2e")
    out = {"fp32": root / "fp32", "int4": root / "int4", "ckpt": make_checkpoint("tiny")}
    convert(out["ckpt"], out["fp32"], ConvertOptions(precision="fp32", verify=False))
    convert(out["ckpt"], out["int4"], ConvertOptions(precision="int4"))
    return out


def _decoded_weights(model: onnx.ModelProto) -> list[np.ndarray]:
    """decode() of every Int4Weight call of ``model`` (codes and multipliers stored)."""
    found = []
    for node in ir.from_proto(model).graph:
        pair = codes_of(node)
        if node.op_type == OP:
            assert pair is not None, node.name
            found.append(decode(*pair))
    return found


def test_default_int4_artifact(tiny_int4) -> None:
    from albert_edge.onnx.inspect import inspect_onnx, matmul_counts

    manifest = json.loads((tiny_int4["int4"] / "manifest.json").read_text())
    q = manifest["quantization"]
    assert q["int4_kernel"] == "int8" and "int8-dynamic's speed" in q["speed_note"]
    assert manifest["model_file"] == "onnx/model_q4.onnx"
    assert manifest["verification"]["passed"]
    passes = {p["name"]: p for p in q["passes"]}
    assert (
        passes["quant-int4-pack"]["weights"] == 7
        and "kept_int8_odd_k" not in passes["quant-int4-pack"]
    )
    folds = passes["check-int4-folds"]
    assert folds["runtime_int8_weight_ops"] == folds["int8_weight_ops"] == q["matmuls_total"]
    path = tiny_int4["int4"] / manifest["model_file"]
    info = inspect_onnx(path)
    fp32 = inspect_onnx(tiny_int4["fp32"] / "onnx" / "model.onnx")
    assert info["precision"] == "int4"
    assert info["matmuls_quantized"] == info["matmuls_total"] == fp32["matmuls_total"] > 0
    assert info["factorized_embedding_intact"] is True
    # codes count unpacked, multipliers and scales do not: the fp32 model's parameters
    assert info["unique_params"] == fp32["unique_params"]
    # the file: every weight an Int4Weight call, the tables 4-bit (E=16: log2 row scales)
    model = onnx.load(str(path))
    ops = {n.op_type for n in model.graph.node}
    assert ops >= INT4_OPS and not {"MatMulNBits", "MatMul", "Gemm"} & ops
    assert {(f.domain, f.name) for f in model.functions} == {(DOMAIN, op) for op in INT4_OPS}
    assert all(
        t.data_type != TensorProto.INT8 or len(t.dims) < 2 for t in model.graph.initializer
    )  # no 2-D int8 tensor is stored: weights and tables are 4-bit codes
    weights = _decoded_weights(model)
    assert len(weights) >= 6 and max(int(np.abs(w.astype(int)).max()) for w in weights) == 63
    # the graph ONNX Runtime runs: no Int4* node, every weight a stored int8 tensor
    ran = ort_optimized_model(model, level="all")
    assert not [n for n in ran.graph.node if n.op_type in INT4_OPS or n.domain == DOMAIN]
    rt = matmul_counts(ir.from_proto(ran), executed=True)
    assert rt["matmuls_quantized"] == rt["matmuls_total"] == info["matmuls_total"]
    inits = {t.name: t for t in ran.graph.initializer}
    tables = [
        inits[n.input[0]]
        for n in ran.graph.node
        if n.op_type == "Gather" and n.input[0] in inits and len(inits[n.input[0]].dims) == 2
    ]
    assert sum(t.data_type == TensorProto.INT8 and t.dims[1] == 16 for t in tables) == 2


def test_int4_kernel_nbits_and_full_range_target(tiny_int4) -> None:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.onnx.quant import quantize_model
    from albert_edge.options import ConvertOptions

    fp32 = onnx.load(str(tiny_int4["fp32"] / "onnx" / "model.onnx"))
    ckpt = load_checkpoint(tiny_int4["ckpt"])
    nbits, report = quantize_model(
        fp32, ckpt, ConvertOptions(precision="int4", int4_kernel="nbits")
    )
    ops = {n.op_type for n in nbits.graph.node}
    assert report["int4_kernel"] == "nbits" and "MatMulNBits" in ops
    assert not INT4_OPS & ops and not nbits.functions
    assert "MatMulInteger" not in ops
    # full range (int32-accumulating kernels): multipliers up to 18, |w| up to 126
    vnni, report = quantize_model(fp32, ckpt, ConvertOptions(precision="int4", runs_on="x86-vnni"))
    assert report["int4_kernel"] == "int8"
    full = max(int(np.abs(w.astype(int)).max()) for w in _decoded_weights(vnni))
    assert full > SATURATION_FREE_MAX_ABS and full == 126
    portable = onnx.load(str(tiny_int4["int4"] / "onnx" / "model_q4.onnx"))
    assert max(int(np.abs(w.astype(int)).max()) for w in _decoded_weights(portable)) == 63


# --- the accuracy bar, on the model trained on SST-2 --------------------------------


@pytest.mark.parametrize("kernel", ["int8", "nbits"])
def test_int4_holds_sst2_accuracy_on_the_trained_model(kernel, sst2_dev, tmp_path) -> None:
    """The issue's bar: int4 within 1.5 points of PyTorch on all 872 SST-2 dev sentences.
    Measured (x86-vnni): int8 kernels 80.28 % and 28.5 dB logits SQNR, MatMulNBits 80.28 %
    and 27.7 dB, PyTorch 80.39 %; the SQNR floor leaves ~3 dB for other kernels' rounding."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions
    from albert_edge.verify import verify

    trained = Path(__file__).resolve().parents[2] / "albert_edge" / "models" / "sst2-albert-tiny"
    out = tmp_path / kernel
    convert(trained, out, ConvertOptions(precision="int4", int4_kernel=kernel, verify=False))
    acc = verify(out, data=sst2_dev, progress=False).to_dict()["accuracy"]
    assert acc["examples"] == 872
    assert acc["accuracy_artifact"] >= acc["accuracy_reference"] - 0.015, acc
    assert acc["logits_sqnr_db"] >= 25.0, acc


def test_folded_tables_take_any_even_embedding_size() -> None:
    """Unpacked at load, a 4-bit table needs no MatMulNBits block: any divisor of E (the
    whole row up to --block-size) — E=100 and E=24 convert where the power-of-two rule
    refused them; a tied decoder (MatMulNBits reads the codes) keeps that rule."""
    from albert_edge.onnx.quant.tables import table_block_size

    assert table_block_size(100, 4, 256, fold=True) == 100
    assert table_block_size(24, 4, 256, fold=True) == 24
    assert table_block_size(512, 4, 256, fold=True) == 256
    assert table_block_size(600, 4, 256, fold=True) == 200
    assert table_block_size(64, 4, 256, fold=True) == table_block_size(64, 4, 256) == 64
    with pytest.raises(QuantizationError):
        table_block_size(100, 4, 256)  # MatMulNBits form: powers of two >= 16 only
    with pytest.raises(QuantizationError):
        table_block_size(100, 4, 256, tied=True, fold=True)
