"""Calibrated ranges corrected before static int8 quantization (``int8-full``).

ai-edge-quantizer calibrates every tensor on its own; two facts of ALBERT it cannot see:
one set of layer weights is applied at every depth and in every signature (its inputs
must share one range, or each application stores its own bias and scale tables:
:func:`unify_shared_weight_inputs`), and the attention mask is an additive constant
that integer kernels can only add at a moderate magnitude (:func:`mask_magnitude`,
:func:`bound_softmax_input_ranges`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def unify_shared_weight_inputs(model_bytes: bytes, qsv: dict[str, Any]) -> int:
    """Give every input of a FULLY_CONNECTED that reads the same weight one range.

    ALBERT applies one set of layer weights L times (and once per signature). Static int8
    stores the bias as int32 at scale ``input_scale × weight_scale``, so if each
    application's input is calibrated separately every application gets its own
    requantized bias and its own per-channel bias scales: 12 bias copies and ~1.1 MB of
    scale tables per signature in an ALBERT-base, 20 % over the floor. Union the
    calibrated ranges of those inputs instead: one input scale per shared weight, so its
    bias and scale tables are identical everywhere and stored once (``dedup_buffers``,
    shared quantization tables in ``write_model``). Returns the number of ranges widened.
    """
    from ai_edge_quantizer.algorithms.utils.common_utils import OpQuantConstraint
    from ai_edge_quantizer.utils.constrained_ops_utils import get_constrained_op_list

    from albert_edge.tflite import flatbuffer as fb

    model = fb.read_model(model_bytes)
    names = fb.builtin_names()
    # The quantizer gives the output of these ops (RESHAPE, SLICE, TRANSPOSE, ...) their
    # input's scale, so an FC input they produce is quantized with its source's range:
    # unify the sources too, or the pooler's input (a SLICE of each signature's last
    # hidden state) keeps one scale, one bias and one scale table per signature.
    same_scale = set(get_constrained_op_list(OpQuantConstraint.SAME_AS_INPUT_SCALE))
    groups: dict[int, set[str]] = {}
    for sg in model.subgraphs:
        producer = {int(o): op for op in sg.operators for o in op.outputs}
        for op in sg.operators:
            if (
                names.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex]))
                != "FULLY_CONNECTED"
            ):
                continue
            x, w = int(op.inputs[0]), sg.tensors[op.inputs[1]]
            if not w.buffer:
                continue
            chain = [x]
            while (p := producer.get(chain[-1])) is not None and names.get(
                fb.opcode_builtin(model.operatorCodes[p.opcodeIndex])
            ) in same_scale:
                chain.append(int(p.inputs[0]))
            for i in chain:
                if sg.tensors[i].name:
                    groups.setdefault(int(w.buffer), set()).add(sg.tensors[i].name.decode())
    widened = 0
    for inputs in groups.values():
        present = [n for n in sorted(inputs) if n in qsv and "min" in qsv[n] and "max" in qsv[n]]
        if len(present) < 2:
            continue
        # Per-tensor activation ranges; shapes differ with the input's rank (keepdims).
        lo = min(float(np.min(qsv[n]["min"])) for n in present)
        hi = max(float(np.max(qsv[n]["max"])) for n in present)
        for n in present:
            old_min, old_max = np.asarray(qsv[n]["min"]), np.asarray(qsv[n]["max"])
            qsv[n] = {**qsv[n], "min": np.full_like(old_min, lo), "max": np.full_like(old_max, hi)}
            widened += 1
    return widened


# int8-full and the padding mask. transformers adds finfo(float32).min at padded key
# positions. Integer kernels cannot: ADD rescales both inputs to a common fixed-point
# scale, and next to a ~1e36 mask scale the attention scores (scale ~0.1) vanish or
# overflow (measured: SST-2 dev 80.4 % → 61.7 %, and with a -1e4 mask some ADDs wrapped
# to +127). So the mask is made as small as masking allows: calibrate once with -1e4
# (MASK_PROBE) to learn the scores' range, then use -(largest score span + MASK_MARGIN).
# Every padded position then sits at least MASK_MARGIN below every real score of its
# row (softmax weight ≤ e^-16 ≈ 1e-7 of a real one), and the mask's int8 scale is of the
# same order as the scores'.
MASK_PROBE = 1.0e4
MASK_MARGIN = 16.0


def _softmax_adds(model: Any) -> list[tuple[Any, Any, Any]]:
    """(subgraph, ADD op, SOFTMAX op) for each SOFTMAX whose input an ADD produces."""
    from albert_edge.tflite import flatbuffer as fb

    names = fb.builtin_names()
    out = []
    for sg in model.subgraphs:
        producer = {int(o): op for op in sg.operators for o in op.outputs}
        for op in sg.operators:
            if names.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex])) != "SOFTMAX":
                continue
            add = producer.get(int(op.inputs[0]))
            if (
                add is not None
                and names.get(fb.opcode_builtin(model.operatorCodes[add.opcodeIndex])) == "ADD"
            ):
                out.append((sg, add, op))
    return out


def _range(sg: Any, index: int, qsv: Mapping[str, Any]) -> tuple[str, float, float] | None:
    t = sg.tensors[index]
    name = t.name.decode() if t.name else None
    if name is None or name not in qsv or "min" not in qsv[name] or "max" not in qsv[name]:
        return None
    return name, float(np.min(qsv[name]["min"])), float(np.max(qsv[name]["max"]))


def _scores_range(sg: Any, add: Any, qsv: Mapping[str, Any]) -> tuple[float, float] | None:
    """Calibrated range of the unmasked operand of a mask ADD (the narrower one)."""
    ranges = [r for r in (_range(sg, int(i), qsv) for i in add.inputs) if r is not None]
    if len(ranges) != 2:
        return None
    _, lo, hi = min(ranges, key=lambda r: r[2] - r[1])
    return lo, hi


def mask_magnitude(
    model_bytes: bytes, qsv: Mapping[str, Any], margin: float = MASK_MARGIN
) -> float | None:
    """The mask magnitude that keeps every padded position ``margin`` below any score."""
    from albert_edge.tflite import flatbuffer as fb

    spans = []
    for sg, add, _ in _softmax_adds(fb.read_model(model_bytes)):
        r = _scores_range(sg, add, qsv)
        if r is not None:
            spans.append(r[1] - r[0])
    if not spans:
        return None
    return float(np.ceil(max(spans) + margin))


def bound_softmax_input_ranges(
    model_bytes: bytes, qsv: dict[str, Any], margin: float = MASK_MARGIN
) -> int:
    """Clip each masked SOFTMAX input's calibrated minimum to (lowest score − margin).

    With the mask of :func:`mask_magnitude`, padded positions land at or below that
    value and saturate there, while real scores keep an int8 step of (span + margin)/255
    instead of (span + mask)/255. Returns the number of tensors clipped.
    """
    from albert_edge.tflite import flatbuffer as fb

    clipped = 0
    for sg, add, softmax in _softmax_adds(fb.read_model(model_bytes)):
        x = _range(sg, int(softmax.inputs[0]), qsv)
        scores = _scores_range(sg, add, qsv)
        if x is None or scores is None:
            continue
        name, lo, _ = x
        new_lo = scores[0] - margin
        if lo >= new_lo:
            continue
        old = np.asarray(qsv[name]["min"])
        qsv[name] = {**qsv[name], "min": np.maximum(old, new_lo).astype(old.dtype)}
        clipped += 1
    return clipped
