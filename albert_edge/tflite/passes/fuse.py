"""Less work for the same function: one op where the graph computes a value twice, one
FULLY_CONNECTED where several read the same tensor.

merge_duplicate_ops — why: a layer's LayerNorm γ is folded by the converter into each FC
that reads the normalized input; storing each weight once
(:class:`~albert_edge.tflite.passes.UnfoldScaledCopiesPass`) puts a MUL by γ in front of
each of those FCs, beside the MUL by γ the residual branch already has. They compute one
value. How: an elementwise op whose opcode, options and inputs (the same tensor, or a
constant with the same bytes) equal an earlier op's is dropped and its readers read the
earlier output. Exact: the same kernel on the same values.

fuse_shared_input_fc — why: attention's query, key and value projections are three
FULLY_CONNECTED ops on one input. At int8-dynamic each FC quantizes its input itself
(three quantizations of one tensor) and runs a GEMM a third of the width. How: the FCs
of one input whose weights have one shape and one stored form become one FC whose weight
is their weights stacked (a new constant made once per distinct set of weights, so a
weight shared by layers stays shared), followed by a SPLIT on the last axis into the
original output tensors. XNNPACK runs the SPLIT as a copy. The forms it stacks are the
ones where every output row keeps its own numbers, so each output element is computed
from the same values by the same kernel:

* float32 weights (the float graph convert's int8-dynamic quantizes per channel after
  the stacking: a per-channel scale is per output row, and the one input quantization is
  the one each FC made; ``tests/tflite/test_fuse.py`` checks the outputs bit for bit);
* already quantized INT8 or INT4 weights with one scale per output row (quantized axis
  0, zero points 0): their bytes and scales are stacked as stored — what a precision plan
  runs after its quantizer (:func:`albert_edge.tflite.pipeline.quantize_passes`), so the
  fusion needs no knowledge of the plan and is exact by construction. FCs whose weights
  differ in type (a plan's int4 Q beside an int8 K) or carry one scale per tensor (a
  stacked tensor would need one scale for all of them) are left apart; so are INT4 weights
  with an odd element count (packed two to a byte, their bytes would not concatenate) and
  blockwise or asymmetric forms (no plan makes them for an FC).

A stacked weight replaces its parts only where nothing else reads them: FCs whose weights
another op also reads (an FC left apart, a layer whose Q, K and V read different tensors)
or that other groups stack in another order stay apart, since stacking them would store
those weights twice (what a trained multi-group model's int8-dynamic file did while its
later layers' FCs read different tensors: ``weights_stored_once`` failed).

Postconditions: merge — no two mergeable ops remain; fuse — no two FCs it could stack
without storing a weight twice read one tensor, the FC weights take no more bytes than
before, and every signature output keeps its shape.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import (
    TflitePass,
    graph_outputs,
    is_constant,
    op_name,
    shape,
    signature_shapes,
)

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT

ELEMENTWISE = frozenset({"ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "RSQRT", "TANH"})
MAX_SPLIT = 4  # XNNPACK's SPLIT takes 2 to 4 outputs


def _input_key(model: ModelT, sg: Any, index: int) -> tuple[Any, ...]:
    if index < 0:
        return ("none",)
    if is_constant(model, sg, index):
        from albert_edge.tflite import flatbuffer as fb

        t = sg.tensors[index]
        return ("const", int(t.type), tuple(shape(sg, index)), fb.buffer_bytes(model, t.buffer))
    return ("tensor", index)


def _options_key(op: Any) -> tuple[Any, ...]:
    opts = op.builtinOptions
    fields = sorted(vars(opts).items()) if opts is not None else []
    return (int(op.opcodeIndex), int(op.builtinOptionsType or 0), tuple(fields))


def _duplicates(model: ModelT, si: int) -> list[tuple[int, int]]:
    """(later op, earlier op computing the same value) pairs of subgraph ``si``."""
    sg = model.subgraphs[si]
    outputs = graph_outputs(model, si)
    seen: dict[tuple[Any, ...], int] = {}
    pairs = []
    for k, op in enumerate(sg.operators):
        if op_name(model, op) not in ELEMENTWISE or len(op.outputs) != 1:
            continue
        key = (_options_key(op), *(_input_key(model, sg, int(i)) for i in op.inputs))
        if key in seen and int(op.outputs[0]) not in outputs:
            pairs.append((k, seen[key]))
        else:
            seen.setdefault(key, k)
    return pairs


def _replace_reads(sg: Any, old: int, new: int) -> None:
    for op in sg.operators:
        op.inputs = [new if int(i) == old else int(i) for i in op.inputs]


class MergeDuplicateOpsPass(TflitePass):
    """Drop elementwise ops that recompute an earlier op's value (see module docstring)."""

    name: ClassVar[str] = "merge_duplicate_ops"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb
        from albert_edge.tflite.passes.broadcast import drop_unused_opcodes

        merged = 0
        for si, sg in enumerate(model.subgraphs):
            while pairs := _duplicates(model, si):  # a merge can make later ops equal
                drop = set()
                for later, earlier in pairs:
                    if later in drop or earlier in drop:
                        continue
                    _replace_reads(
                        sg,
                        int(sg.operators[later].outputs[0]),
                        int(sg.operators[earlier].outputs[0]),
                    )
                    drop.add(later)
                sg.operators = [op for k, op in enumerate(sg.operators) if k not in drop]
                merged += len(drop)
        if merged:  # nothing merged: the file stays as it was, byte for byte
            fb.drop_orphan_tensors(model)
            fb.drop_unused_buffers(model)
            drop_unused_opcodes(model)
        return {"ops_merged": merged}

    def postcondition(self, model: ModelT) -> None:
        for si in range(len(model.subgraphs)):
            if _duplicates(model, si):
                self.fail(f"subgraph {si}: an op still recomputes an earlier op's value")


