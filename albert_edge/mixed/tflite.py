"""Precision plans for ``--to tflite``: the units of the float flatbuffer, a candidate's
build, and its score in the LiteRT interpreter.

The float graph is convert's own (litert-torch export, then the passes that store every
weight once: :func:`albert_edge.tflite.pipeline.float_passes`); a unit is one weight
buffer every layer and signature reads (:func:`albert_edge.tflite.quantize.plan_units`),
and a candidate is that graph through convert's own quantize passes
(:func:`albert_edge.tflite.pipeline.quantize_passes`) with the plan as the recipe — so
the searched graph is the artifact's graph, byte for byte. Scoring runs the LiteRT
interpreter the runners use (:class:`albert_edge.tflite.runtime.LiteRTRunner`, one
thread: the same logits, so the same plan, on every worker).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from albert_edge.mixed.units import Unit, role_of

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.mixed.setup import Assignment, Setup
    from albert_edge.options import ConvertOptions

# The recipes a TFLite plan builds on, and the precisions a unit may take in each.
TFLITE_BASES: dict[str, tuple[str, ...]] = {
    "int8-dynamic": ("fp32", "int8", "int4"),  # weights only: all three in one graph
    "int8-full": ("fp32", "int8"),  # integer graph; fp32 = the unit's FCs left in float
}
# The least |correlation| with a parameter that names a unit's role (the exporter folds
# LayerNorm's scale and the attention scaling into some weights: 0.99+ measured).
ROLE_CORRELATION = 0.9


def seq_lens_of(ckpt: Checkpoint, options: ConvertOptions) -> tuple[int, ...]:
    """The signature buckets convert would build (``--seq-lens`` or the defaults)."""
    from albert_edge.tflite.pipeline import check_seq_lens, default_seq_lens

    return check_seq_lens(ckpt, tuple(options.seq_lens) or default_seq_lens(ckpt))


def float_graph(ckpt: Checkpoint, options: ConvertOptions) -> bytes:
    """The float flatbuffer every candidate is quantized from (convert's export and float
    passes, so unit names and scopes are the artifact's)."""
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.passes import run_passes
    from albert_edge.tflite.pipeline import float_passes
    from converters.tflite_export import export_litert_torch

    raw = export_litert_torch(ckpt.model, ckpt.head, seq_lens_of(ckpt, options))
    model = fb.read_model(raw)
    run_passes(model, float_passes(ckpt, options))
    return fb.write_model(model)


def _role(weight: np.ndarray, params: dict[str, np.ndarray]) -> str:
    """The role of the parameter ``weight`` stores (as is, transposed or scaled: the
    exporter folds scales into some), by the best |correlation| above
    :data:`ROLE_CORRELATION`; "weight" when none is that close."""
    import numpy as np

    best, name = ROLE_CORRELATION, None
    w = weight.astype(np.float64).ravel()
    w = w - w.mean()
    for n, p in params.items():
        for q in (p, p.T) if p.ndim == 2 else (p,):
            if q.shape != weight.shape:
                continue
            v = q.astype(np.float64).ravel()
            v = v - v.mean()
            denom = float(np.linalg.norm(w) * np.linalg.norm(v))
            c = abs(float(w @ v) / denom) if denom else 0.0
            if c > best:
                best, name = c, n
    return role_of(name) if name else "weight"


def find_tflite_units(model_bytes: bytes, ckpt: Checkpoint, base: str) -> list[Unit]:
    """The units of the float flatbuffer under ``base``: every weight buffer and large
    table for int8-dynamic (a table a decoder reads takes fp32 or int8 only: its decoder
    follows it, per tensor; any other table may also be ``int4-tensor``, int4 with one
    scale, beside ``int4`` in blocks along E); for int8-full the FULLY_CONNECTED weights
    (the table stays the recipe's int8, a lookup has no activation quantizer to leave
    out) and one unit per activation op kind (``ops:SOFTMAX``, ...: no weights, the
    activation quantizers of every op of that kind)."""
    import numpy as np

    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.quantize import int4_table_block, plan_units

    model = fb.read_model(model_bytes)
    params = {n: p.detach().cpu().numpy() for n, p in ckpt.model.named_parameters()}
    widths = TFLITE_BASES[base]
    units = []
    for u in plan_units(model_bytes, activations=base == "int8-full"):
        if u.kind == "OPS":
            role = f"activations of the {u.ops} {u.op_kind} ops"
            units.append(Unit(u.name, role, 0, (), ("fp32", "int8")))
            continue
        if base == "int8-full" and u.kind != "FULLY_CONNECTED":
            continue
        data = np.frombuffer(bytes(model.buffers[u.buffer].data), dtype=np.float32)
        wide = ("fp32", "int8") if u.tied_scopes else widths
        if (
            base == "int8-dynamic"
            and u.kind == "EMBEDDING_LOOKUP"
            and not u.tied_scopes
            and int4_table_block(u.shape[-1], 256)  # else "int4" is per tensor already
        ):
            wide = (*wide, "int4-tensor")  # one scale, no per-block fp16 scales
        units.append(Unit(u.name, _role(data.reshape(u.shape), params), u.params, u.shape, wide))
    return units


def build(setup: Setup, assignment: Assignment) -> bytes:
    """The finished (unsigned) flatbuffer of ``assignment``: the float graph through
    convert's quantize passes with the plan as recipe; the float graph itself when every
    unit is fp32 (the reference)."""
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.passes import run_passes
    from albert_edge.tflite.pipeline import quantize_passes

    if all(p == "fp32" for _, p in assignment):
        return setup.model
    options = replace(setup.options, unit_precisions=assignment, verify=False)
    model = fb.read_model(setup.model)
    run_passes(model, quantize_passes(options, setup.calibration_feeds))
    return fb.write_model(model)


def run_outputs(setup: Setup, model: bytes) -> tuple[dict[str, list[np.ndarray]], float]:
    """(the head's outputs per feature, seconds for the pass) of flatbuffer ``model`` in
    LiteRT (one thread, each feature in the smallest signature that holds it, as the
    runner routes it)."""
    import tempfile
    from pathlib import Path

    from albert_edge.mixed.rows import collect
    from albert_edge.tflite.runtime import LiteRTRunner

    with tempfile.TemporaryDirectory(prefix="albert-edge-plan-") as d:
        path = Path(d) / "candidate.tflite"
        path.write_bytes(model)
        runner = LiteRTRunner(path, threads=1)
        start = time.perf_counter()
        out = collect(setup, runner.run)
        seconds = time.perf_counter() - start
    return out, seconds


def calibration_feeds(ckpt: Checkpoint, options: ConvertOptions) -> Any:
    """int8-full: convert's calibration feeds (per signature), else None."""
    from albert_edge.tflite.pipeline import calibration_feeds_and_record

    feeds, _ = calibration_feeds_and_record(ckpt, options, seq_lens_of(ckpt, options))
    return feeds


def integer_ops(setup: Setup, plan: dict[str, str]) -> dict[str, Any]:
    """The plan's graph's share of compute ops on integers
    (:func:`albert_edge.facts.integer_op_share`, the one count)."""
    from albert_edge.facts import integer_op_share
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.inspect import analyze_model

    data = build(setup, tuple(sorted(plan.items())))
    return integer_op_share(analyze_model(fb.read_model(data), len(data)))
