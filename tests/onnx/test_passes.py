"""Each graph pass on small hand-built graphs: the ops it leaves, its postcondition, and
numeric equality with ONNX Runtime before/after on seeded random inputs."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from albert_edge.errors import PassError
from albert_edge.onnx.passes import (
    CanonicalizeWeightsPass,
    CompactGraphPass,
    DedupInitializersPass,
    FactorizationGuardPass,
    FuseTransformerPass,
    SplitSkipLayerNormPass,
    run_passes,
)
from albert_edge.onnx.passes.canonicalize import transposed_twins
from tests.onnx.graphs import clone, op_types, run_ort

RNG = np.random.default_rng(0)


def _w(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def _model(nodes, inputs, outputs, inits, opset: int = 17) -> ir.Model:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    onnx.checker.check_model(proto)
    return ir.from_proto(proto)


def _f(name: str, *shape: int | str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


# --- canonicalize --------------------------------------------------------------------


def _identity_chain_model() -> ir.Model:
    """A 'layer' W applied three times; uses 2 and 3 reach W through Identity chains."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h1"]),
        helper.make_node("Identity", ["W"], ["W_a"]),
        helper.make_node("MatMul", ["h1", "W_a"], ["h2"]),
        helper.make_node("Identity", ["W_a"], ["W_b"]),
        helper.make_node("MatMul", ["h2", "W_b"], ["y"]),
    ]
    return _model(nodes, [_f("x", 2, 4)], [_f("y", 2, 4)], [_w("W", 4, 4)])


def test_canonicalize_removes_identity_chains_and_keeps_results() -> None:
    model = _identity_chain_model()
    feeds = {"x": RNG.standard_normal((2, 4)).astype(np.float32)}
    before = run_ort(model, feeds)
    p = CanonicalizeWeightsPass()
    model, log = run_passes(model, [p])
    assert op_types(model) == ["MatMul", "MatMul", "MatMul"]
    assert all(n.inputs[1] is model.graph.initializers["W"] for n in model.graph)
    assert list(model.graph.initializers) == ["W"]
    assert log[0]["name"] == "canonicalize" and log[0]["identity_removed"] == 2
    np.testing.assert_array_equal(run_ort(model, feeds)[0], before[0])


def test_canonicalize_folds_transpose_of_initializer_once_for_all_uses() -> None:
    nodes = [
        helper.make_node("Transpose", ["W"], ["Wt1"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "Wt1"], ["h"]),
        helper.make_node("Transpose", ["W"], ["Wt2"], perm=[1, 0]),
        helper.make_node("MatMul", ["h", "Wt2"], ["y"]),
    ]
    model = _model(nodes, [_f("x", 3, 5)], [_f("y", 3, 5)], [_w("W", 5, 5)])
    feeds = {"x": RNG.standard_normal((3, 5)).astype(np.float32)}
    before = run_ort(model, feeds)
    model, log = run_passes(model, [CanonicalizeWeightsPass()])
    assert op_types(model) == ["MatMul", "MatMul"]
    weights = {id(n.inputs[1]) for n in model.graph}
    assert len(weights) == 1 and len(model.graph.initializers) == 1
    assert log[0]["transposes_folded"] == 2
    np.testing.assert_allclose(run_ort(model, feeds)[0], before[0], rtol=1e-6, atol=1e-6)


def _tied_decoder_model() -> ir.Model:
    """Gather on a V×E table plus an MLM-style decoder reading a transposed E×V copy."""
    table = RNG.standard_normal((11, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"]),
        helper.make_node("MatMul", ["emb", "proj"], ["h"]),
        helper.make_node("MatMul", ["h", "back"], ["e"]),
        helper.make_node("MatMul", ["e", "table_T"], ["mm"]),
        helper.make_node("Add", ["mm", "bias"], ["logits"]),
    ]
    inits = [
        numpy_helper.from_array(table, "table"),
        numpy_helper.from_array(np.ascontiguousarray(table.T), "table_T"),
        _w("proj", 4, 6),
        _w("back", 6, 4),
        _w("bias", 11),
    ]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["b", "s"])
    return _model(nodes, [ids], [_f("logits", "b", "s", 11)], inits)