def _weight_form(model: ModelT, sg: Any, w: int) -> tuple[str, ...] | None:
    """How a constant FC weight is stored, if rows of that form stack exactly: ``FLOAT32``,
    or ``INT8`` / ``INT4`` with one scale per output row (axis 0, zero points 0)."""
    from albert_edge.tflite import flatbuffer as fb

    t = sg.tensors[w]
    kind = fb.tensor_type_names().get(t.type)
    q = t.quantization
    scales = q.scale if q is not None and q.scale is not None else ()
    if kind == "FLOAT32" and not len(scales):
        return (kind,)
    rows, cols = (int(d) for d in shape(sg, w))
    if kind not in ("INT8", "INT4") or len(scales) != rows or int(q.quantizedDimension) != 0:
        return None
    if q.detailsType or (q.zeroPoint is not None and any(int(z) for z in q.zeroPoint)):
        return None
    if kind == "INT4" and (rows * cols) % 2:
        return None  # packed two to a byte: an odd count would not concatenate
    return (kind, "per-row")


def _fusable(model: ModelT, sg: Any, op: Any) -> tuple[Any, ...] | None:
    """(input tensor, weight shape, weight form, input quantization) of an FC this pass
    can stack, else None."""
    if op_name(model, op) != "FULLY_CONNECTED" or len(op.outputs) != 1:
        return None
    ins = [int(i) for i in op.inputs]
    w = ins[1]
    if not is_constant(model, sg, w):
        return None
    form = _weight_form(model, sg, w)
    if form is None:
        return None
    if len(ins) > 2 and ins[2] >= 0 and not is_constant(model, sg, ins[2]):
        return None
    opts = op.builtinOptions
    if opts is not None and (
        int(opts.fusedActivationFunction) != 0 or int(opts.weightsFormat) != 0
    ):
        return None
    asym = bool(opts.asymmetricQuantizeInputs) if opts is not None else False
    if asym and form == ("FLOAT32",):
        return None
    rows, cols = shape(sg, w)
    return ins[0], rows, cols, form, asym


def _groups(model: ModelT, si: int) -> list[list[int]]:
    """Op indices of FCs that read one tensor with weights of one shape and form (2+ per
    group)."""
    sg = model.subgraphs[si]
    groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for k, op in enumerate(sg.operators):
        key = _fusable(model, sg, op)
        if key is not None:
            out = shape(sg, int(op.outputs[0]))
            opts = op.builtinOptions
            keep = bool(opts.keepNumDims) if opts is not None else False
            groups[(*key, len(out), keep)].append(k)
    return [
        g[i : i + MAX_SPLIT]
        for g in groups.values()
        for i in range(0, len(g), MAX_SPLIT)
        if len(g[i : i + MAX_SPLIT]) > 1
    ]


def _weight_key(model: ModelT, sg: Any, op: Any) -> tuple[int, Any]:
    """An FC's weight buffer and its per-row scales: what a stacked constant is made of."""
    t = sg.tensors[int(op.inputs[1])]
    return int(t.buffer), _scales(t)


