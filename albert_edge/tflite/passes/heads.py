"""split_heads_once: the stacked query/key/value projection is put heads-first by one
TRANSPOSE and split along its first axis.

Why: after :class:`~albert_edge.tflite.passes.FuseSharedInputFcPass` the projections
are one ``[M, n·H·D]`` output and a SPLIT on its last axis (a strided copy in XNNPACK),
and each part still goes through the exported chain RESHAPE ``[1, M, H, D]`` →
TRANSPOSE (heads first; the key to ``[1, H, D, M]``) → RESHAPE (drop the batch axis) →
BATCH_MATMUL: per layer, 3 transposes, 6 reshapes and the strided copy.

How: RESHAPE ``[M, n·H, D]`` → one TRANSPOSE ``[n·H, M, D]`` → SPLIT on axis 0 (contiguous
parts) into the tensors the BATCH_MATMULs read. The key is then ``[H, M, D]`` and its
BATCH_MATMULs read it with ``adj_y`` (XNNPACK packs the right-hand side either way). The
values are the same; where they go is the only change (``tests/tflite/test_fuse.py``
checks outputs with LiteRT).

Postcondition: no SPLIT this pass could rewrite remains, and every signature output
keeps its shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import (
    TflitePass,
    consumers,
    graph_outputs,
    is_constant,
    op_name,
    shape,
    signature_shapes,
)

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT

HEADS_FIRST = (0, 2, 1, 3)  # [1, M, H, D] -> [1, H, M, D]
KEY_TRANSPOSED = (0, 2, 3, 1)  # [1, M, H, D] -> [1, H, D, M]


def _const_ints(model: ModelT, sg: Any, index: int) -> tuple[int, ...] | None:
    from albert_edge.tflite import flatbuffer as fb

    if index < 0 or not is_constant(model, sg, index):
        return None
    arr = fb.tensor_array(model, sg.tensors[index])
    return None if arr is None else tuple(int(v) for v in arr.reshape(-1))


def _only_consumer(sg: Any, index: int, name: str, model: ModelT) -> int | None:
    readers = consumers(sg, index)
    if len(readers) != 1 or op_name(model, sg.operators[readers[0]]) != name:
        return None
    return readers[0]


def _chain(
    model: ModelT, si: int, out: int, m: int
) -> tuple[list[int], int, tuple[int, ...]] | None:
    """(ops to remove, the tensor the BATCH_MATMULs read, perm) of one split output."""
    sg = model.subgraphs[si]
    r1 = _only_consumer(sg, out, "RESHAPE", model)
    if r1 is None:
        return None
    t_in = int(sg.operators[r1].outputs[0])
    s1 = shape(sg, t_in)
    tr = _only_consumer(sg, t_in, "TRANSPOSE", model)
    if len(s1) != 4 or s1[0] != 1 or s1[1] != m or tr is None:
        return None
    perm = _const_ints(model, sg, int(sg.operators[tr].inputs[1]))
    if perm not in (HEADS_FIRST, KEY_TRANSPOSED):
        return None
    r2 = _only_consumer(sg, int(sg.operators[tr].outputs[0]), "RESHAPE", model)
    if r2 is None:
        return None
    final = int(sg.operators[r2].outputs[0])
    if shape(sg, final) != shape(sg, int(sg.operators[tr].outputs[0]))[1:]:
        return None
    if perm == KEY_TRANSPOSED:
        for c in consumers(sg, final):
            op = sg.operators[c]
            rhs_only = op_name(model, op) == "BATCH_MATMUL" and int(op.inputs[0]) != final
            if not rhs_only or int(op.inputs[1]) != final or op.builtinOptions.adjY:
                return None
    return [r1, tr, r2], final, perm


def _plans(model: ModelT, si: int) -> list[dict[str, Any]]:
    sg = model.subgraphs[si]
    outputs = graph_outputs(model, si)
    plans = []
    for k, op in enumerate(sg.operators):
        if op_name(model, op) != "SPLIT":
            continue
        x = int(op.inputs[1])
        xs = shape(sg, x)
        axis = _const_ints(model, sg, int(op.inputs[0]))
        if not xs or axis is None or axis[0] % len(xs) != len(xs) - 1:
            continue
        m = 1
        for d in xs[:-1]:
            m *= d
        chains = [_chain(model, si, int(o), m) for o in op.outputs]
        if any(c is None for c in chains):
            continue
        heads = {shape(sg, c[1])[0] for c in chains if c is not None}
        inner = {shape(sg, int(sg.operators[c[0][0]].outputs[0]))[3] for c in chains if c}
        touched = {int(t) for c in chains if c for j in c[0] for t in sg.operators[j].outputs}
        if len(heads) != 1 or len(inner) != 1 or touched & outputs:
            continue
        plans.append(
            {"split": k, "x": x, "m": m, "h": heads.pop(), "d": inner.pop(), "chains": chains}
        )
    return plans


class SplitHeadsOncePass(TflitePass):
    """One TRANSPOSE for the stacked projections' heads (see module docstring)."""

    name: ClassVar[str] = "split_heads_once"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb
        from albert_edge.tflite.passes.broadcast import drop_unused_opcodes

        self._before = signature_shapes(model)
        rewritten = removed = 0
        for si in range(len(model.subgraphs)):
            for plan in reversed(_plans(model, si)):  # later first: earlier indices hold
                removed += _rewrite(model, si, plan)
                rewritten += 1
        fb.drop_orphan_tensors(model)
        fb.drop_unused_buffers(model)
        drop_unused_opcodes(model)
        return {"splits_rewritten": rewritten, "ops_removed": removed}

    def postcondition(self, model: ModelT) -> None:
        for si in range(len(model.subgraphs)):
            if _plans(model, si):
                self.fail(
                    f"subgraph {si}: a projection SPLIT still goes through per-part transposes"
                )
        if signature_shapes(model) != self._before:
            self.fail("signature outputs changed shape")