def test_canonicalize_merges_transposed_copy_of_tied_table() -> None:
    model = _tied_decoder_model()
    assert len(transposed_twins(model)) == 2  # (table, table_T) and (table_T, table)
    feeds = {"ids": RNG.integers(0, 11, (2, 3)).astype(np.int64)}
    before = run_ort(model, feeds)
    model, log = run_passes(model, [CanonicalizeWeightsPass()])
    assert "table_T" not in model.graph.initializers
    table = model.graph.initializers["table"]
    assert sorted(u.node.op_type for u in table.uses()) == ["Gather", "Gemm"]
    gemm = next(n for n in model.graph if n.op_type == "Gemm")
    assert gemm.attributes["transB"].as_int() == 1
    assert log[0]["transposed_copies_merged"] == 1
    assert transposed_twins(model) == []
    after = run_ort(model, feeds)
    assert after[0].shape == (2, 3, 11)
    np.testing.assert_allclose(after[0], before[0], rtol=1e-5, atol=1e-5)


def test_canonicalize_postcondition_names_the_pass() -> None:
    """Two Gathers on transposed copies cannot share one layout: the promise fails."""
    a = RNG.standard_normal((3, 5)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["A", "i"], ["ya"]),
        helper.make_node("Gather", ["B", "i"], ["yb"]),
    ]
    inits = [
        numpy_helper.from_array(a, "A"),
        numpy_helper.from_array(np.ascontiguousarray(a.T), "B"),
    ]
    i = helper.make_tensor_value_info("i", TensorProto.INT64, [2])
    model = _model(nodes, [i], [_f("ya", 2, 5), _f("yb", 2, 3)], inits)
    with pytest.raises(PassError, match=r"canonicalize pass: .*'A'.*'B'.*transposed"):
        run_passes(model, [CanonicalizeWeightsPass()])


# --- dedup ---------------------------------------------------------------------------


def _duplicate_model() -> ir.Model:
    w = RNG.standard_normal((4, 4)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"]),
        helper.make_node("MatMul", ["h", "W2"], ["y"]),
    ]
    inits = [numpy_helper.from_array(w, "W1"), numpy_helper.from_array(w.copy(), "W2")]
    return _model(nodes, [_f("x", 2, 4)], [_f("y", 2, 4)], inits)


def test_dedup_keeps_one_copy_and_repoints_uses() -> None:
    model = _duplicate_model()
    feeds = {"x": RNG.standard_normal((2, 4)).astype(np.float32)}
    before = run_ort(model, feeds)
    p = DedupInitializersPass()
    model, log = run_passes(model, [p])
    assert len(model.graph.initializers) == 1
    assert log[0] == {
        "name": "dedup",
        "constants_lifted": 0,
        "initializers_removed": 1,
        "bytes_saved": 64,
    }
    np.testing.assert_array_equal(run_ort(model, feeds)[0], before[0])