def _stackable_groups(model: ModelT) -> dict[int, list[list[int]]]:
    """:func:`_groups` of every subgraph, less those whose stacking would store a weight
    twice: a group is kept only if each of its weight buffers is read by nothing but
    kept groups, all stacking it with the same parts in the same order (one stacked
    constant, the parts dropped). Dropping a group can strand another's weight, so
    this repeats until nothing changes."""
    groups = {si: _groups(model, si) for si in range(len(model.subgraphs))}
    while True:
        member = {(si, k): g for si, gs in groups.items() for g in gs for k in g}
        stacks: dict[int, set[tuple[Any, ...]]] = defaultdict(set)
        loose: set[int] = set()  # buffers some op outside the groups reads
        for si, sg in enumerate(model.subgraphs):
            for k, op in enumerate(sg.operators):
                group = member.get((si, k))
                if group is None:
                    loose.update(int(sg.tensors[int(i)].buffer) for i in op.inputs if int(i) >= 0)
                    continue
                key = tuple(_weight_key(model, sg, sg.operators[j]) for j in group)
                stacks[int(sg.tensors[int(op.inputs[1])].buffer)].add(key)
        shared = {b for b, keys in stacks.items() if b in loose or len(keys) > 1}
        kept = {
            si: [
                g
                for g in gs
                if not any(
                    int(sg.tensors[int(sg.operators[k].inputs[1])].buffer) in shared for k in g
                )
            ]
            for si, gs in groups.items()
            for sg in (model.subgraphs[si],)
        }
        if kept == groups:
            return groups
        groups = kept


def _fc_weight_bytes(model: ModelT) -> int:
    """Bytes of the distinct buffers FULLY_CONNECTED ops read as their weight."""
    from albert_edge.tflite import flatbuffer as fb

    buffers = {
        int(sg.tensors[int(op.inputs[1])].buffer)
        for sg in model.subgraphs
        for op in sg.operators
        if op_name(model, op) == "FULLY_CONNECTED"
    }
    return sum(len(fb.buffer_bytes(model, b)) for b in buffers)


class FuseSharedInputFcPass(TflitePass):
    """Stack the FULLY_CONNECTED ops that read one tensor into one (see module docstring)."""

    name: ClassVar[str] = "fuse_shared_input_fc"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb
        from albert_edge.tflite.passes.broadcast import drop_unused_opcodes

        self._before = signature_shapes(model)
        self._weight_bytes = _fc_weight_bytes(model)
        stacked: dict[Any, Any] = {}  # weight buffers → new
        fused = removed = 0
        found = sum(len(_groups(model, si)) for si in range(len(model.subgraphs)))
        for si, groups in _stackable_groups(model).items():
            for group in reversed(groups):  # later groups first: indices hold
                _fuse(model, si, group, stacked)
                fused += 1
                removed += len(group) - 1
        fb.drop_orphan_tensors(model)
        fb.drop_unused_buffers(model)
        drop_unused_opcodes(model)
        return {
            "fc_groups_fused": fused,
            "fc_ops_removed": removed,
            # constants made (weights, biases), not the per-subgraph tensors naming them
            "stacked_constants": sum(1 for k in stacked if k[0] == "buffer"),
            # groups whose weights something else also reads: stacked, stored twice
            "fc_groups_left_apart": found - fused,
        }

    def postcondition(self, model: ModelT) -> None:
        for si, groups in _stackable_groups(model).items():
            if groups:
                self.fail(f"subgraph {si}: FULLY_CONNECTED ops reading one tensor remain")
        if _fc_weight_bytes(model) > self._weight_bytes:
            self.fail("stacked FC weights are stored beside their parts (a weight twice)")
        after = signature_shapes(model)
        if after != self._before:
            self.fail("signature outputs changed shape")


def _stacked(model: ModelT, sg: Any, ops: list[Any], stacked: dict[Any, Any]) -> tuple[int, int]:
    """Tensors (weight, bias or -1) of the stacked FC in ``sg``. Each stacked constant is
    one buffer however many layers and signatures read it, and one tensor per subgraph
    (ai-edge-quantizer wants one tensor per name)."""
    import numpy as np

    from albert_edge.tflite import flatbuffer as fb

    ws = [sg.tensors[int(op.inputs[1])] for op in ops]
    weight = _stacked_const(model, sg, ws, stacked)
    bias_ids = [int(op.inputs[2]) if len(op.inputs) > 2 else -1 for op in ops]
    if all(b < 0 for b in bias_ids):
        return weight, -1
    if any(b < 0 for b in bias_ids):  # a zero bias where an FC has none
        for k, (b, w) in enumerate(zip(bias_ids, ws, strict=True)):
            if b < 0:
                zeros = np.zeros(int(w.shape[0]), np.float32)
                bias_ids[k] = fb.add_const(
                    model,
                    sg,
                    f"{(w.name or b'w').decode()}/zero_bias",
                    zeros,
                    fb.schema().TensorType.FLOAT32,
                )
    return weight, _stacked_const(model, sg, [sg.tensors[b] for b in bias_ids], stacked)


