"""Rewrites ORT's quantizers need and cannot do themselves, one concern per pass.

* :class:`UnfuseAttentionPass` — fused ``Attention`` → MatMul + Split +
  ``MultiHeadAttention`` (MatMulNBits and the QDQ quantizer cannot reach its QKV weight);
* :class:`UnfuseEmbedLayerNormPass` — ``EmbedLayerNormalization`` → gathers + Add +
  LayerNormalization (the fused op reads the word table as float);
* :class:`GemmToMatMulPass` — Gemm with a constant weight → MatMul + Add (MatMulNBits
  and QDQ quantize MatMul only);
* :class:`TiedGemmToMatMulPass` / :class:`RestoreTiedGemmPass` — keep
  ``quantize_dynamic`` from transposing the tied word table in place.

Each pass states what it promises as ``ensures`` (no node of the kind it removes is
left) and reports how many nodes it rewrote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import onnx_ir as ir

from albert_edge.onnx.passes.base import MS_DOMAIN, AlbertFunctionalPass, AlbertInPlacePass
from albert_edge.onnx.passes.quant.state import QuantState, model_of, snapshot

if TYPE_CHECKING:
    import onnx


def find_table(model: ir.Model, state: QuantState) -> None:
    """(Re)locate the word-embedding table and its readers into ``state.table``."""
    from albert_edge.onnx.quant_embed import find_word_table

    state.table = find_word_table(snapshot(model), state.vocab)


class LocateWordTablePass(AlbertInPlacePass):
    """Find the word-embedding table and every reader of it (changes nothing).

    Postcondition (when embeddings are to be quantized): the table is read only by
    Gather, EmbedLayerNormalization and a tied decoder.
    """

    name = "quant-locate-table"

    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        find_table(model, self.state)
        t = self.state.table
        self.report = {
            "table": t.table if t else None,
            "gathers": len(t.gathers) if t else 0,
            "tied_matmuls": len(t.tied_matmuls) if t else 0,
        }
        return ir.passes.PassResult(model, modified=False)

    def ensures(self, model: ir.Model) -> None:
        if self.state.table is not None and self.state.options.quantize_embeddings:
            self.state.table.check_quantizable()


class _ProtoRewrite(AlbertFunctionalPass):
    """A rewrite still written against NodeProtos (:mod:`albert_edge.onnx.quant_graph`),
    run on a proto of the model and read back."""

    rewrite: Callable[..., Any]

    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state

    def applies(self) -> bool:
        return True

    def edit(self, proto: onnx.ModelProto) -> int:
        raise NotImplementedError

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        proto = snapshot(model)
        if not self.applies():
            self.report = {"skipped": True}
            return ir.passes.PassResult(model_of(proto, self.name), modified=False)
        count = self.edit(proto)
        self.report = {"rewritten": count}
        return ir.passes.PassResult(model_of(proto, self.name), modified=bool(count))


def _ops(model: ir.Model, op_type: str, domain: str | None = None) -> list[str]:
    return [
        n.name or op_type
        for n in model.graph
        if n.op_type == op_type and (domain is None or n.domain == domain)
    ]


class UnfuseAttentionPass(_ProtoRewrite):
    """Fused Attention → MatMul(x, W_qkv) → Split → MultiHeadAttention
    (:func:`albert_edge.onnx.quant_graph.unfuse_attention` says why)."""

    name = "quant-unfuse-attention"

    def edit(self, proto: onnx.ModelProto) -> int:
        from albert_edge.onnx.quant_graph import unfuse_attention

        n = unfuse_attention(proto)
        self.state.rewrites["attention_unfused"] = n
        return n

    def ensures(self, model: ir.Model) -> None:
        left = _ops(model, "Attention", MS_DOMAIN)
        if left:
            self.fail(f"fused Attention left: {left[:3]}")


class UnfuseEmbedLayerNormPass(_ProtoRewrite):
    """EmbedLayerNormalization → Gather + Add + LayerNormalization, so the word table can
    be stored quantized (:func:`albert_edge.onnx.quant_graph.unfuse_embed_layernorm`)."""

    name = "quant-unfuse-embed-layernorm"

    def applies(self) -> bool:
        t = self.state.table
        return t is not None and bool(t.embed_layernorms) and self.state.options.quantize_embeddings

    def edit(self, proto: onnx.ModelProto) -> int:
        from albert_edge.onnx.quant_graph import unfuse_embed_layernorm

        n = unfuse_embed_layernorm(proto)
        self.state.rewrites["embed_layernorm_unfused"] = n
        return n

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        result = super().call(model)
        if self.report.get("rewritten"):
            find_table(result.model, self.state)
        return result

    def ensures(self, model: ir.Model) -> None:
        left = _ops(model, "EmbedLayerNormalization", MS_DOMAIN)
        if left and not self.report.get("skipped"):
            self.fail(f"EmbedLayerNormalization left: {left[:3]}")


class GemmToMatMulPass(_ProtoRewrite):
    """Gemm(A, W, C) with a constant W → MatMul(A, W') + C, W' shared by every Gemm that
    used W (:func:`albert_edge.onnx.quant_graph.gemm_to_matmul`); the tied word table is
    left to the table passes."""

    name = "quant-gemm-to-matmul"

    def __init__(self, state: QuantState) -> None:
        super().__init__(state)
        self.skip: set[str] = set()

    def requires(self, model: ir.Model) -> None:
        self.skip = set(self.state.tied)

    def edit(self, proto: onnx.ModelProto) -> int:
        from albert_edge.onnx.quant_graph import gemm_to_matmul

        n = gemm_to_matmul(proto, skip_weights=self.skip)
        self.state.rewrites["gemm_to_matmul"] = n
        return n

    def ensures(self, model: ir.Model) -> None:
        inits = model.graph.initializers
        for node in model.graph:
            if node.op_type != "Gemm" or len(node.inputs) < 2 or node.inputs[1] is None:
                continue
            w = node.inputs[1]
            if w.name not in inits or w.name in self.skip:
                continue
            attrs = node.attributes
            plain = (attrs.get("transA") is None or attrs["transA"].as_int() == 0) and all(
                attrs.get(a) is None or attrs[a].as_float() == 1.0 for a in ("alpha", "beta")
            )
            only_gemms = all(u.node.op_type == "Gemm" for u in w.uses())
            if plain and only_gemms:
                self.fail(f"Gemm {node.name!r} on constant {w.name} was not rewritten")


class TiedGemmToMatMulPass(_ProtoRewrite):
    """int8-dynamic with a tied decoder: Gemm(x, table, transB=1) → MatMul(x,
    Transpose(table)) (:func:`albert_edge.onnx.quant_graph.tied_gemms_to_matmul`: else
    ``quantize_dynamic`` transposes the shared table in place)."""

    name = "quant-tied-gemm-to-matmul"

    def applies(self) -> bool:
        return bool(self.state.tied)

    def edit(self, proto: onnx.ModelProto) -> int:
        from albert_edge.onnx.quant_graph import tied_gemms_to_matmul

        t = self.state.table
        assert t is not None
        self.state.protected = tied_gemms_to_matmul(proto, t.table, t.tied_matmuls)
        return len(self.state.protected)

    def ensures(self, model: ir.Model) -> None:
        t = self.state.table
        if t is None or not self.applies():
            return
        for node in model.graph:
            if (
                node.op_type == "Gemm"
                and len(node.inputs) > 1
                and node.inputs[1] is not None
                and node.inputs[1].name == t.table
            ):
                self.fail(f"Gemm {node.name!r} still reads the tied table {t.table}")


class RestoreTiedGemmPass(_ProtoRewrite):
    """Undo :class:`TiedGemmToMatMulPass` after ``quantize_dynamic`` where the table stays
    float (--keep-embeddings-wide): the decoder reads the table as Gemm(transB=1) again."""

    name = "quant-restore-tied-gemm"

    def applies(self) -> bool:
        return bool(self.state.protected) and not self.state.quantize_table

    def edit(self, proto: onnx.ModelProto) -> int:
        from albert_edge.onnx.quant_graph import matmuls_to_tied_gemm

        t = self.state.table
        assert t is not None
        return matmuls_to_tied_gemm(proto, t.table, self.state.protected)

    def ensures(self, model: ir.Model) -> None:
        if not self.applies():
            return
        wanted = set(self.state.protected)
        left = [n.name for n in model.graph if n.op_type == "MatMul" and n.name in wanted]
        if left:
            self.fail(f"tied decoder MatMul(s) {left[:3]} not restored to Gemm")


class RelocateWordTablePass(LocateWordTablePass):
    """Re-find the table's readers after the quantizer renamed or rewrote them."""

    name = "quant-relocate-table"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if not self.state.protected:  # only int8-dynamic's tied-decoder guard moves readers
            self.report = {"skipped": True}
            return ir.passes.PassResult(model, modified=False)
        return super().call(model)

    def ensures(self, model: ir.Model) -> None:
        if self.state.protected and self.state.table is None:
            self.fail("the word table is gone")
