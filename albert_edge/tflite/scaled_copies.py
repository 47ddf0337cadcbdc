"""Tied weights a constant fold split, tied again: an FC weight that is another constant
scaled per input column reads that constant behind a ``MUL`` by γ.

The converter folds a LayerNorm's γ into the FULLY_CONNECTED weights that read its output
(W' = W · diag(γ)): the MLM decoder tied to the word table becomes a second V×E table,
and every later layer group of a trained multi-group ALBERT a second copy of the group's
weights. :func:`unfold_scaled_copies` stores each once; :func:`scaled_copy_matches` finds
them. Run as :class:`~albert_edge.tflite.passes.tied.UnfoldScaledCopiesPass`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from albert_edge.tflite.flatbuffer import (
    MIN_SLICE_BYTES,
    add_const,
    buffer_bytes,
    builtin_names,
    drop_orphan_tensors,
    drop_unused_buffers,
    opcode_builtin,
    opcode_index,
    schema,
    tensor_array,
    tensor_type_names,
)

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


def unfold_scaled_copies(model: ModelT) -> int:
    """Undo a constant fold that turned a tied weight into a second, scaled copy.

    The MLM decoder is tied to the V×E word table, but the converter folds the head's
    LayerNorm gamma into the decoder's FULLY_CONNECTED weight (W' = W · diag(γ)), which
    stores a second V×E table (+33 % of an ALBERT-base file). When an FC weight ``B``
    equals another constant ``A`` scaled per input column (``B = A * γ``, checked to
    float32 rounding), the FC reads ``A`` again and a MUL by γ ([E] floats) goes in front
    of it: the same function, the table stored once. Where no stored copy is the unscaled
    weight (a later group's layer weights, folded with two LayerNorms' γ), the FCs read
    that weight, made once, each with its own γ (see :func:`scaled_copy_matches`).
    Returns weight bytes removed (net of a weight made).
    """
    s = schema()
    names = builtin_names()
    matches = scaled_copy_matches(model)
    if not matches:
        return 0
    removed = 0
    made: dict[int, int] = {}  # id of an unscaled weight → its new buffer
    for base, _ in matches.values():
        if isinstance(base, np.ndarray) and id(base) not in made:
            buf = s.BufferT()
            buf.data = np.frombuffer(base.astype(np.float32).tobytes(), np.uint8).copy()
            model.buffers.append(buf)
            made[id(base)] = len(model.buffers) - 1
            removed -= base.nbytes
    mul_code = s.BuiltinOperator.MUL
    for si, sg in enumerate(model.subgraphs):
        new_ops = []
        for op in sg.operators:
            name = names.get(opcode_builtin(model.operatorCodes[op.opcodeIndex]))
            w = sg.tensors[op.inputs[1]] if name == "FULLY_CONNECTED" else None
            if w is None or int(w.buffer) not in matches:
                new_ops.append(op)
                continue
            base, gamma = matches[int(w.buffer)]
            a_id = made[id(base)] if isinstance(base, np.ndarray) else int(base)
            x = sg.tensors[op.inputs[0]]
            g_idx = add_const(
                model, sg, f"unfolded_scale/{si}/{len(new_ops)}", gamma, s.TensorType.FLOAT32
            )
            xs = s.TensorT()
            xs.name = (x.name or b"x") + b"/scaled"
            xs.shape = list(x.shape)
            xs.type = s.TensorType.FLOAT32
            xs.buffer = 0
            sg.tensors.append(xs)
            xs_idx = len(sg.tensors) - 1
            mul = s.OperatorT()
            mul.opcodeIndex = opcode_index(model, mul_code, 1)
            mul.inputs, mul.outputs = [int(op.inputs[0]), g_idx], [xs_idx]
            mul.builtinOptionsType = s.BuiltinOptions.MulOptions
            mul.builtinOptions = s.MulOptionsT()
            new_ops.append(mul)
            at = s.TensorT()
            at.name = (w.name or b"w") + b"/tied"
            at.shape = list(w.shape)
            at.type = w.type
            at.buffer = a_id
            sg.tensors.append(at)
            op.inputs = [xs_idx, len(sg.tensors) - 1, *list(op.inputs[2:])]
            new_ops.append(op)
        sg.operators = new_ops
    for sg in model.subgraphs:
        used = {int(i) for op in sg.operators for i in op.inputs}
        for ti, t in enumerate(sg.tensors):
            if int(t.buffer) in matches and ti not in used:
                t.buffer = 0  # the scaled copy no operator reads any more
    still_used = {int(t.buffer) for sg in model.subgraphs for t in sg.tensors}
    removed += sum(len(buffer_bytes(model, b)) for b in matches if b not in still_used)
    drop_orphan_tensors(model)
    drop_unused_buffers(model)
    return removed


def scaled_copy_matches(model: ModelT) -> dict[int, tuple[int | np.ndarray, np.ndarray]]:
    """FULLY_CONNECTED weight buffer → (what it is a column-scaled copy of, γ).

    What it is a copy of is another constant's buffer id, or an array: the unscaled
    weight, which no buffer holds, to be made once.

    Where two FC weights are scaled copies of each other, the direction kept is the one
    whose γ is a vector the graph already holds (a LayerNorm weight the converter folded
    into a layer's FC weights), and γ is then that constant, bit for bit: every FC that
    reads a layer's normalized input multiplies it by the same constant, so those MULs are
    one computation (:class:`~albert_edge.tflite.passes.fuse.MergeDuplicateOpsPass`) and
    the FCs read one tensor (:class:`~albert_edge.tflite.passes.fuse.FuseSharedInputFcPass`).

    Where neither direction's γ is a graph vector but each copy is one unscaled weight
    ``W`` times a graph vector (``A = W * γa``, ``B = W * γb``), both FCs read ``W``
    (``B / γb``, made once) with their own γ in front. This is every later layer group of
    a trained ALBERT with several groups: the group's first layer reads the previous
    group's last LayerNorm (γa), its other layers read its own (γb), and the converter
    folds each into a copy of the same weights. Keeping ``A`` and scaling by the ratio
    γb/γa (one recovered vector per weight, not a graph constant) would leave the group's
    query, key and value FCs behind three different MULs: not merged, not stacked, and a
    stacked copy beside the unstacked weights would store them twice. With a random
    initialisation every γ is 1 and the copies are one buffer, which is why only trained
    multi-group models showed it.
    """
    floats, vectors = _float_constants(model)
    fc_weight_buffers, other_reads = _fc_weight_buffers(model)
    candidates = _candidates(floats, vectors, fc_weight_buffers, other_reads)
    return _choose(candidates, floats)


def _float_constants(model: ModelT) -> tuple[dict[int, np.ndarray], dict[int, list[np.ndarray]]]:
    """Float32 constants by buffer id (vectors of more than one value, and matrices of at
    least :data:`MIN_SLICE_BYTES`), and the vectors by length: the γ a fold may have used."""
    types = tensor_type_names()
    floats: dict[int, np.ndarray] = {}
    vectors: dict[int, list[np.ndarray]] = defaultdict(list)
    for sg in model.subgraphs:
        for t in sg.tensors:
            if not t.buffer or types.get(t.type) != "FLOAT32" or t.shape is None:
                continue
            if len(t.shape) == 1 and int(t.buffer) not in floats:
                arr = tensor_array(model, t)
                if arr is not None and arr.size > 1:
                    floats[int(t.buffer)] = arr
                    vectors[arr.size].append(arr)
            elif (
                len(t.shape) == 2
                and int(t.buffer) not in floats
                and len(buffer_bytes(model, t.buffer)) >= MIN_SLICE_BYTES
            ):
                arr = tensor_array(model, t)
                if arr is not None and arr.ndim == 2:
                    floats[int(t.buffer)] = arr
    return floats, vectors


def _fc_weight_buffers(model: ModelT) -> tuple[set[int], set[int]]:
    """Buffers some FULLY_CONNECTED reads as its weight, and buffers some op reads
    otherwise (a weight made anew must replace only FC weights)."""
    names = builtin_names()
    fc_weight_buffers: set[int] = set()
    other_reads: set[int] = set()
    for sg in model.subgraphs:
        for op in sg.operators:
            fc = names.get(opcode_builtin(model.operatorCodes[op.opcodeIndex])) == "FULLY_CONNECTED"
            if fc:
                fc_weight_buffers.add(int(sg.tensors[op.inputs[1]].buffer))
            for k, i in enumerate(op.inputs):
                if int(i) >= 0 and not (fc and k == 1):
                    other_reads.add(int(sg.tensors[int(i)].buffer))
    return fc_weight_buffers, other_reads


# (rank: 0 γ known, 1 unscaled weight made, 2 γ recovered; B, A, γ, γa)
_Candidate = tuple[int, int, int, np.ndarray, np.ndarray | None]


def _candidates(
    floats: dict[int, np.ndarray],
    vectors: dict[int, list[np.ndarray]],
    fc_weight_buffers: set[int],
    other_reads: set[int],
) -> list[_Candidate]:
    """Every (FC weight ``B``, same-shaped constant ``A``) with ``B`` a column-scaled copy
    of ``A``, ranked by how γ is known (see :func:`scaled_copy_matches`)."""
    candidates: list[_Candidate] = []
    for b_id in sorted(fc_weight_buffers & set(floats)):
        B = floats[b_id]
        if B.ndim != 2:
            continue
        for a_id, A in floats.items():
            if a_id == b_id or A.shape != B.shape:
                continue
            gamma = _column_scale(A, B)
            if gamma is None:
                continue
            known = _known_scale(A, B, vectors.get(gamma.size, []))
            if known is not None:
                candidates.append((0, b_id, a_id, known, None))
                continue
            pair = _common_unscaled(A, B, vectors.get(gamma.size, []))
            if pair is not None and {a_id, b_id} <= fc_weight_buffers - other_reads:
                candidates.append((1, b_id, a_id, pair[1], pair[0]))
            else:
                candidates.append((2, b_id, a_id, gamma, None))
    return candidates


def _choose(
    candidates: list[_Candidate], floats: dict[int, np.ndarray]
) -> dict[int, tuple[int | np.ndarray, np.ndarray]]:
    """The matches kept, best rank first: a buffer is either replaced or kept as the
    target of others, never both."""
    matches: dict[int, tuple[int | np.ndarray, np.ndarray]] = {}
    targets: set[int] = set()
    for rank, b_id, a_id, gamma, gamma_a in sorted(candidates, key=lambda c: c[0]):
        if b_id in matches or b_id in targets:
            continue
        if rank == 1 and gamma_a is not None:
            base = matches.get(a_id, (None, None))[0]
            if a_id not in matches and a_id not in targets:
                base = (floats[b_id] / gamma[None, :]).astype(np.float32)
                matches[a_id] = (base, gamma_a)
            if isinstance(base, np.ndarray) and _scales_to(base, floats[b_id], gamma):
                matches[b_id] = (base, gamma)
            continue
        if a_id in matches:
            continue
        matches[b_id] = (a_id, gamma)
        targets.add(a_id)
    return matches


def _common_unscaled(
    A: np.ndarray, B: np.ndarray, vectors: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray] | None:
    """(γa, γb), graph vectors with ``A / γa == B / γb`` to float32 rounding, or None."""
    for gb in vectors:
        if not np.all(np.isfinite(gb)) or np.any(gb == 0):
            continue
        W = (B / gb[None, :]).astype(np.float32)
        ga = _known_scale(W, A, vectors)
        if ga is not None:
            return ga, gb
    return None


def _column_scale(A: np.ndarray, B: np.ndarray) -> np.ndarray | None:
    """γ with ``B == A * γ`` per input column (to float32 rounding), or None."""
    rows = np.abs(A).argmax(axis=0)
    cols = np.arange(A.shape[1])
    pivot = A[rows, cols]
    if np.any(pivot == 0):
        return None
    gamma = (B[rows, cols] / pivot).astype(np.float32)
    return gamma if _scales_to(A, B, gamma) else None


def _scales_to(A: np.ndarray, B: np.ndarray, gamma: np.ndarray) -> bool:
    scale = float(np.abs(B).max()) or 1.0
    return float(np.abs(A * gamma[None, :] - B).max()) <= 1e-6 * scale


def _known_scale(A: np.ndarray, B: np.ndarray, vectors: list[np.ndarray]) -> np.ndarray | None:
    """The graph constant that reproduces ``B`` from ``A`` as well as the recovered γ."""
    for v in vectors:
        if _scales_to(A, B, v):
            return v
    return None
