"""One position table for every signature: constants that are leading slices of a larger
one become a ``SLICE`` of it.

litert-torch folds ``position_embeddings[:L]`` into one constant per signature ([1,32,E],
[1,64,E], [1,128,E] for three buckets). Those are byte-prefixes of each other, so every
signature after the first would add weight bytes. :func:`share_prefix_slices` keeps the
largest one and gives the others a ``SLICE`` of it (one cheap op, supported by every
delegate), so adding signatures adds no weight bytes. Run as
:class:`~albert_edge.tflite.passes.prefix.SharePrefixSlicesPass`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from albert_edge.tflite.flatbuffer import (
    MIN_SLICE_BYTES,
    add_const,
    buffer_bytes,
    drop_orphan_tensors,
    drop_unused_buffers,
    opcode_index,
    schema,
    tensor_array,
    tensor_type_names,
)

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


def prefix_slice_plan(
    model: ModelT,
) -> tuple[dict[int, tuple[int, int]], dict[int, np.ndarray | None]]:
    """Buffers that are leading slices of a larger constant → (the kept buffer, axis), and
    the arrays of the candidate buffers (empty plan: nothing left to share)."""
    types = tensor_type_names()
    consts: list[tuple[int, int, Any]] = []  # (subgraph, tensor index, tensor)
    for si, sg in enumerate(model.subgraphs):
        for ti, t in enumerate(sg.tensors):
            raw_len = len(buffer_bytes(model, t.buffer))
            q = t.quantization
            quantized = q is not None and q.scale is not None and len(q.scale) > 0
            sliceable = types.get(t.type) in ("FLOAT32", "FLOAT16", "INT32", "INT8")
            if raw_len >= MIN_SLICE_BYTES and not quantized and sliceable:
                consts.append((si, ti, t))
    by_buffer: dict[int, tuple[int, int, Any]] = {}
    for c in consts:
        by_buffer.setdefault(int(c[2].buffer), c)
    arrays = {bid: tensor_array(model, c[2]) for bid, c in by_buffer.items()}
    replaced: dict[int, tuple[int, int]] = {}  # small buffer -> (big buffer, axis)
    for small_bid, (_, _, st) in by_buffer.items():
        sa = arrays[small_bid]
        best: tuple[int, int] | None = None
        for big_bid, (_, _, bt) in by_buffer.items():
            ba = arrays[big_bid]
            if big_bid == small_bid or sa is None or ba is None or bt.type != st.type:
                continue
            if sa.ndim != ba.ndim or sa.ndim == 0 or ba.size <= sa.size:
                continue
            diff = [ax for ax in range(sa.ndim) if sa.shape[ax] != ba.shape[ax]]
            if len(diff) != 1 or sa.shape[diff[0]] > ba.shape[diff[0]]:
                continue
            ax = diff[0]
            if np.array_equal(np.take(ba, np.arange(sa.shape[ax]), axis=ax), sa) and (
                best is None or ba.size > arrays[best[0]].size  # type: ignore[union-attr]
            ):
                best = (big_bid, ax)
        if best is not None:
            replaced[small_bid] = best
    # Chains (32 ⊂ 64 ⊂ 128): always slice from a buffer that is itself kept.
    for small, (big, _) in list(replaced.items()):
        while big in replaced:
            big = replaced[big][0]
        replaced[small] = (big, 0)
    return replaced, arrays


def share_prefix_slices(model: ModelT) -> int:
    """Replace constants that are leading slices of a larger constant by a SLICE of it.

    Only float/int constants ≥ 1 KiB without quantization parameters, whose shape equals
    the larger one's except on one axis, and whose bytes equal ``big[..., :n, ...]``.
    Returns the number of weight bytes removed.
    """
    s = schema()
    types = tensor_type_names()
    replaced, arrays = prefix_slice_plan(model)
    if not replaced:
        return 0
    slice_code = s.BuiltinOperator.SLICE
    removed = 0
    for si, sg in enumerate(model.subgraphs):
        new_ops = []
        big_tensor_in_sg: dict[int, int] = {}
        for ti, t in enumerate(list(sg.tensors)):
            bid = int(t.buffer)
            if bid not in replaced:
                continue
            big_bid = replaced[bid][0]
            big_arr = arrays[big_bid]
            assert big_arr is not None
            if big_bid not in big_tensor_in_sg:
                existing = [i for i, x in enumerate(sg.tensors) if int(x.buffer) == big_bid]
                if existing:
                    big_tensor_in_sg[big_bid] = existing[0]
                else:
                    bt = s.TensorT()
                    bt.name = (t.name or b"const") + b"/full"
                    bt.shape = list(big_arr.shape)
                    bt.type = t.type
                    bt.buffer = big_bid
                    sg.tensors.append(bt)
                    big_tensor_in_sg[big_bid] = len(sg.tensors) - 1
            shape = [int(d) for d in t.shape]
            begin = add_const(
                model,
                sg,
                f"slice_begin/{si}/{ti}",
                np.zeros(len(shape), np.int32),
                s.TensorType.INT32,
            )
            size = add_const(
                model, sg, f"slice_size/{si}/{ti}", np.asarray(shape, np.int32), s.TensorType.INT32
            )
            op = s.OperatorT()
            op.opcodeIndex = opcode_index(
                model, slice_code, 1 if types.get(t.type) == "FLOAT32" else 2
            )
            op.inputs = [big_tensor_in_sg[big_bid], begin, size]
            op.outputs = [ti]
            op.builtinOptionsType = s.BuiltinOptions.SliceOptions
            op.builtinOptions = s.SliceOptionsT()
            new_ops.append(op)
            removed += len(buffer_bytes(model, bid))
            t.buffer = 0
        sg.operators = new_ops + list(sg.operators)
    drop_orphan_tensors(model)
    drop_unused_buffers(model)
    return removed
