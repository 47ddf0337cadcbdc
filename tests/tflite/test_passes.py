"""Every TFLite pass of the conversion under the pass contract, one tiny graph each.

Each test builds a few ops by hand (``tiny_tflite``), runs the pass through
:func:`run_passes` (so the postcondition is checked), and checks the promise with
LiteRT's interpreter where the pass touches what the graph computes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from albert_edge.errors import PassError, QuantizationError
from albert_edge.tflite import flatbuffer as fb
from albert_edge.tflite import passes as tp
from albert_edge.tflite.passes import run_passes
from albert_edge.tflite.passes.base import op_name
from tests.tflite.tiny_tflite import (
    Graph,
    classifier_like_graph,
    embedding_then_float_graph,
    run,
)


def _ops(model: Any) -> list[str]:
    return [op_name(model, op) for sg in model.subgraphs for op in sg.operators]


def _x(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_unfold_scaled_copies_reties_the_decoder() -> None:
    rng = np.random.default_rng(0)
    table = rng.standard_normal((64, 8)).astype(np.float32)
    gamma = rng.uniform(0.5, 2.0, 8).astype(np.float32)
    g = Graph()
    g.t("ids", (4,), "i32")
    g.t("table", (64, 8), "f32", table)
    g.t("emb", (4, 8))
    g.t("decoder", (64, 8), "f32", table * gamma[None, :])
    g.t("logits", (4, 64))
    g.op("EMBEDDING_LOOKUP", ["ids", "table"], ["emb"])
    g.op("FULLY_CONNECTED", ["emb", "decoder", None], ["logits"])
    model = g.build(["ids"], ["logits"])
    ids = np.array([1, 5, 9, 63], np.int32)
    ref = run(fb.write_model(model), ids=ids)["logits"]
    report = run_passes(model, [tp.UnfoldScaledCopiesPass()])[0]
    assert report["bytes_removed"] == table.nbytes
    assert "MUL" in _ops(model)
    got = run(fb.write_model(model), ids=ids)["logits"]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))


def _prefix_graph() -> Any:
    big = _x((1, 64, 8), 1)  # constants of >= 1 KiB (smaller ones are not worth a SLICE)
    g = Graph()
    g.t("xs", (1, 32, 8))
    g.t("xb", (1, 64, 8))
    g.t("small", (1, 32, 8), "f32", big[:, :32])
    g.t("big", (1, 64, 8), "f32", big)
    g.t("ys", (1, 32, 8))
    g.t("yb", (1, 64, 8))
    g.op("ADD", ["xs", "small"], ["ys"])
    g.op("ADD", ["xb", "big"], ["yb"])
    return g.build(["xs", "xb"], ["ys", "yb"])


def test_share_prefix_slices_stores_the_table_once() -> None:
    model = _prefix_graph()
    feeds = {"xs": _x((1, 32, 8)), "xb": _x((1, 64, 8))}
    ref = run(fb.write_model(model), **feeds)
    report = run_passes(model, [tp.SharePrefixSlicesPass()])[0]
    assert report["bytes_removed"] == 32 * 8 * 4
    assert "SLICE" in _ops(model)
    got = run(fb.write_model(model), **feeds)
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k])


def test_dedup_buffers_and_drop_unused() -> None:
    same = _x((1, 16, 8), 2)
    g = Graph()
    g.t("x", (1, 16, 8))
    g.t("c1", (1, 16, 8), "f32", same)
    g.t("c2", (1, 16, 8), "f32", same)
    g.t("y1", (1, 16, 8))
    g.t("y2", (1, 16, 8))
    g.op("ADD", ["x", "c1"], ["y1"])
    g.op("MUL", ["y1", "c2"], ["y2"])
    model = g.build(["x"], ["y2"])
    ref = run(fb.write_model(model), x=_x((1, 16, 8)))["y2"]
    reports = run_passes(model, [tp.DedupBuffersPass()])
    assert reports[0]["bytes_removed"] == same.nbytes
    assert fb.duplicate_groups(model) == []
    sg = model.subgraphs[0]
    assert sg.tensors[1].buffer == sg.tensors[2].buffer
    model.buffers.append(fb.schema().BufferT())  # a stray buffer nothing references
    model.buffers[-1].data = np.ones(8, np.uint8)
    assert run_passes(model, [tp.DropUnusedBuffersPass()])[0]["buffers_removed"] == 1
    np.testing.assert_array_equal(run(fb.write_model(model), x=_x((1, 16, 8)))["y2"], ref)


def test_compact_names_names_weights_after_their_parameter() -> None:
    model = embedding_then_float_graph()
    sg = model.subgraphs[0]
    for t in sg.tensors:
        t.name = b"torch.nn.modules.linear.Linear_dense/" + t.name + b";fused"
    w = fb.tensor_array(model, sg.tensors[3])
    hashes = fb.param_hashes([("encoder.dense.weight", np.asarray(w))])
    run_passes(model, [tp.CompactNamesPass(hashes)])
    names = [t.name.decode() for t in sg.tensors]
    assert names[3] == "encoder.dense.weight"
    assert all(len(n) <= 40 for n in names) and len(set(names)) == len(names)


def test_strip_activation_names_keeps_io_and_weights() -> None:
    model = embedding_then_float_graph()
    report = run_passes(model, [tp.StripActivationNamesPass()])[0]
    named = {t.name for t in model.subgraphs[0].tensors if t.name}
    assert named == {b"ids", b"table", b"w", b"bias", b"out"}
    assert report["bytes_removed"] == len(b"emb") + len(b"h")


@pytest.mark.parametrize(
    ("precision", "weight_type"), [("int8-dynamic", "INT8"), ("fp16", "FLOAT16")]
)
def test_quantize_pass_stores_fc_weights_at_the_precision(precision: str, weight_type: str) -> None:
    model = classifier_like_graph()
    feeds = {
        "input_ids": np.arange(8, dtype=np.int32)[None] * 1000,
        "attention_mask": np.ones((1, 8), np.int32),
        "token_type_ids": np.zeros((1, 8), np.int32),
    }
    from ai_edge_litert.interpreter import Interpreter

    def logits(data: bytes) -> np.ndarray:
        out: dict[str, np.ndarray] = Interpreter(model_content=data).get_signature_runner("seq_8")(
            **feeds
        )
        return out["logits"]

    ref = logits(fb.write_model(model))
    report = run_passes(model, [tp.QuantizePass(precision)])[0]
    assert report["tool"] == "ai-edge-quantizer"
    types = fb.tensor_type_names()
    assert weight_type in {types[t.type] for t in model.subgraphs[0].tensors}
    got = logits(fb.write_model(model))
    assert np.abs(got - ref).max() < 0.05 * np.abs(ref).max()


@pytest.mark.parametrize("precision", ["int8-dynamic", "fp16"])
def test_quantize_pass_leaves_activation_products_float(precision: str) -> None:
    """A FULLY_CONNECTED whose second operand is an activation (litert-torch's lowering of
    a one-head layer's scores, Q·Kᵀ, in a pruned checkpoint) has no weight to quantize: the
    pass quantizes the constant weight beside it and its postcondition accepts the product."""
    rng = np.random.default_rng(0)
    g = Graph()
    g.t("ids", (4,), "i32")
    g.t("table", (64, 32), "f32", rng.standard_normal((64, 32)))
    g.t("emb", (4, 32))
    g.t("w", (32, 32), "f32", rng.standard_normal((32, 32)))
    g.t("q", (4, 32))
    g.t("scores", (4, 4))
    g.op("EMBEDDING_LOOKUP", ["ids", "table"], ["emb"])
    g.op("FULLY_CONNECTED", ["emb", "w", None], ["q"])
    g.op("FULLY_CONNECTED", ["q", "emb", None], ["scores"])  # activation x activation
    model = g.build(["ids"], ["scores"])
    ids = np.array([1, 5, 9, 63], np.int32)
    ref = run(fb.write_model(model), ids=ids)["scores"]
    run_passes(model, [tp.QuantizePass(precision)])
    types = fb.tensor_type_names()
    sg = model.subgraphs[0]
    by_name = {t.name: types[t.type] for t in sg.tensors if t.name}
    assert by_name[b"emb"] == "FLOAT32"  # the activation operand stays an activation
    assert {"INT8" if precision != "fp16" else "FLOAT16"} <= set(by_name.values())
    got = run(fb.write_model(model), ids=ids)["scores"]
    assert np.abs(got - ref).max() < 0.05 * np.abs(ref).max()


def test_quantize_pass_refuses_a_quantized_model() -> None:
    model = embedding_then_float_graph(int8_weights=True)
    with pytest.raises(PassError, match="already quantized"):
        run_passes(model, [tp.QuantizePass("int8-dynamic")])


def test_quantize_pass_names_quantizer_failures() -> None:
    with pytest.raises(QuantizationError, match="no TFLite quantization recipe"):
        run_passes(embedding_then_float_graph(), [tp.QuantizePass("int4")])


def _int8_output_graph(dequantized: bool) -> Any:
    g = Graph()
    g.t("x", (1, 4))
    g.t("q", (1, 4), "i8")
    q = fb.schema().QuantizationParametersT()
    q.scale, q.zeroPoint = [0.05], [0]
    g.sg.tensors[g.names["q"]].quantization = q
    g.op("QUANTIZE", ["x"], ["q"])
    if not dequantized:
        return g.build(["x"], ["q"])
    g.t("y", (1, 4))
    g.op("DEQUANTIZE", ["q"], ["y"])
    return g.build(["x"], ["y"])


def test_float_outputs_dequantizes_int8_outputs() -> None:
    model = _int8_output_graph(dequantized=False)
    report = run_passes(model, [tp.FloatOutputsPass()])[0]
    assert report["outputs"] == ["q"]
    x = np.array([[0.1, -0.2, 0.35, 1.0]], np.float32)
    out = run(fb.write_model(model), x=x)
    (y,) = out.values()
    assert y.dtype == np.float32 and np.abs(y - x).max() <= 0.025 + 1e-6


def test_int8_outputs_drops_the_final_dequantize() -> None:
    model = _int8_output_graph(dequantized=True)
    report = run_passes(model, [tp.Int8OutputsPass()])[0]
    assert report["outputs"] == ["y"]
    assert _ops(model) == ["QUANTIZE"]
    (y,) = run(fb.write_model(model), x=np.ones((1, 4), np.float32)).values()
    assert y.dtype == np.int8


def test_record_config_reads_back() -> None:
    model = embedding_then_float_graph()
    payload = {"head": "base", "seq_lens": [8, 16], "config": {"vocab_size": 10}}
    run_passes(model, [tp.RecordConfigPass(payload)])
    back = fb.read_model(fb.write_model(model))
    assert fb.get_metadata(back) == payload


def test_a_failed_precondition_is_a_pass_error() -> None:
    class Needy(tp.TflitePass):
        name = "needy"

        def precondition(self, model: Any) -> None:
            self.fail("needs two subgraphs")

        def run(self, model: Any) -> dict[str, Any]:
            raise AssertionError("run must not be reached")

        def postcondition(self, model: Any) -> None:
            pass

    with pytest.raises(PassError, match="needy pass: needs two subgraphs"):
        run_passes(embedding_then_float_graph(), [Needy()])


def test_quantize_pass_stores_a_tied_table_once() -> None:
    """The MLM decoder reads the word table an EMBEDDING_LOOKUP reads: quantized, both
    must hold the same int8 bytes (one per-tensor scale), or the V×E table is stored twice."""
    rng = np.random.default_rng(4)
    g = Graph()
    g.t("ids", (4,), "i32")
    g.t("table", (256, 16), "f32", rng.standard_normal((256, 16)))
    g.t("emb", (4, 16))
    g.t("logits", (4, 256))
    g.op("EMBEDDING_LOOKUP", ["ids", "table"], ["emb"])
    g.op("FULLY_CONNECTED", ["emb", "table", None], ["logits"])
    model = g.build(["ids"], ["logits"])
    run_passes(model, [tp.QuantizePass("int8-dynamic"), tp.DedupAfterQuantizePass()])
    types = fb.tensor_type_names()
    tables = {
        int(t.buffer)
        for t in model.subgraphs[0].tensors
        if t.buffer and list(t.shape) == [256, 16] and types[t.type] == "INT8"
    }
    assert len(tables) == 1, tables
