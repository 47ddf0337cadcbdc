"""Each quantization pass on small hand-built graphs: what it rewrites, that the result
computes the same (ONNX Runtime before/after on seeded inputs), and that its
postcondition really fails on a graph that breaks the promise."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

from albert_edge.errors import PassError, QuantizationError, UnsupportedError
from albert_edge.onnx.passes import run_passes
from albert_edge.onnx.quant import QUANT_PRECISIONS, RECIPES, QuantState, build_passes, recipe
from albert_edge.onnx.quant.check import (
    DedupQuantizedPass,
    SaturationCheck,
    SharedWeightsOnceCheck,
    WeightsQuantizedCheck,
    check_runs,
)
from albert_edge.onnx.quant.ort import OrtDynamicQuantPass
from albert_edge.onnx.quant.plan import PlanPass
from albert_edge.onnx.quant.prepare import PrepareGraphPass
from albert_edge.onnx.quant.rewrite import (
    GemmToMatMulPass,
    LocateWordTablePass,
    RestoreTiedGemmPass,
    TiedGemmToMatMulPass,
    UnfuseAttentionPass,
    UnfuseEmbedLayerNormPass,
)
from albert_edge.onnx.quant.state import model_of
from albert_edge.options import ConvertOptions
from tests.onnx.graphs import clone, op_types, run_ort

MS = "com.microsoft"


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _w(name: str, *shape: int, scale: float = 0.1) -> onnx.TensorProto:
    return numpy_helper.from_array((_rng().standard_normal(shape) * scale).astype(np.float32), name)


def _f(name: str, *shape: int | str, dtype: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, list(shape))


def _model(nodes, inputs, outputs, inits, ms: bool = False) -> ir.Model:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(MS, 1)] if ms else [])
    proto = helper.make_model(graph, opset_imports=opsets)
    proto.ir_version = 8
    return ir.from_proto(proto)


def _state(precision: str = "int8-dynamic", **kw) -> QuantState:
    return QuantState(ConvertOptions(precision=precision, verify=False, **kw))


def _x(*shape: int) -> np.ndarray:
    return _rng().standard_normal(shape).astype(np.float32)


# --- the registry --------------------------------------------------------------------


def test_every_precision_is_one_frozen_recipe() -> None:
    # int4 is one precision with two kernels: int4 (int8 kernels) and int4-nbits
    assert sorted(RECIPES) == sorted([*QUANT_PRECISIONS, "int4-nbits"])
    assert recipe("int4", "nbits") is RECIPES["int4-nbits"] and recipe("int4").name == "int4"
    with pytest.raises(UnsupportedError):
        recipe("int4-nbits")  # spelled --precision int4 --int4-kernel nbits
    r = recipe("int4")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.name = "int3"  # type: ignore[misc]
    with pytest.raises(TypeError):
        RECIPES["int3"] = r  # type: ignore[index]
    with pytest.raises(UnsupportedError):
        recipe("int3")
    for name, rec in RECIPES.items():
        st = _state("int4", int4_kernel="nbits") if name == "int4-nbits" else _state(name)
        names = [p.name for p in build_passes(rec, st)]
        assert names[0] == "quant-prepare" and rec.quantizer in names
        checks = names[names.index("check-weights-quantized") :]
        assert checks[:3] == [
            "check-weights-quantized",
            "check-shared-weights-once",
            "check-no-saturation",
        ]
        # ONNX Runtime's checks read the written file (check_written), not a pass's copy
        assert checks[3:] == [] and "check-runs" not in names
        # a per-tensor recipe's per-channel exceptions: restored right after ORT's dynamic
        # quantizer (int8-static hands them to ORT; int4 keeps its own scales)
        assert ("quant-channel-scales" in names) == (name == "int8-dynamic")
        if name == "int8-dynamic":
            assert names.index("quant-channel-scales") == names.index("quant-ort-dynamic") + 1
        if name == "int4":
            assert names.index("quant-int4-stash") < names.index("quant-ort-dynamic")
            assert names.index("quant-ort-dynamic") < names.index("quant-int4-pack")
        assert ("quant-unfuse-attention" in names) == rec.unfuse_attention
        assert ("quant-word-table" in names) == (rec.embeddings is not None)
    assert recipe("int8-static").embeddings.qdq and recipe("int4").embeddings.bits == 4


# --- prepare -------------------------------------------------------------------------


def _shared_through_identity() -> ir.Model:
    """Two unnamed MatMuls reading one weight, the second through an Identity."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("Identity", ["W"], ["W2"]),
        helper.make_node("MatMul", ["h", "W2"], ["y"]),
    ]
    return _model(nodes, [_f("x", 2, 4)], [_f("y", 2, 4)], [_w("W", 4, 4)])