def _scales(t: Any) -> tuple[bytes, bytes] | None:
    """A quantized tensor's per-row scales and zero points as bytes (None when float)."""
    import numpy as np

    q = t.quantization
    if q is None or q.scale is None or not len(q.scale):
        return None
    zeros = q.zeroPoint if q.zeroPoint is not None else np.zeros(len(q.scale), np.int64)
    return (
        np.asarray(q.scale, np.float32).tobytes(),
        np.asarray(zeros, np.int64).tobytes(),
    )


def _stacked_const(model: ModelT, sg: Any, parts: list[Any], stacked: dict[Any, Any]) -> int:
    """The stacked constant of ``parts`` (row-major, rows first: the stored bytes
    concatenated, which for packed INT4 holds while each part has an even element count)
    and, quantized, their per-row scales and zero points concatenated in the same order."""
    import numpy as np

    from albert_edge.tflite import flatbuffer as fb

    key = tuple((int(t.buffer), _scales(t)) for t in parts)
    if ("buffer", key) not in stacked:
        data = b"".join(fb.buffer_bytes(model, t.buffer) for t in parts)
        rows = sum(int(t.shape[0]) for t in parts)
        buf = fb.schema().BufferT()
        buf.data = np.frombuffer(data, dtype=np.uint8).copy()
        model.buffers.append(buf)
        stacked[("buffer", key)] = (len(model.buffers) - 1, [rows, *list(parts[0].shape[1:])])
    if ("tensor", id(sg), key) not in stacked:
        buffer, shp = stacked[("buffer", key)]
        name = b"+".join((t.name or b"c") for t in parts)
        index = _tensor(sg, name, shp, int(parts[0].type), buffer)
        scales = [s for _, s in key if s is not None]
        if scales:  # one form per group: every part quantized, or none
            q = fb.schema().QuantizationParametersT()
            q.scale = np.concatenate([np.frombuffer(s, np.float32) for s, _ in scales])
            q.zeroPoint = np.concatenate([np.frombuffer(z, np.int64) for _, z in scales])
            q.quantizedDimension = 0
            sg.tensors[index].quantization = q
        stacked[("tensor", id(sg), key)] = index
    return int(stacked[("tensor", id(sg), key)])


def _tensor(sg: Any, name: bytes, shp: Any, ttype: int, buffer: int) -> int:
    from albert_edge.tflite import flatbuffer as fb

    t = fb.schema().TensorT()
    t.name, t.shape, t.type, t.buffer = name, [int(d) for d in shp], ttype, buffer
    sg.tensors.append(t)
    return len(sg.tensors) - 1


def _fuse(model: ModelT, si: int, group: list[int], stacked: dict[Any, Any]) -> None:
    """Replace the FCs ``group`` (op indices) by one FC and a SPLIT of its output."""
    import numpy as np

    from albert_edge.tflite import flatbuffer as fb

    s = fb.schema()
    sg = model.subgraphs[si]
    ops = [sg.operators[k] for k in group]
    first = ops[0]
    w_idx, b_idx = _stacked(model, sg, ops, stacked)
    outs = [int(op.outputs[0]) for op in ops]
    out_shape = list(shape(sg, outs[0]))
    out_shape[-1] = sum(shape(sg, o)[-1] for o in outs)
    wide = _tensor(sg, sg.tensors[outs[0]].name + b"/stacked", out_shape, s.TensorType.FLOAT32, 0)
    fc = s.OperatorT()
    fc.opcodeIndex = first.opcodeIndex
    fc.inputs, fc.outputs = [int(first.inputs[0]), w_idx, b_idx], [wide]
    fc.builtinOptionsType, fc.builtinOptions = first.builtinOptionsType, first.builtinOptions
    axis = fb.add_const(
        model,
        sg,
        f"split_axis/{si}/{group[0]}",
        np.array(len(out_shape) - 1, np.int32),
        s.TensorType.INT32,
    )
    split = s.OperatorT()
    split.opcodeIndex = fb.opcode_index(model, s.BuiltinOperator.SPLIT, 1)
    split.inputs, split.outputs = [axis, wide], outs
    split.builtinOptionsType = s.BuiltinOptions.SplitOptions
    split.builtinOptions = s.SplitOptionsT()
    split.builtinOptions.numSplits = len(outs)
    # the stacked FC and its SPLIT take the place of the group's first FC (all inputs of
    # the group are ready there: one input, constant weights)
    rest = set(group[1:])
    new_ops = []
    for k, op in enumerate(sg.operators):
        if k == group[0]:
            new_ops += [fc, split]
        elif k not in rest:
            new_ops.append(op)
    sg.operators = new_ops
