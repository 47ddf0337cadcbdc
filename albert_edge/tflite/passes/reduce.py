"""keep_reduced_dims: LayerNorm's MEANs keep their reduced axis, so the RESHAPEs that put
it back go.

Why: the exported LayerNorm reduces ``[1, M, H]`` to ``[M]`` (MEAN without keep_dims),
computes its statistics on ``[M]`` vectors, and RESHAPEs three of them to ``[1, M, 1]``
to broadcast against the rows: three ops per LayerNorm that move no data but each is a
node XNNPACK dispatches (13 LayerNorms, 39 nodes on a 6-layer model).

How: every MEAN without keep_dims gets keep_dims and its keep-dims shape; the
elementwise ops downstream of it take the broadcast of their inputs' new shapes (the
same elements, with size-1 axes), and a RESHAPE whose target is its input's new shape is
dropped (its readers read the input). Only shapes change, so the values are the same bit
for bit (``tests/tflite/test_fuse.py``). A subgraph where a changed shape would reach an
op that is not elementwise, or a graph output, is left as it was.

Postcondition: signature outputs keep their shapes, and every elementwise op's output
shape is the broadcast of its inputs' shapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import (
    TflitePass,
    broadcast_shape,
    graph_outputs,
    is_constant,
    op_name,
    shape,
    signature_shapes,
)
from albert_edge.tflite.passes.broadcast import BROADCASTING_OPS

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT

UNARY = frozenset({"RSQRT", "SQRT", "NEG", "ABS", "EXP", "LOG", "TANH", "LOGISTIC"})
ELEMENTWISE = BROADCASTING_OPS | UNARY


def _kept_shape(model: ModelT, sg: Any, op: Any) -> tuple[int, ...] | None:
    from albert_edge.tflite import flatbuffer as fb

    axes_idx = int(op.inputs[1])
    if not is_constant(model, sg, axes_idx) or op.builtinOptions is None:
        return None
    if op.builtinOptions.keepDims:
        return None
    x = shape(sg, int(op.inputs[0]))
    arr = fb.tensor_array(model, sg.tensors[axes_idx])
    if arr is None or not x:
        return None
    axes = {int(a) % len(x) for a in arr.reshape(-1)}
    return tuple(1 if d in axes else n for d, n in enumerate(x))


def _plan(model: ModelT, si: int) -> tuple[list[int], dict[int, tuple[int, ...]], list[int]] | None:
    """(MEAN ops, new tensor shapes, identity RESHAPE ops), or None when not exact."""
    sg = model.subgraphs[si]
    outputs = graph_outputs(model, si)
    means, new, identity = [], {}, []
    for k, op in enumerate(sg.operators):  # topological order: one sweep
        name = op_name(model, op)
        ins = [int(i) for i in op.inputs if int(i) >= 0]
        touched = [i for i in ins if i in new]
        if name == "MEAN":
            kept = _kept_shape(model, sg, op)
            if touched or kept is None:
                if touched:
                    return None
                continue
            means.append(k)
            new[int(op.outputs[0])] = kept
        elif not touched:
            continue
        elif name == "RESHAPE" and shape(sg, int(op.outputs[0])) == new[ins[0]]:
            identity.append(k)
        elif name == "RESHAPE":
            continue  # any same-size input reshapes to its target
        elif name in ELEMENTWISE:
            try:
                out_shape = broadcast_shape(new.get(i, shape(sg, i)) for i in ins)
            except ValueError:
                return None
            out = int(op.outputs[0])
            old = shape(sg, out)
            if out_shape != old:
                size = 1
                for d in old:
                    size *= d
                same_size = size == _count(out_shape)
                if not same_size or out in outputs:
                    return None
                new[out] = out_shape
        else:
            return None
    if any(t in outputs for t in new):
        return None
    return means, new, identity


def _count(shp: tuple[int, ...]) -> int:
    n = 1
    for d in shp:
        n *= d
    return n


class KeepReducedDimsPass(TflitePass):
    """MEAN with keep_dims; the RESHAPEs that restored the axis are dropped."""

    name: ClassVar[str] = "keep_reduced_dims"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        self._before = signature_shapes(model)
        means = dropped = kept = 0
        for si, sg in enumerate(model.subgraphs):
            plan = _plan(model, si)
            if plan is None:
                kept += 1
                continue
            mean_ops, new, identity = plan
            for k in mean_ops:
                sg.operators[k].builtinOptions.keepDims = True
            for t, shp in new.items():
                sg.tensors[t].shape = list(shp)
                if sg.tensors[t].shapeSignature is not None:
                    sg.tensors[t].shapeSignature = list(shp)
            for k in identity:
                op = sg.operators[k]
                src, dst = int(op.inputs[0]), int(op.outputs[0])
                for other in sg.operators:
                    other.inputs = [src if int(i) == dst else int(i) for i in other.inputs]
            sg.operators = [op for k, op in enumerate(sg.operators) if k not in set(identity)]
            means += len(mean_ops)
            dropped += len(identity)
        fb.drop_orphan_tensors(model)
        fb.drop_unused_buffers(model)
        return {"means_kept_dims": means, "reshapes_removed": dropped, "subgraphs_left": kept}

    def postcondition(self, model: ModelT) -> None:
        if signature_shapes(model) != self._before:
            self.fail("signature outputs changed shape")
        for si, sg in enumerate(model.subgraphs):
            for k, op in enumerate(sg.operators):
                if op_name(model, op) not in ELEMENTWISE:
                    continue
                ins = [shape(sg, int(i)) for i in op.inputs if int(i) >= 0]
                if broadcast_shape(ins) != shape(sg, int(op.outputs[0])):
                    self.fail(f"subgraph {si} op {k}: output shape is not its inputs' broadcast")