def test_prepare_removes_identity_and_names_every_node() -> None:
    model = _shared_through_identity()
    x = _x(2, 4)
    before = run_ort(clone(model), {"x": x})
    p = PrepareGraphPass()
    p(model)
    assert op_types(model) == ["MatMul", "MatMul"]
    assert [n.inputs[1].name for n in model.graph] == ["W", "W"]
    names = [n.name for n in model.graph]
    assert all(names) and len(set(names)) == 2
    assert p.report["nodes_named"] == 2
    np.testing.assert_allclose(run_ort(model, {"x": x})[0], before[0], rtol=1e-6)


def test_prepare_refuses_a_weight_transposed_at_run_time_and_used_elsewhere() -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="a"),
        helper.make_node("Transpose", ["W"], ["Wt"], name="t", perm=[1, 0]),
        helper.make_node("MatMul", ["h", "Wt"], ["y"], name="b"),
    ]
    model = _model(nodes, [_f("x", 2, 4)], [_f("y", 2, 4)], [_w("W", 4, 4)])
    with pytest.raises(QuantizationError, match="run-time Transpose"):
        PrepareGraphPass()(model)


# --- Gemm → MatMul ---------------------------------------------------------------------


def _two_gemms_one_weight() -> ir.Model:
    nodes = [
        helper.make_node("Gemm", ["x", "W", "b"], ["h"], name="g1", transB=1),
        helper.make_node("Gemm", ["h", "W", "b"], ["y"], name="g2", transB=1),
    ]
    return _model(nodes, [_f("x", 2, 4)], [_f("y", 2, 4)], [_w("W", 4, 4), _w("b", 4)])


def test_gemm_to_matmul_transposes_a_shared_weight_once() -> None:
    model = _two_gemms_one_weight()
    x = _x(2, 4)
    before = run_ort(clone(model), {"x": x})
    st = _state()
    p = GemmToMatMulPass(st)
    p(model)
    assert op_types(model) == ["MatMul", "Add", "MatMul", "Add"]
    assert sorted(model.graph.initializers) == ["W_T", "b"]  # W replaced by one W_T
    assert p.report == {"rewritten": 2} and st.rewrites["gemm_to_matmul"] == 2
    np.testing.assert_allclose(run_ort(model, {"x": x})[0], before[0], rtol=1e-5, atol=1e-6)


def test_gemm_to_matmul_postcondition_fails_when_a_gemm_is_left() -> None:
    class Lazy(GemmToMatMulPass):
        def edit(self, model: ir.Model) -> int:
            return 0

    with pytest.raises(PassError, match="quant-gemm-to-matmul pass: Gemm 'g1'"):
        Lazy(_state())(_two_gemms_one_weight())


# --- fused Attention -------------------------------------------------------------------


def _attention(**attrs) -> ir.Model:
    h, heads = 8, 2
    nodes = [
        helper.make_node(
            "Attention",
            ["x", "Wqkv", "bqkv", "mask"],
            ["y"],
            name="att",
            domain=MS,
            num_heads=heads,
            **attrs,
        )
    ]
    return _model(
        nodes,
        [_f("x", 1, 3, h), _f("mask", 1, 3, dtype=TensorProto.INT32)],
        [_f("y", 1, 3, h)],
        [_w("Wqkv", h, 3 * h), _w("bqkv", 3 * h)],
        ms=True,
    )


def test_unfuse_attention_keeps_the_qkv_weight_and_the_result() -> None:
    model = _attention()
    feeds = {"x": _x(1, 3, 8), "mask": np.array([[1, 1, 0]], np.int32)}
    before = run_ort(clone(model), feeds)
    st = _state("int4")
    UnfuseAttentionPass(st)(model)
    assert op_types(model) == ["Constant", "MatMul", "Split", "MultiHeadAttention"]
    assert model.graph.node(1).inputs[1] is model.graph.initializers["Wqkv"]
    assert st.rewrites["attention_unfused"] == 1
    np.testing.assert_allclose(run_ort(model, feeds)[0], before[0], rtol=1e-4, atol=1e-5)


def test_unfuse_attention_refuses_causal_attention_and_checks_its_promise() -> None:
    with pytest.raises(QuantizationError, match="causal"):
        UnfuseAttentionPass(_state("int4"))(_attention(unidirectional=1))

    class Lazy(UnfuseAttentionPass):
        def edit(self, model: ir.Model) -> int:
            return 0

    with pytest.raises(PassError, match="fused Attention left"):
        Lazy(_state("int4"))(_attention())


