"""mask_select_to_mul: the additive attention mask as one MUL, so XNNPACK runs the whole
encoder as one partition.

Why: the export computes the mask as ``x = 1 - m`` (float), then
``SELECT_V2(CAST(x → bool), fill, x)``. XNNPACK takes neither the bool CAST nor
SELECT_V2, and the SUB between the two CASTs is XNNPACK's: the TFLite kernels and
XNNPACK alternate, so the delegate runs the graph as two partitions (the embeddings,
then everything after the first attention ADD) with two interpreter ops between them.

How: ``SELECT_V2(CAST(x → bool), fill, x)`` becomes ``MUL(x, fill)`` (the bool CAST goes
when nothing else reads it). With ``m`` in {0, 1} — what an attention mask holds —
``x`` is 0 or 1: at 1 both give ``fill``; at 0 SELECT gives +0 and the MUL gives
``0 × fill`` = −0, and the scores plus −0 are the scores, so the outputs are the same bit
for bit (``tests/tflite/test_fuse.py``). A mask value outside {0, 1} gets
``(1 - m) × fill``, transformers' own formula.

Postcondition: no SELECT_V2 of that form remains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import TflitePass, consumers, is_constant, op_name, shape

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


def _selects(model: ModelT, si: int) -> list[tuple[int, int]]:
    """(SELECT_V2 op, its bool CAST op) pairs of the form the pass rewrites."""
    from albert_edge.tflite import flatbuffer as fb

    types = fb.tensor_type_names()
    sg = model.subgraphs[si]
    producer = {int(o): k for k, op in enumerate(sg.operators) for o in op.outputs}
    found = []
    for k, op in enumerate(sg.operators):
        if op_name(model, op) != "SELECT_V2" or len(op.inputs) != 3:
            continue
        cond, fill, x = (int(i) for i in op.inputs)
        cast = producer.get(cond)
        if cast is None or op_name(model, sg.operators[cast]) != "CAST":
            continue
        float_x = types.get(sg.tensors[x].type) == "FLOAT32"
        scalar_fill = is_constant(model, sg, fill) and len(shape(sg, fill)) == 0
        same = int(sg.operators[cast].inputs[0]) == x
        if float_x and scalar_fill and same and types.get(sg.tensors[cond].type) == "BOOL":
            found.append((k, cast))
    return found


class MaskSelectToMulPass(TflitePass):
    """``SELECT_V2(x != 0, fill, x)`` → ``x × fill`` (see module docstring)."""

    name: ClassVar[str] = "mask_select_to_mul"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb
        from albert_edge.tflite.passes.broadcast import drop_unused_opcodes

        s = fb.schema()
        rewritten = 0
        for si, sg in enumerate(model.subgraphs):
            drop = set()
            for k, cast in _selects(model, si):
                op = sg.operators[k]
                cond, fill, x = (int(i) for i in op.inputs)
                op.opcodeIndex = fb.opcode_index(model, s.BuiltinOperator.MUL, 1)
                op.inputs = [x, fill]
                op.builtinOptionsType = s.BuiltinOptions.MulOptions
                op.builtinOptions = s.MulOptionsT()
                if not consumers(sg, cond):
                    drop.add(cast)
                rewritten += 1
            sg.operators = [op for j, op in enumerate(sg.operators) if j not in drop]
        fb.drop_orphan_tensors(model)
        drop_unused_opcodes(model)
        return {"selects_rewritten": rewritten}

    def postcondition(self, model: ModelT) -> None:
        for si in range(len(model.subgraphs)):
            if _selects(model, si):
                self.fail(f"subgraph {si}: the mask's SELECT_V2 remains")