def _rewrite(model: ModelT, si: int, plan: dict[str, Any]) -> int:
    """Apply one plan of :func:`_plans`; returns the number of ops removed."""
    import numpy as np

    from albert_edge.tflite import flatbuffer as fb

    s = fb.schema()
    sg = model.subgraphs[si]
    split = sg.operators[plan["split"]]
    chains = plan["chains"]
    n, m, h, d = len(chains), plan["m"], plan["h"], plan["d"]
    r1 = sg.operators[chains[0][0][0]]
    tr = sg.operators[chains[0][0][1]]
    tag = f"heads/{si}/{plan['split']}"
    new_shape = [m, n * h, d]
    shape_const = fb.add_const(
        model, sg, tag + "/shape", np.array(new_shape, np.int32), s.TensorType.INT32
    )
    xr = _activation(sg, tag + "/rows", new_shape)
    reshape = s.OperatorT()
    reshape.opcodeIndex = r1.opcodeIndex
    reshape.inputs, reshape.outputs = [plan["x"], shape_const], [xr]
    reshape.builtinOptionsType = s.BuiltinOptions.ReshapeOptions
    reshape.builtinOptions = s.ReshapeOptionsT()
    reshape.builtinOptions.newShape = list(new_shape)
    perm = fb.add_const(model, sg, tag + "/perm", np.array([1, 0, 2], np.int32), s.TensorType.INT32)
    xt = _activation(sg, tag + "/heads", [n * h, m, d])
    transpose = s.OperatorT()
    transpose.opcodeIndex = tr.opcodeIndex
    transpose.inputs, transpose.outputs = [xr, perm], [xt]
    transpose.builtinOptionsType = tr.builtinOptionsType
    transpose.builtinOptions = tr.builtinOptions
    axis = fb.add_const(model, sg, tag + "/axis", np.array(0, np.int32), s.TensorType.INT32)
    split.inputs = [axis, xt]
    split.outputs = [c[1] for c in chains]
    for _, final, p in chains:
        sg.tensors[final].shape = [h, m, d]
        if sg.tensors[final].shapeSignature is not None:
            sg.tensors[final].shapeSignature = [h, m, d]
        if p == KEY_TRANSPOSED:
            for c in consumers(sg, final):
                sg.operators[c].builtinOptions.adjY = True
    drop = {j for c in chains for j in c[0]}
    new_ops = []
    for k, op in enumerate(sg.operators):
        if k == plan["split"]:
            new_ops += [reshape, transpose, op]
        elif k not in drop:
            new_ops.append(op)
    sg.operators = new_ops
    return len(drop) - 2


def _activation(sg: Any, name: str, shp: list[int]) -> int:
    from albert_edge.tflite import flatbuffer as fb

    t = fb.schema().TensorT()
    t.name, t.shape, t.type, t.buffer = name.encode(), list(shp), fb.schema().TensorType.FLOAT32, 0
    sg.tensors.append(t)
    return len(sg.tensors) - 1