# --- EmbedLayerNormalization ---------------------------------------------------------


def _embed_layernorm() -> ir.Model:
    v, e, s = 40, 8, 6
    nodes = [
        helper.make_node(
            "EmbedLayerNormalization",
            ["ids", "seg", "word", "pos", "segt", "gamma", "beta", "mask"],
            ["out", "mask_index"],
            name="eln",
            domain=MS,
            epsilon=1e-5,
        ),
        helper.make_node("Cast", ["mask_index"], ["mi"], name="c", to=TensorProto.FLOAT),
    ]
    return _model(
        nodes,
        [_f(n, 1, s, dtype=TensorProto.INT32) for n in ("ids", "seg", "mask")],
        [_f("out", 1, s, e), _f("mi", 1)],
        [_w("word", v, e), _w("pos", 16, e), _w("segt", 2, e), _w("gamma", e), _w("beta", e)],
        ms=True,
    )


def test_unfuse_embed_layernorm_computes_the_same_and_frees_the_table() -> None:
    model = _embed_layernorm()
    feeds = {
        "ids": np.array([[2, 7, 9, 30, 3, 0]], np.int32),
        "seg": np.array([[0, 0, 0, 1, 1, 0]], np.int32),
        "mask": np.array([[1, 1, 1, 1, 1, 0]], np.int32),
    }
    before = run_ort(clone(model), feeds)
    st = _state("int4")
    st.vocab = 40
    LocateWordTablePass(st)(model)
    assert st.table is not None and st.table.embed_layernorms == ("eln",)
    UnfuseEmbedLayerNormPass(st)(model)
    assert "EmbedLayerNormalization" not in op_types(model)
    assert st.table.gathers and not st.table.embed_layernorms  # re-located: read by Gather
    after = run_ort(model, feeds)
    np.testing.assert_allclose(after[0], before[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(after[1], before[1])


def test_unfuse_embed_layernorm_is_skipped_when_the_table_stays_wide() -> None:
    model = _embed_layernorm()
    st = _state("int4", quantize_embeddings=False)
    LocateWordTablePass(st)(model)
    p = UnfuseEmbedLayerNormPass(st)
    p(model)
    assert p.report == {"skipped": True} and "EmbedLayerNormalization" in op_types(model)


# --- the tied decoder guard ------------------------------------------------------------


def _tied_decoder() -> ir.Model:
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"], name="gather"),
        helper.make_node("Gemm", ["e2", "table", "bias"], ["logits"], name="decoder", transB=1),
        helper.make_node("Reshape", ["e", "shape"], ["e2"], name="flat"),
    ]
    nodes = [nodes[0], nodes[2], nodes[1]]
    return _model(
        nodes,
        [_f("ids", 3, dtype=TensorProto.INT64)],
        [_f("logits", 3, 20)],
        [
            _w("table", 20, 4),
            _w("bias", 20),
            numpy_helper.from_array(np.array([3, 4], np.int64), "shape"),
        ],
    )


def test_tied_guard_moves_the_decoder_off_the_table_and_back() -> None:
    model = _tied_decoder()
    feeds = {"ids": np.array([1, 5, 19], np.int64)}
    before = run_ort(clone(model), feeds)
    st = _state()
    LocateWordTablePass(st)(model)
    assert st.tied == {"table"}
    TiedGemmToMatMulPass(st)(model)
    assert st.protected == ["decoder"]
    assert op_types(model) == ["Gather", "Reshape", "Transpose", "MatMul", "Add"]
    np.testing.assert_allclose(run_ort(clone(model), feeds)[0], before[0], rtol=1e-5, atol=1e-6)
    st.options = dataclasses.replace(st.options, quantize_embeddings=False)
    RestoreTiedGemmPass(st)(model)
    gemm = next(n for n in model.graph if n.name == "decoder")
    assert gemm.op_type == "Gemm" and gemm.inputs[1] is model.graph.initializers["table"]


def test_tied_guard_postcondition_fails_if_the_table_is_still_a_gemm_weight() -> None:
    class Lazy(TiedGemmToMatMulPass):
        def edit(self, model: ir.Model) -> int:
            return 0

    model = _tied_decoder()
    st = _state()
    LocateWordTablePass(st)(model)
    with pytest.raises(PassError, match="still reads the tied table"):
        Lazy(st)(model)


# --- ORT's quantizer as a pass -------------------------------------------------------


def _two_matmuls() -> ir.Model:
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="m1"),
        helper.make_node("MatMul", ["h", "W"], ["y"], name="m2"),
    ]
    return _model(nodes, [_f("x", 2, 16)], [_f("y", 2, 16)], [_w("W", 16, 16)])


