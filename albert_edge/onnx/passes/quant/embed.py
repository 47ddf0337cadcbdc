"""The word-embedding table and the other gathered tables, stored quantized once.

Why by hand (:mod:`albert_edge.onnx.quant_embed` has the details): ORT's quantizers
quantize Gather per tensor (``quantize_dynamic``) or only to 4 bits with INT4 tensors that
force opset 21 (``MatMulNBitsQuantizer``), and none knows ALBERT's masked-LM decoder
reads the same table. These passes run after the weight quantizer.
"""

from __future__ import annotations

import onnx_ir as ir

from albert_edge.errors import QuantizationError
from albert_edge.onnx.passes.base import AlbertFunctionalPass
from albert_edge.onnx.passes.quant.plan import INT4_ACCURACY_LEVEL
from albert_edge.onnx.passes.quant.state import QuantState, model_of, snapshot


def _float_readers(model: ir.Model, name: str) -> list[str]:
    """Live nodes reading initializer ``name`` (a reader whose outputs nothing reads is
    dead code the dedup pass removes)."""
    v = model.graph.initializers.get(name)
    readers = [u.node for u in v.uses()] if v is not None else []
    return [
        n.name or n.op_type
        for n in readers
        if any(o.uses() or o.is_graph_output() for o in n.outputs)
    ]


class QuantizeWordTablePass(AlbertFunctionalPass):
    """Replace the fp32 V×E table by its quantized form for every reader
    (:func:`albert_edge.onnx.quant_embed.quantize_word_table`): int8/int4 codes read by
    standard ops (and MatMulNBits for a tied decoder), or int8 + DequantizeLinear (QDQ).

    Postcondition: no node reads the fp32 table any more.
    """

    name = "quant-word-table"

    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state

    def requires(self, model: ir.Model) -> None:
        if self.state.plan is None:
            self.fail("no plan")

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        from albert_edge.onnx.quant_embed import quantize_word_table

        st = self.state
        proto = snapshot(model)
        if not st.quantize_table:
            self.report = {"skipped": True}
            return ir.passes.PassResult(model_of(proto, self.name), modified=False)
        assert st.table is not None and st.plan is not None
        facts = quantize_word_table(
            proto,
            st.table,
            bits=st.plan.table_bits,
            block_size=st.plan.block_size,
            qdq=st.precision == "int8-static",
            accuracy_level=INT4_ACCURACY_LEVEL,
        )
        st.embeddings = facts
        self.report = {k: facts[k] for k in ("table", "bits", "gathers", "tied_decoder_matmuls")}
        return ir.passes.PassResult(model_of(proto, self.name), modified=True)

    def ensures(self, model: ir.Model) -> None:
        if not self.state.quantize_table:
            return
        assert self.state.table is not None
        left = _float_readers(model, self.state.table.table)
        if left:
            self.fail(f"the fp32 word table is still read by {left[:3]}")


class QuantizeSideTablesPass(AlbertFunctionalPass):
    """Store the other gathered tables (position embeddings) quantized
    (:func:`albert_edge.onnx.quant_embed.quantize_side_tables`).

    Postcondition: exactly the side tables the plan named were rewritten, and none of
    them is read in float any more.
    """

    name = "quant-side-tables"

    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state
        self.done: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        from albert_edge.onnx.quant_embed import quantize_side_tables

        st = self.state
        proto = snapshot(model)
        if not st.quantize_table:
            self.report = {"skipped": True}
            return ir.passes.PassResult(model_of(proto, self.name), modified=False)
        assert st.table is not None and st.plan is not None
        side = quantize_side_tables(proto, st.table.table, bits=st.plan.table_bits)
        if isinstance(st.embeddings, dict):
            st.embeddings["side_tables"] = side
        self.done = [f["table"] for f in side]
        self.report = {"tables": self.done}
        return ir.passes.PassResult(model_of(proto, self.name), modified=bool(side))

    def ensures(self, model: ir.Model) -> None:
        plan = self.state.plan
        if plan is None or not self.state.quantize_table:
            return
        if sorted(self.done) != sorted(plan.side_tables):
            raise QuantizationError(
                f"{plan.precision}: side tables {plan.side_tables} planned, "
                f"{self.done} quantized; the graph changed under the plan"
            )
        for name in self.done:
            left = _float_readers(model, name)
            if left:
                self.fail(f"side table {name} is still read in float by {left[:3]}")
