"""Issue 17's floor pieces on tiny graphs: int4 block choice, int8 side tables, fp16
table scales, and the defaults (word table quantized unless --keep-embeddings-wide)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from albert_edge.cli import _quantization_options, build_parser
from albert_edge.onnx.quant import int4_block_size
from albert_edge.onnx.quant.embed import (
    quantize_side_tables_proto as quantize_side_tables,
)
from albert_edge.onnx.quant.embed import (
    quantize_word_table_proto as quantize_word_table,
)
from albert_edge.onnx.quant.tables import find_word_table, quantize_blocks, side_tables
from albert_edge.options import ConvertOptions


def test_int4_block_is_chosen_per_weight_and_never_pads_k() -> None:
    assert int4_block_size(128, 768) == 128
    assert int4_block_size(128, 3072) == 128
    assert int4_block_size(128, 64) == 64  # a 128 block would store K=64 twice over
    assert int4_block_size(128, 96) == 32  # must divide K
    assert int4_block_size(256, 512) == 256
    assert int4_block_size(32, 16) == 16
    assert int4_block_size(16, 8) == 16  # MatMulNBits' smallest block


def _gather_model(tables: dict[str, np.ndarray]) -> onnx.ModelProto:
    nodes, outs = [], []
    for name in tables:
        nodes.append(helper.make_node("Gather", [name, "ids"], [f"{name}_out"], name=f"g_{name}"))
        outs.append(helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [None])],
        outs,
        [numpy_helper.from_array(w, n) for n, w in tables.items()],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )


def _run(model: onnx.ModelProto, ids: np.ndarray) -> list[np.ndarray]:
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [np.asarray(x) for x in s.run(None, {"ids": ids})]


def test_side_table_int8_per_column_reads_the_same_rows() -> None:
    rng = np.random.default_rng(0)
    word = rng.normal(size=(1000, 16)).astype(np.float32)
    pos = (rng.normal(size=(512, 16)) * np.linspace(0.01, 1.0, 16)).astype(np.float32)
    small = rng.normal(size=(512, 1)).astype(np.float32)  # 512 values: too small to pay
    model = _gather_model({"word": word, "pos": pos, "types": small})
    assert side_tables(ir.from_proto(model), "word") == ["pos"]
    ids = np.array([0, 7, 511, 3])
    ref = _run(model, ids)
    facts = quantize_side_tables(model, "word")
    assert [f["table"] for f in facts] == ["pos"]
    inits = {t.name: t for t in model.graph.initializer}
    assert "pos" not in inits and "word" in inits and "types" in inits
    codes = [t for t in inits.values() if t.data_type == TensorProto.INT8 and len(t.dims) == 2]
    assert len(codes) == 1 and list(codes[0].dims) == [512, 16]
    out = _run(model, ids)
    # per-column scale: the error of each column is at most half its own step
    step = np.abs(pos).max(axis=0) / 127.0
    assert np.all(np.abs(out[1] - ref[1]) <= step / 2 + 1e-7)
    np.testing.assert_array_equal(out[0], ref[0])  # the word table is not a side table


def test_word_table_one_byte_scales_agree_with_codes() -> None:
    rng = np.random.default_rng(1)
    w = rng.normal(size=(300, 64)).astype(np.float32)
    w[7] *= 0.01  # a row far below the largest: its scale still rounds up, never clips
    w[8] = 0.0
    _, s32, none = quantize_blocks(w, 8, 64)
    codes, s8, sup = quantize_blocks(w, 8, 64, scales="u8", signed=True)
    assert none is None and sup is not None
    assert s32.dtype == np.float32 and s8.dtype == np.uint8 and s8.nbytes * 4 == s32.nbytes
    assert codes.dtype == np.int8 and codes.shape == (300, 64)
    step = s8.astype(np.float32) * np.float32(sup)
    live = np.abs(w).max(axis=1) > 0  # (a zero row's fp32 scale is a placeholder 1.0)
    assert np.all(step[live] >= s32[live] * (1 - 1e-6))  # rounded up: no value clips
    assert np.all(step[live] <= s32[live] + sup)
    deq = codes.astype(np.float32) * step
    assert np.all(np.abs(deq - w) <= step / 2 + 1e-7)
    assert np.all(deq[8] == 0)
    model = _gather_model({"word": w})
    ids = np.array([1, 299, 5, 7, 8])
    use = find_word_table(ir.from_proto(model), 300)
    assert use is not None
    facts = quantize_word_table(model, use, bits=8, block_size=64, qdq=False)
    assert "fp16 scales" in facts["format"]  # 8-bit tables keep fp16 row scales
    out = _run(model, ids)[0]
    assert out.dtype == np.float32
    fp16 = np.abs(w).max(axis=1) / 127
    fp16[fp16 == 0] = 1.0
    fp16 = fp16.astype(np.float16).astype(np.float32)
    stored = np.clip(np.rint(w / fp16[:, None]), -127, 127) * fp16[:, None]
    np.testing.assert_allclose(out, stored[ids], rtol=1e-6)  # fp32 arithmetic: the same rows


def _dequantized(w: np.ndarray, bits: int, block: int) -> np.ndarray:
    """The table the stored codes and scales represent, computed here in numpy."""
    fmt = "u8" if bits == 4 else "fp16"  # albert_edge.onnx.quant.tables.table_scale_format
    codes, stored, sup = quantize_blocks(w, bits, block, scales=fmt, signed=bits == 8)
    scales = stored.astype(np.float32) * np.float32(sup if sup is not None else 1.0)
    if bits == 4:
        unpacked = np.empty((w.shape[0], w.shape[1]), dtype=np.float32)
        unpacked[:, 0::2] = codes & 0x0F
        unpacked[:, 1::2] = codes >> 4
        q = unpacked - 8
    else:
        q = codes.astype(np.float32)
    v, e = w.shape
    rows = q.reshape(v, e // block, block) * scales[..., None]
    return rows.reshape(v, e)


@pytest.mark.parametrize(("bits", "block"), [(8, 64), (4, 64), (4, 32), (4, 16)])
@pytest.mark.parametrize("ids_shape", [(5,), (2, 3)])
def test_word_table_standard_ops_read_the_stored_rows(bits, block, ids_shape) -> None:
    """The quantized table is read by ai.onnx ops only (every runtime has them), gives
    exactly the rows its codes × scales represent, for 1-D and 2-D ids, and ONNX Runtime's
    load-time optimizations keep it quantized: no V×E float tensor in the graph it runs."""
    from albert_edge.onnx.inspect import ort_optimized_model

    rng = np.random.default_rng(bits * block)
    v, e = 3000, 64
    w = rng.normal(scale=0.05, size=(v, e)).astype(np.float32)
    model = _gather_model({"word": w})
    ids_info = helper.make_tensor_value_info("ids", TensorProto.INT64, [None] * len(ids_shape))
    model.graph.input[0].CopyFrom(ids_info)
    use = find_word_table(ir.from_proto(model), v)
    assert use is not None
    facts = quantize_word_table(model, use, bits=bits, block_size=block, qdq=False)
    assert facts["block_size"] == block
    assert {n.domain for n in model.graph.node} <= {"", "ai.onnx"}
    ids = rng.integers(0, v, size=ids_shape)
    ids[(0,) * len(ids_shape)] = v - 1
    out = _run(model, ids)[0]
    assert out.shape == (*ids_shape, e)
    np.testing.assert_allclose(out, _dequantized(w, bits, block)[ids], rtol=1e-6, atol=1e-9)
    # symmetric rounding: each value within half its block's step (amax / qmax; 4-bit:
    # rounded up to the one-byte scale grid, at most amax_max / qmax / 255 more) of w
    qmax = 2 ** (bits - 1) - 1
    step = np.repeat(np.abs(w.reshape(v, e // block, block)).max(-1) / qmax, block, axis=1)
    grid = step.max() / 255 if bits == 4 else step.max() * 2.0**-10
    assert np.all(np.abs(out - w[ids]) <= (step[ids] + grid) / 2 + 1e-7)
    runs = ort_optimized_model(model, "all")
    floats = [t for t in runs.graph.initializer if t.data_type == TensorProto.FLOAT and v in t.dims]
    assert floats == []  # never re-inflated to fp32 by constant folding


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], True),
        (["--quantize-embeddings"], True),  # the old opt-in, now a no-op alias
        (["--keep-embeddings-wide"], False),
    ],
)
def test_cli_defaults_quantize_the_word_table(argv: list[str], expected: bool) -> None:
    a = build_parser().parse_args(["convert", "-o", "x", "--precision", "int8-dynamic", *argv])
    assert _quantization_options(a)["quantize_embeddings"] is expected
    assert ConvertOptions(precision="int8-dynamic").quantize_embeddings is True