def test_int8_dynamic_recipe_end_to_end_on_a_shared_weight() -> None:
    model = _two_matmuls()
    x = _x(2, 16)
    before = run_ort(clone(model), {"x": x})[0]
    st = _state()
    passes = build_passes(recipe("int8-dynamic"), st)
    out, log = run_passes(model, passes)
    assert [e["name"] for e in log] == [p.name for p in passes]
    assert st.nodes == ["m1", "m2"]
    kinds = op_types(out)
    assert kinds.count("MatMulInteger") == 2 and "MatMul" not in kinds
    weights = [v for v in out.graph.initializers.values() if len(v.const_value.shape) == 2]
    assert [v.const_value.dtype for v in weights] == [ir.DataType.INT8]  # stored once
    after = run_ort(out, {"x": x})[0]
    sqnr = 10 * np.log10(np.sum(before**2) / np.sum((before - after) ** 2))
    assert sqnr > 25


def test_quantizer_pass_postcondition_fails_when_it_leaves_a_node_float() -> None:
    class Noop(OrtDynamicQuantPass):
        def quantize(self, proto: onnx.ModelProto) -> onnx.ModelProto:
            return proto

    st = _state()
    model = _two_matmuls()
    PlanPass(st)(model)
    with pytest.raises(QuantizationError, match="quantize_dynamic left 2 node"):
        Noop(st)(model)


def test_a_quantizer_output_with_two_tensors_of_one_name_is_refused() -> None:
    proto = ir.to_proto(_two_matmuls())
    twin = numpy_helper.from_array(np.zeros((16, 16), np.float32), "W")
    proto.graph.initializer.append(twin)
    with pytest.raises(QuantizationError, match="two different tensors named W"):
        model_of(proto, "test")
    same = onnx.ModelProto()
    same.CopyFrom(ir.to_proto(_two_matmuls()))
    same.graph.initializer.append(same.graph.initializer[0])
    assert list(model_of(same, "test").graph.initializers) == ["W"]


# --- dedup and the postconditions ------------------------------------------------------


def test_dedup_merges_equal_initializers() -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "A"], ["h"], name="m1"),
        helper.make_node("MatMul", ["h", "B"], ["y"], name="m2"),
    ]
    w = _w("A", 4, 4)
    b = onnx.TensorProto()
    b.CopyFrom(w)
    b.name = "B"
    model = _model(nodes, [_f("x", 2, 4)], [_f("y", 2, 4)], [w, b])
    p = DedupQuantizedPass()
    p(model)
    assert list(model.graph.initializers) == ["A"] and p.report["initializers_removed"] == 1


def test_weights_quantized_check_fails_on_a_float_matmul() -> None:
    with pytest.raises(QuantizationError, match="2 weight MatMul\\(s\\) stayed float"):
        WeightsQuantizedCheck(_state())(_two_matmuls())


def test_shared_weights_once_check_fails_above_the_floor() -> None:
    st = _state()
    st.floor = 16 * 16 * 4  # the fp32 weight exactly: allowed
    SharedWeightsOnceCheck(st)(_two_matmuls())
    st.floor = 16 * 16  # int8 floor: the fp32 weight is 4x it
    with pytest.raises(QuantizationError, match="stored more than once"):
        SharedWeightsOnceCheck(st)(_two_matmuls())


def _int8_weight(amax: int) -> ir.Model:
    q = np.full((4, 4), amax, np.int8)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], name="dq"),
        helper.make_node("MatMulInteger", ["xq", "Wq", "xz"], ["y"], name="mm"),
    ]
    return _model(
        nodes,
        [_f("x", 2, 4)],
        [_f("y", 2, 4, dtype=TensorProto.INT32)],
        [numpy_helper.from_array(q, "Wq")],
    )


def test_saturation_check_fails_on_full_range_weights_for_portable_only() -> None:
    SaturationCheck(_state())(_int8_weight(64))
    with pytest.raises(QuantizationError, match="saturate"):
        SaturationCheck(_state())(_int8_weight(100))
    SaturationCheck(_state(runs_on="x86-vnni"))(_int8_weight(100))  # VNNI: int32 sums


