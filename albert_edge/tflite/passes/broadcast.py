"""implicit-broadcast: drop ``BROADCAST_TO`` where its consumers broadcast by themselves.

Why: Hugging Face builds ALBERT's additive attention mask as ``[B,1,1,L]`` expanded to
``[B,1,L,L]``; litert-torch lowers the expand to ``BROADCAST_TO`` feeding ``SELECT_V2``
and then the ``ADD`` onto the attention scores. Every one of those consumers broadcasts
its inputs anyway, so the expand only materialises L×L floats — and LiteRT's GPU
accelerator (ml_drift) rejects ``BROADCAST_TO`` ("Operation is not supported"), which
cuts the graph into CPU and GPU partitions. Removing it is exact: each consumer computes
the same values from the unexpanded tensor.

How: for each ``BROADCAST_TO``, substitute its input for its output and re-derive the
shapes of the elementwise consumers downstream; stop where a consumer's output shape is
unchanged (there the broadcast happens implicitly, as in the attention ``ADD``). The op
is left alone if the substitution would reach a non-broadcasting op or change a graph
output's shape.

Postcondition: every signature output keeps its shape, and no remaining
``BROADCAST_TO`` is one this pass could have removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from albert_edge.tflite.passes.base import (
    TflitePass,
    broadcast_shape,
    consumers,
    graph_outputs,
    op_name,
    shape,
    signature_shapes,
)

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT

# Builtins whose output is the NumPy broadcast of their inputs (TFLite reference kernels).
BROADCASTING_OPS = frozenset(
    {
        "ADD",
        "SUB",
        "MUL",
        "DIV",
        "SELECT_V2",
        "SQUARED_DIFFERENCE",
        "MAXIMUM",
        "MINIMUM",
        "POW",
    }
)


def _plan(model: ModelT, si: int, k: int) -> dict[int, tuple[int, ...]] | None:
    """New shapes of the tensors that change if op ``k`` (a BROADCAST_TO) is removed,
    or None when removal is not exact."""
    sg = model.subgraphs[si]
    op = sg.operators[k]
    src, dst = int(op.inputs[0]), int(op.outputs[0])
    outputs = graph_outputs(model, si)
    if dst in outputs:
        return None
    new: dict[int, tuple[int, ...]] = {dst: shape(sg, src)}
    todo = [dst]
    while todo:
        t = todo.pop()
        for c in consumers(sg, t):
            cop = sg.operators[c]
            if op_name(model, cop) not in BROADCASTING_OPS:
                return None
            ins = [int(i) for i in cop.inputs if int(i) >= 0]
            try:
                out_shape = broadcast_shape(new.get(i, shape(sg, i)) for i in ins)
            except ValueError:
                return None
            out = int(cop.outputs[0])
            if out_shape == shape(sg, out):
                continue  # broadcast happens implicitly here
            if out in outputs:
                return None
            if out not in new:
                new[out] = out_shape
                todo.append(out)
    return new


class ImplicitBroadcastPass(TflitePass):
    """Remove every exactly-removable ``BROADCAST_TO`` (see module docstring)."""

    name = "implicit_broadcast"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        self._before = signature_shapes(model)
        removed = kept = 0
        for si, sg in enumerate(model.subgraphs):
            k = 0
            while k < len(sg.operators):
                op = sg.operators[k]
                if op_name(model, op) != "BROADCAST_TO":
                    k += 1
                    continue
                plan = _plan(model, si, k)
                if plan is None:
                    kept += 1
                    k += 1
                    continue
                src, dst = int(op.inputs[0]), int(op.outputs[0])
                for other in sg.operators:
                    other.inputs = [src if int(i) == dst else int(i) for i in other.inputs]
                for t, new_shape in plan.items():
                    if t == dst:
                        continue
                    sg.tensors[t].shape = list(new_shape)
                    if sg.tensors[t].shapeSignature is not None:
                        sg.tensors[t].shapeSignature = list(new_shape)
                del sg.operators[k]
                removed += 1
        fb.drop_orphan_tensors(model)
        drop_unused_opcodes(model)
        return {"broadcast_to_removed": removed, "broadcast_to_kept": kept}

    def postcondition(self, model: ModelT) -> None:
        after = signature_shapes(model)
        changed = [k for k, v in self._before.items() if after.get(k) != v]
        if changed:
            self.fail(f"signature outputs changed shape: {changed[:3]}")
        for si, sg in enumerate(model.subgraphs):
            for k, op in enumerate(sg.operators):
                if op_name(model, op) == "BROADCAST_TO" and _plan(model, si, k) is not None:
                    self.fail(f"subgraph {si} op {k}: a removable BROADCAST_TO remains")


def drop_unused_opcodes(model: ModelT) -> int:
    """Remove operator codes no operator uses (so ``inspect`` lists only ops that run)."""
    used = sorted({int(op.opcodeIndex) for sg in model.subgraphs for op in sg.operators})
    if len(used) == len(model.operatorCodes):
        return 0
    remap = {old: new for new, old in enumerate(used)}
    dropped = len(model.operatorCodes) - len(used)
    model.operatorCodes = [model.operatorCodes[i] for i in used]
    for sg in model.subgraphs:
        for op in sg.operators:
            op.opcodeIndex = remap[int(op.opcodeIndex)]
    return dropped