class _BrokenDedup(DedupInitializersPass):
    """A dedup whose work is skipped: its postcondition must catch that."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        return ir.passes.PassResult(model, modified=False)


def test_dedup_postcondition_catches_remaining_duplicates() -> None:
    with pytest.raises(PassError, match=r"dedup pass: 1 groups .* W1, W2"):
        run_passes(_duplicate_model(), [_BrokenDedup()])


# --- factorization guard -------------------------------------------------------------


def _embedding_model(
    v: int, e: int, h: int, extra: list[onnx.TensorProto] | None = None, table_as_lhs: bool = False
) -> ir.Model:
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"]),
        helper.make_node("MatMul", ["emb", "proj"], ["y"]),
    ]
    outputs = [_f("y", "b", "s", h)]
    inits = [_w("table", v, e), _w("proj", e, h)]
    for t in extra or []:
        inits.append(t)
        nodes.append(helper.make_node("Identity", [t.name], [t.name + "_out"]))
        outputs.append(_f(t.name + "_out", *t.dims))
    if table_as_lhs:
        nodes.append(helper.make_node("MatMul", ["table", "proj"], ["full"]))
        outputs.append(_f("full", v, h))
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["b", "s"])
    return _model(nodes, [ids], outputs, inits)


def test_guard_accepts_factorized_embedding() -> None:
    _, log = run_passes(_embedding_model(10, 4, 6), [FactorizationGuardPass(10, 4, 6)])
    assert log[0]["factorized_embedding_intact"] is True


def test_guard_accepts_unfactorized_config_when_e_equals_h() -> None:
    run_passes(_embedding_model(10, 6, 6), [FactorizationGuardPass(10, 6, 6)])


def test_guard_rejects_a_v_by_h_tensor() -> None:
    model = _embedding_model(10, 4, 6, extra=[_w("folded", 10, 6)])
    with pytest.raises(PassError, match=r"factorization-guard pass: .*V x H \(10x6\).*folded"):
        run_passes(model, [FactorizationGuardPass(10, 4, 6)])


def test_guard_rejects_table_as_left_operand() -> None:
    model = _embedding_model(10, 4, 6, table_as_lhs=True)
    with pytest.raises(PassError, match="left operand of MatMul"):
        run_passes(model, [FactorizationGuardPass(10, 4, 6)])


def test_guard_rejects_a_second_table_copy() -> None:
    model = _embedding_model(10, 4, 6, extra=[_w("table_copy", 10, 4)])
    with pytest.raises(PassError, match="2 tensors of shape 10x4"):
        run_passes(model, [FactorizationGuardPass(10, 4, 6)])


# --- compact -------------------------------------------------------------------------


def test_compact_merges_constants_shortens_names_keeps_results() -> None:
    two = helper.make_tensor("c", TensorProto.FLOAT, [], [2.0])
    nodes = [
        helper.make_node("Constant", [], ["/very/long/scope/name/Constant_output_0"], value=two),
        helper.make_node("Mul", ["x", "/very/long/scope/name/Constant_output_0"], ["/scope/a"]),
        helper.make_node("Constant", [], ["/very/long/scope/name/Constant_1_output_0"], value=two),
        helper.make_node("Mul", ["/scope/a", "/very/long/scope/name/Constant_1_output_0"], ["y"]),
    ]
    model = _model(nodes, [_f("x", 3)], [_f("y", 3)], [])
    feeds = {"x": RNG.standard_normal(3).astype(np.float32)}
    before = run_ort(model, feeds)
    model, log = run_passes(model, [CompactGraphPass()])
    assert op_types(model).count("Constant") == 1
    assert log[0]["nodes_merged"] == 1 and log[0]["name_bytes_saved"] > 0
    names = [v.name for n in model.graph for v in n.outputs]
    assert "y" in names and all(len(str(n)) <= 3 for n in names)
    np.testing.assert_array_equal(run_ort(model, feeds)[0], before[0])


# --- fuse (on a real tiny export: ORT's fusions need the real BERT pattern) -----------


@pytest.fixture(scope="module")
def tiny_groups_export(make_checkpoint) -> tuple[ir.Model, object]:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.onnx.pipeline import optimize
    from albert_edge.options import ConvertOptions

    ckpt = load_checkpoint(make_checkpoint("tiny-groups", "sequence-classification"))
    model, _ = optimize(ckpt, ConvertOptions(optimize="none", verify=False))
    return model, ckpt


def _fuse_pass(cfg: object) -> FuseTransformerPass:
    c = cfg
    return FuseTransformerPass(
        num_heads=c.num_attention_heads,  # type: ignore[attr-defined]
        hidden_size=c.hidden_size,  # type: ignore[attr-defined]
        num_layers=c.num_hidden_layers * c.inner_group_num,  # type: ignore[attr-defined]
        distinct_layers=c.num_hidden_groups * c.inner_group_num,  # type: ignore[attr-defined]
    )


def _albert_feeds(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 30000, (2, 9)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[0, :3] = 0  # left padding: right only if the fused mask is the raw 2-D mask
    mask[1, 6:] = 0
    types = np.zeros_like(ids)
    types[:, 5:] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def test_fuse_fuses_every_layer_and_stores_fused_weights_once(tiny_groups_export) -> None:
    model, ckpt = tiny_groups_export
    c = ckpt.config
    feeds = _albert_feeds(1)
    before = run_ort(model, feeds)
    fused, log = run_passes(clone(model), [_fuse_pass(c)])
    ops = op_types(fused)
    assert ops.count("Attention") == c.num_hidden_layers * c.inner_group_num == 8
    assert ops.count("SkipLayerNormalization") == 16 and ops.count("FastGelu") == 8
    assert "Softmax" not in ops
    qkv = {id(n.inputs[1]) for n in fused.graph if n.op_type == "Attention"}
    assert len(qkv) == c.num_hidden_groups * c.inner_group_num == 4
    assert log[0]["fused_weights_shared"] > 0 and log[0]["attention"] == "fused"
    after = run_ort(fused, feeds)
    np.testing.assert_allclose(after[0], before[0], rtol=1e-4, atol=1e-5)


def test_fuse_postcondition_catches_per_layer_copies(tiny_groups_export, monkeypatch) -> None:
    """Stored per Attention node (the Q/K/V Concat folded per node, no CSE, no dedup), the
    concatenated weights are L copies of G shared layers: the postcondition refuses."""
    import albert_edge.onnx.passes.fuse_rules as rules

    class NoDedup:
        def __init__(self, **_: object) -> None:
            pass

        def __call__(self, model: ir.Model) -> None:
            return None

    def per_node(model: ir.Model) -> tuple[int, int]:
        n = 0
        for node in list(model.graph):
            ins = node.inputs
            if node.op_type != "Concat" or not all(
                i is not None and i.is_initializer() for i in ins
            ):
                continue
            arr = np.concatenate(
                [i.const_value.numpy() for i in ins], axis=node.attributes.get_int("axis", 0)
            )
            v = ir.Value(name=f"copy_{n}", const_value=ir.tensor(arr, name=f"copy_{n}"))
            model.graph.register_initializer(v)
            ir.convenience.replace_all_uses_with(node.outputs[0], v)
            model.graph.remove(node, safe=True)
            n += 1
        return n, n

    monkeypatch.setattr(rules.common_passes, "DeduplicateHashedInitializersPass", NoDedup)
    monkeypatch.setattr(rules.common_passes, "CommonSubexpressionEliminationPass", NoDedup)
    monkeypatch.setattr(rules, "fold_concat_initializers", per_node)
    model, ckpt = tiny_groups_export
    with pytest.raises(PassError, match="fuse pass: fused weights stored more than once"):
        run_passes(clone(model), [_fuse_pass(ckpt.config)])


def test_fuse_postcondition_checks_heads_and_width_against_the_config(tiny_groups_export) -> None:
    """The head count and Q/K/V width the rules read off the graph's reshapes must be the
    config's: a pass told another head count refuses the fused graph."""
    model, ckpt = tiny_groups_export
    c = ckpt.config
    wrong = FuseTransformerPass(
        num_heads=c.num_attention_heads * 2,
        hidden_size=c.hidden_size,
        num_layers=c.num_hidden_layers * c.inner_group_num,
        distinct_layers=c.num_hidden_groups * c.inner_group_num,
    )
    with pytest.raises(PassError, match=r"fuse pass: Attention node .* heads over hidden size"):
        run_passes(clone(model), [wrong])
    run_passes(clone(model), [_fuse_pass(c)])  # the config's own numbers pass