def test_runs_check_fails_on_a_graph_onnx_runtime_cannot_load(tmp_path) -> None:
    good = tmp_path / "good.onnx"
    good.write_bytes(ir.to_proto(_two_matmuls()).SerializeToString())
    assert check_runs(good, "int8-dynamic") == {"name": "check-runs"}
    bad = _model(
        [helper.make_node("NoSuchOp", ["x"], ["y"], name="n", domain=MS)],
        [_f("x", 2)],
        [_f("y", 2)],
        [],
        ms=True,
    )
    path = tmp_path / "bad.onnx"
    path.write_bytes(ir.to_proto(bad).SerializeToString())
    with pytest.raises(UnsupportedError, match="cannot run the int8-dynamic graph"):
        check_runs(path, "int8-dynamic")
    with pytest.raises(UnsupportedError, match="cannot run the int8-dynamic graph"):
        check_runs(path.read_bytes(), "int8-dynamic")


# --- the word and side tables ----------------------------------------------------------


def _tied_table_model() -> ir.Model:
    """A 64×16 word table read by a Gather and a tied Gemm decoder, a 1024-value
    position table read by a Gather."""
    nodes = [
        helper.make_node("Gather", ["word", "ids"], ["e"], name="gather"),
        helper.make_node("Gather", ["pos", "ids"], ["p"], name="pos_gather"),
        helper.make_node("Add", ["e", "p"], ["h"], name="add"),
        helper.make_node("Gemm", ["h", "word", "bias"], ["logits"], name="decoder", transB=1),
    ]
    return _model(
        nodes,
        [_f("ids", 3, dtype=TensorProto.INT64)],
        [_f("logits", 3, 64)],
        [_w("word", 64, 16), _w("pos", 64, 16), _w("bias", 64)],
        ms=True,
    )


def _table_state(precision: str) -> QuantState:
    st = _state(precision)
    st.vocab = 64
    st.recipe = recipe(precision)
    return st


@pytest.mark.parametrize("precision", ["int8-dynamic", "int4", "int8-static"])
def test_word_and_side_tables_are_stored_quantized_once(precision: str) -> None:
    from albert_edge.onnx.quant.embed import QuantizeSideTablesPass, QuantizeWordTablePass

    model = _tied_table_model()
    feeds = {"ids": np.array([0, 17, 63], np.int64)}
    before = run_ort(clone(model), feeds)[0]
    st = _table_state(precision)
    for p in (LocateWordTablePass(st), PlanPass(st)):
        p(model)
    assert st.plan is not None and st.plan.side_tables == ("pos",)
    QuantizeWordTablePass(st)(model)
    QuantizeSideTablesPass(st)(model)
    DedupQuantizedPass()(model)
    assert "word" not in model.graph.initializers and "pos" not in model.graph.initializers
    floats = [
        n for n, v in model.graph.initializers.items() if v.const_value.dtype == ir.DataType.FLOAT
    ]
    assert all(model.graph.initializers[n].const_value.size <= 64 for n in floats)
    if precision != "int8-static":  # one stored table, read by the gathers and MatMulNBits
        decoder = next(n for n in model.graph if n.name == "decoder")
        assert decoder.op_type == "MatMulNBits"
    after = run_ort(model, feeds)[0]
    sqnr = 10 * np.log10(np.sum(before**2) / np.sum((before - after) ** 2))
    assert sqnr > (15 if precision == "int4" else 30)


def test_word_table_postcondition_fails_if_the_fp32_table_is_still_read(monkeypatch) -> None:
    from albert_edge.onnx.quant import embed

    monkeypatch.setattr(
        embed,
        "quantize_word_table",
        lambda *a, **k: dict.fromkeys(("table", "bits", "gathers", "tied_decoder_matmuls")),
    )
    model = _tied_table_model()
    st = _table_state("int8-dynamic")
    for p in (LocateWordTablePass(st), PlanPass(st)):
        p(model)
    with pytest.raises(PassError, match="fp32 word table is still read"):
        embed.QuantizeWordTablePass(st)(model)


def test_side_table_postcondition_fails_when_the_plan_is_not_met(monkeypatch) -> None:
    from albert_edge.onnx.quant import embed

    monkeypatch.setattr(embed, "quantize_side_tables", lambda *a, **k: [])
    model = _tied_table_model()
    st = _table_state("int8-dynamic")
    for p in (LocateWordTablePass(st), PlanPass(st)):
        p(model)
    with pytest.raises(QuantizationError, match="side tables \\('pos',\\) planned, \\[\\]"):
        embed.QuantizeSideTablesPass(st)(model)