def test_split_skip_ln_on_the_fused_albert_keeps_results(tiny_groups_export) -> None:
    """Every fused SkipLayerNormalization becomes Sum + LayerNormalization; the graph
    computes the same, and ORT's session-level fusion does not fuse it back (the split
    exists for speed: ORT's CPU SkipLayerNormalization is several times slower)."""
    model, ckpt = tiny_groups_export
    feeds = _albert_feeds(2)
    fused, _ = run_passes(clone(model), [_fuse_pass(ckpt.config)])
    before = run_ort(fused, feeds)
    split, log = run_passes(fused, [SplitSkipLayerNormPass()])
    ops = op_types(split)
    assert "SkipLayerNormalization" not in ops
    assert ops.count("Sum") == 16 and log[0]["split"] == 16 and log[0]["layer_norms_added"] == 16
    np.testing.assert_allclose(run_ort(split, feeds)[0], before[0], rtol=1e-5, atol=1e-6)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(Path(tempfile.mkdtemp()) / "opt.onnx")
    ort.InferenceSession(
        ir.to_proto(split).SerializeToString(), so, providers=["CPUExecutionProvider"]
    )
    reloaded = [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]
    assert "SkipLayerNormalization" not in reloaded and reloaded.count("Sum") == 16


def test_split_skip_ln_bias_lands_in_the_quantized_matmul(tiny_groups_export, tmp_path) -> None:
    """The reason the bias is its own Add: after ORT's dynamic quantization, session load
    folds it into DynamicQuantizeMatMul's bias input, and each residual Sum adds two
    tensors. Left inside the Sum, the bias stayed a broadcast third operand."""
    from albert_edge.onnx.quant import quantize_model
    from albert_edge.options import ConvertOptions

    model, ckpt = tiny_groups_export
    fused, _ = run_passes(clone(model), [_fuse_pass(ckpt.config)])
    split, log = run_passes(fused, [SplitSkipLayerNormPass()])
    q8, _ = quantize_model(ir.to_proto(split), ckpt, ConvertOptions(precision="int8-dynamic"))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(q8.SerializeToString(), so, providers=["CPUExecutionProvider"])
    nodes = onnx.load(so.optimized_model_filepath).graph.node
    sums = [n for n in nodes if n.op_type == "Sum"]
    assert len(sums) == log[0]["split"] and all(len(n.input) == 2 for n in sums)
    producers = {o: n for n in nodes for o in n.output}
    projections = [producers[n.input[0]] for n in sums]  # Sum(Add(x, bias), skip)
    assert all(
        p.op_type == "DynamicQuantizeMatMul" and len(p.input) == 5 and p.input[4]
        for p in projections
    ), [(p.op_type, len(p.input)) for p in projections]


def _skip_ln_model(bias: bool) -> ir.Model:
    inputs = ["x", "s", "g", "b"] + (["bias"] if bias else [])
    node = helper.make_node(
        "SkipLayerNormalization", inputs, ["y"], domain="com.microsoft", epsilon=1e-5
    )
    inits = [_w("g", 8), _w("b", 8)] + ([_w("bias", 8)] if bias else [])
    graph = helper.make_graph([node], "g", [_f("x", 2, 8), _f("s", 2, 8)], [_f("y", 2, 8)], inits)
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    return ir.from_proto(proto)


@pytest.mark.parametrize("bias", [True, False])
def test_split_skip_ln_matches_the_contrib_op(bias: bool) -> None:
    model = _skip_ln_model(bias)
    feeds = {"x": RNG.standard_normal((2, 8)).astype(np.float32)}
    feeds["s"] = RNG.standard_normal((2, 8)).astype(np.float32)
    before = run_ort(model, feeds)
    split, log = run_passes(clone(model), [SplitSkipLayerNormPass()])
    expected = (["Add"] if bias else []) + ["Sum", "LayerNormalization"]
    assert op_types(split) == expected and log[0]["split"] == 1
    ln = next(n for n in split.graph if n.op_type == "LayerNormalization")
    assert ln.attributes["epsilon"].value == pytest.approx(1e-5)
    np.testing.assert_allclose(run_ort(split, feeds)[0], before[0], rtol=1e-5, atol=1e-6)


def test_split_skip_ln_postcondition_catches_a_node_left(monkeypatch) -> None:
    import albert_edge.onnx.passes.split_skip_ln as mod

    class NoRules:
        def apply_to_model(self, model: ir.Model) -> int:
            return 0

    monkeypatch.setattr(mod, "rules", lambda: NoRules())
    with pytest.raises(PassError, match="split_skip_ln pass: 1 single-output"):
        run_passes(_skip_ln_model(True), [SplitSkipLayerNormPass()])


def test_split_skip_ln_refuses_old_opset() -> None:
    model = _skip_ln_model(True)
    model.opset_imports[""] = 16
    with pytest.raises(PassError, match="split_skip_ln pass: needs opset >= 17"):
        run_passes(model, [SplitSkipLayerNormPass()])


def test_fuse_refuses_old_opset() -> None:
    model = _identity_chain_model()
    model.opset_imports[""] = 16
    p = FuseTransformerPass(num_heads=1, hidden_size=4, num_layers=1, distinct_layers=1)
    with pytest.raises(PassError, match="fuse pass: opset 16 is too old"):
        run_passes(model, [p])


def test_run_passes_reports_every_pass_in_order() -> None:
    _, log = run_passes(
        _identity_chain_model(),
        [CanonicalizeWeightsPass(), DedupInitializersPass(), CompactGraphPass()],
    )
    assert [entry["name"] for entry in log] == ["canonicalize", "dedup", "compact"]
