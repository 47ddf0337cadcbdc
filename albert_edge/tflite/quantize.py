"""Quantizing a float ``.tflite`` with ai-edge-quantizer (the field's LiteRT quantizer).

Why the post-conversion quantizer and not litert-torch's pt2e ``quant_config``: it works
on the flatbuffer after the weights are already stored once, so every shared ALBERT
weight is quantized once, with one set of scales, for all layers and all signatures
(the quantizer's buffer-sharing check enforces it). The route comparison in
``benchmarks/tflite_routes.py`` measures both.

Recipes (``precision`` → what is stored):

- ``fp16``: FLOAT_CASTING of FULLY_CONNECTED / EMBEDDING_LOOKUP weights to float16 with
  DEQUANTIZE ops in front (what GPU delegates consume natively; CPU dequantizes once).
- ``int8-dynamic``: int8 weights (per output channel, or per tensor with
  ``--per-tensor``), float activations quantized on the fly by the kernels
  (FULLY_CONNECTED hybrid path; fast on XNNPACK).
- ``int8-full``: int8 weights (per tensor unless ``--per-channel``: same accuracy, no
  per-channel weight and bias scale tables; see ``ConvertOptions.weight_per_channel``;
  a weight whose output channels spread over
  :data:`~albert_edge.onnx.quant.recipes.PORTABLE_CHANNEL_SPREAD` is stored per channel
  all the same: :func:`channel_exceptions`) and int8 activations calibrated on real sentences through every signature (static
  min/max), for NNAPI/NPU/DSP delegates. The feeds: :mod:`~albert_edge.tflite.calibration`;
  the calibrated ranges corrected before quantizing: :mod:`~albert_edge.tflite.calibrated_ranges`.

The word table (V×E) is quantized by default (``--keep-embeddings-wide`` keeps it
float), like the ONNX route, and per tensor: per-row scales would cost 12 bytes per row (a float32 scale
and an int64 zero point each, as the schema stores them), 9 % of the table at E=128.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from albert_edge.errors import QuantizationError

WORD_TABLE = "albert.embeddings.word_embeddings.weight"


def tied_table_readers(model_bytes: bytes) -> list[str]:
    """Output names of the FULLY_CONNECTED ops whose weight is also an EMBEDDING_LOOKUP
    table (the MLM decoder tied to the word table, once ``unfold_scaled_copies`` re-tied it).
    """
    from albert_edge.tflite import flatbuffer as fb

    model = fb.read_model(model_bytes)
    names = fb.builtin_names()

    def kind(op: Any) -> str | None:
        return names.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex]))

    tables = {
        int(sg.tensors[op.inputs[1]].buffer)
        for sg in model.subgraphs
        for op in sg.operators
        if kind(op) == "EMBEDDING_LOOKUP"
    }
    return sorted(
        sg.tensors[op.outputs[0]].name.decode()
        for sg in model.subgraphs
        for op in sg.operators
        if kind(op) == "FULLY_CONNECTED"
        and int(sg.tensors[op.inputs[1]].buffer) in tables
        and sg.tensors[op.outputs[0]].name
    )


def _recipe(
    precision: str,
    *,
    per_channel: bool,
    quantize_embeddings: bool,
    tied: list[str] | None = None,
) -> Any:
    """The ai-edge-quantizer recipe. ``tied``: outputs of FCs that read an embedding table;
    with embeddings quantized they take the table's per-tensor scale (the latest matching
    recipe entry wins), so the tied table is quantized to the same bytes and stored once
    — per channel it would be a second V×E int8 table."""
    import re

    from ai_edge_quantizer import qtyping, recipe_manager

    op = qtyping.TFLOperationName
    gran = (
        qtyping.QuantGranularity.CHANNELWISE if per_channel else qtyping.QuantGranularity.TENSORWISE
    )
    rm = recipe_manager.RecipeManager()
    if precision == "fp16":
        for name in (op.FULLY_CONNECTED, op.EMBEDDING_LOOKUP):
            rm.add_weight_only_config(
                regex=".*", operation_name=name, num_bits=16, algorithm_key="float_casting"
            )
    elif precision == "int8-dynamic":
        rm.add_dynamic_config(
            regex=".*", operation_name=op.FULLY_CONNECTED, num_bits=8, granularity=gran
        )
        if quantize_embeddings:
            rm.add_dynamic_config(
                regex=".*",
                operation_name=op.EMBEDDING_LOOKUP,
                num_bits=8,
                granularity=qtyping.QuantGranularity.TENSORWISE,
            )
            for name in tied or []:
                rm.add_dynamic_config(
                    regex=f"^{re.escape(name)};$",  # the quantizer's op scope: "out;"
                    operation_name=op.FULLY_CONNECTED,
                    num_bits=8,
                    granularity=qtyping.QuantGranularity.TENSORWISE,
                )
    elif precision == "int8-full":
        rm.add_static_config(
            regex=".*",
            operation_name=op.ALL_SUPPORTED,
            activation_num_bits=8,
            weight_num_bits=8,
            weight_granularity=gran,
        )
        if quantize_embeddings:
            # EMBEDDING_LOOKUP has no integer-compute kernel with quantized activations in
            # the quantizer; its table is quantized like dynamic range (int8 table, the
            # gathered rows dequantized), and the QUANTIZE after it feeds the int8 graph.
            rm.add_dynamic_config(
                regex=".*",
                operation_name=op.EMBEDDING_LOOKUP,
                num_bits=8,
                granularity=qtyping.QuantGranularity.TENSORWISE,
            )
    else:
        raise QuantizationError(f"no TFLite quantization recipe for precision {precision!r}")
    return rm.get_quantization_recipe()


def quantize_flatbuffer(
    model_bytes: bytes,
    precision: str,
    *,
    per_channel: bool = True,
    quantize_embeddings: bool = True,
    calibration: Mapping[str, Iterable[Mapping[str, np.ndarray]]] | None = None,
    threads: int = 2,
    unit_precisions: Mapping[str, str] | None = None,
    block_size: int = 256,
    channel_weights: Mapping[str, float] | None = None,
) -> bytes:
    """Quantize a float flatbuffer; ``calibration`` maps signature → feeds (int8-full).

    ``channel_weights``: the weights stored per channel all the same under int8-full's
    per-tensor recipe (:func:`full_channel_weights`, computed once by the caller, which
    also records them); None: every weight as ``per_channel`` says (``--per-tensor`` /
    ``--per-channel`` given).

    ``unit_precisions``: a precision plan (unit name → fp32/int8/int4/int4-tensor,
    :func:`plan_units`)
    applied with :func:`plan_recipe` on the ``precision`` recipe instead of one width for
    every weight."""
    import contextlib
    import io

    from ai_edge_quantizer import quantizer

    for name in ("root", "absl"):
        logging.getLogger(name).setLevel(logging.ERROR)
    recipe = _flatbuffer_recipe(
        model_bytes,
        precision,
        per_channel=per_channel,
        quantize_embeddings=quantize_embeddings,
        unit_precisions=unit_precisions,
        block_size=block_size,
        channel_weights=channel_weights,
    )
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if precision != "int8-full":
            q = quantizer.Quantizer(bytearray(model_bytes))
            q.load_quantization_recipe(recipe)
            result = q.quantize(enable_progress_report=False, enable_progress_bar=False)
            return bytes(result.quantized_model)
        if not calibration:
            raise QuantizationError(
                "int8-full needs calibration sentences; pass --calibration FILE (SST-2 .tsv "
                "or one sentence per line)"
            )
        return _quantize_static(model_bytes, recipe, calibration, threads)


def _flatbuffer_recipe(
    model_bytes: bytes,
    precision: str,
    *,
    per_channel: bool,
    quantize_embeddings: bool,
    unit_precisions: Mapping[str, str] | None,
    block_size: int,
    channel_weights: Mapping[str, float] | None = None,
) -> Any:
    """The recipe :func:`quantize_flatbuffer` applies: a precision plan's (refused when it
    names a weight the graph lacks), else the precision's one-width recipe; with
    ``channel_weights``, a per-channel entry for each of them."""
    if unit_precisions is None:
        recipe = _recipe(
            precision,
            per_channel=per_channel,
            quantize_embeddings=quantize_embeddings,
            tied=tied_table_readers(model_bytes),
        )
        if not channel_weights:
            return recipe
        return _with_channel_exceptions(recipe, plan_units(model_bytes), channel_weights)
    units = plan_units(model_bytes, activations=precision == "int8-full")
    lacking = sorted(set(unit_precisions) - {u.name for u in units})
    if lacking:
        raise QuantizationError(
            f"the precision plan names {len(lacking)} weight(s) this graph lacks "
            f"({', '.join(lacking[:3])}); search a plan for this model"
        )
    recipe = plan_recipe(
        units,
        unit_precisions,
        precision,
        per_channel=per_channel,
        block_size=block_size,
        quantize_embeddings=quantize_embeddings,
    )
    return _with_channel_exceptions(recipe, units, channel_weights or {})


def full_channel_weights(
    model_bytes: bytes,
    precision: str,
    *,
    per_channel: bool,
    unit_precisions: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """The weights :func:`quantize_flatbuffer` stores per channel under int8-full's
    per-tensor recipe (none for another precision or with ``per_channel``): the
    :func:`channel_exceptions` of the weights a precision plan does not keep in float."""
    if precision != "int8-full" or per_channel:
        return {}
    kept = [u for u in plan_units(model_bytes) if (unit_precisions or {}).get(u.name) != "fp32"]
    return channel_exceptions(model_bytes, kept)


def stored_channel_spreads(model: Any) -> dict[str, float]:
    """Each int8 FULLY_CONNECTED weight of a quantized ``model`` (a ``ModelT``) stored
    with one scale per output channel, with its spread read back from the file: its
    largest scale over its median one (a symmetric channel's scale is its max |w| / 127,
    so this is :func:`channel_exceptions`' spread as stored)."""
    from albert_edge.onnx.quant.recipes import spread_of
    from albert_edge.tflite import flatbuffer as fb

    kinds, types, fc = fb.builtin_names(), fb.tensor_type_names(), "FULLY_CONNECTED"
    out: dict[str, float] = {}
    for sg in model.subgraphs:
        producer = {int(o): op for op in sg.operators for o in op.outputs}
        for op in sg.operators:
            if kinds.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex])) != fc:
                continue
            t = sg.tensors[stored_weight(model, op, producer, kinds)]
            q = t.quantization
            if types.get(t.type) != "INT8" or q is None or q.scale is None or len(q.scale) < 2:
                continue
            out[t.name.decode() if t.name else f"buffer{int(t.buffer)}"] = spread_of(
                np.asarray(q.scale)
            )
    return out


def stored_weight(
    model: Any, op: Any, producer: Mapping[int, Any], kinds: Mapping[int, str]
) -> int:
    """The tensor index of the weight ``op`` reads as its second input, as stored: through
    the DEQUANTIZE the quantizer puts in front of a weight computed in float.
    ``producer``: the subgraph's output tensor index → op; ``kinds``: builtin code → name."""
    from albert_edge.tflite import flatbuffer as fb

    w = int(op.inputs[1])
    src = producer.get(w)
    if (
        src is not None
        and kinds.get(fb.opcode_builtin(model.operatorCodes[src.opcodeIndex])) == "DEQUANTIZE"
    ):
        return int(src.inputs[0])
    return w


def channel_exceptions(
    model_bytes: bytes, units: Iterable[PlanUnit] | None = None
) -> dict[str, float]:
    """The weights a per-tensor int8 recipe stores per channel all the same: each
    FULLY_CONNECTED unit (:func:`plan_units`; ``units``: of those, these) whose output
    channels — the rows of LiteRT's ``[out, in]`` weight — spread over
    :data:`~albert_edge.onnx.quant.recipes.PORTABLE_CHANNEL_SPREAD` (largest row max |w|
    over the median row's), each with its spread.

    Why: the rule ONNX's portable recipe applies, judged from the values alone, on the same
    evidence. One 8-bit scale for a weight whose largest channel is r times its median one
    leaves the median channel 127 / r levels; a student whose layers start from a
    pretrained encoder's carries that encoder's outlier dimension (group 0's FFN output
    spread 22.8x, benchmarks/results/teacher.md), while every weight of the models
    trained from scratch here spreads 1.0-3.0x and keeps its one scale."""
    from albert_edge.onnx.quant.recipes import PORTABLE_CHANNEL_SPREAD, spread_of
    from albert_edge.tflite import flatbuffer as fb

    model = fb.read_model(model_bytes)
    out: dict[str, float] = {}
    for u in plan_units(model_bytes) if units is None else units:
        if u.kind != "FULLY_CONNECTED" or len(u.shape) != 2:
            continue
        raw = fb.buffer_bytes(model, u.buffer)
        w = np.frombuffer(raw, dtype=np.float32).reshape(u.shape)
        spread = spread_of(np.abs(w.astype(np.float64)).max(axis=1))
        if spread > PORTABLE_CHANNEL_SPREAD:
            out[u.name] = spread
    return out


def _with_channel_exceptions(
    recipe: Any, units: Iterable[PlanUnit], names: Mapping[str, float]
) -> Any:
    """The int8-full ``recipe`` with one later entry per weight in ``names``: the same
    static int8 config, its weight per channel (the latest matching entry wins), its regex
    the exact scopes of every op reading that weight, so all layers and signatures that
    share it keep one buffer with one table of scales."""
    if not names:
        return recipe
    from ai_edge_quantizer import qtyping, recipe_manager

    manager = recipe_manager.RecipeManager()
    manager.load_quantization_recipe(recipe)
    for u in units:
        if u.name in names:
            manager.add_static_config(
                regex=_exactly(u.scopes),
                operation_name=qtyping.TFLOperationName.FULLY_CONNECTED,
                activation_num_bits=8,
                weight_num_bits=8,
                weight_granularity=qtyping.QuantGranularity.CHANNELWISE,
            )
    return manager.get_quantization_recipe()


def _quantize_static(
    model_bytes: bytes,
    recipe: Any,
    calibration: Mapping[str, Iterable[Mapping[str, np.ndarray]]],
    threads: int,
) -> bytes:
    """int8-full: calibrate (twice where the graph has an attention mask: once to learn the
    scores' range, once with the smallest mask that still masks), correct the ranges
    (:mod:`~albert_edge.tflite.calibrated_ranges`), quantize."""
    from ai_edge_quantizer import quantizer

    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.calibrated_ranges import (
        MASK_PROBE,
        bound_softmax_input_ranges,
        mask_magnitude,
        unify_shared_weight_inputs,
    )

    def _calibrated(data: bytes) -> tuple[Any, dict[str, Any]]:
        q = quantizer.Quantizer(bytearray(data))
        q.load_quantization_recipe(recipe)
        qsv = q.calibrate({k: list(v) for k, v in calibration.items()}, num_threads=threads)
        return q, qsv

    # Pass 1: a finite mask (-1e4) so that calibration sees the attention scores' range.
    model = fb.read_model(model_bytes)
    if fb.bound_mask_fill(model, value=-MASK_PROBE):
        model_bytes = fb.write_model(model)
        _, qsv = _calibrated(model_bytes)
        # Pass 2: the smallest mask that still masks, so int8 kernels can add it.
        magnitude = mask_magnitude(model_bytes, qsv)
        if magnitude is not None:
            model = fb.read_model(model_bytes)
            fb.bound_mask_fill(model, value=-magnitude, below=-MASK_PROBE)
            model_bytes = fb.write_model(model)
    q, qsv = _calibrated(model_bytes)
    unify_shared_weight_inputs(model_bytes, qsv)
    bound_softmax_input_ranges(model_bytes, qsv)
    result = q.quantize(qsv, enable_progress_report=False, enable_progress_bar=False)
    return bytes(result.quantized_model)


# --- precision plans: one recipe entry per unique weight ----------------------------------

# Tables an EMBEDDING_LOOKUP reads with fewer rows than this (the 2-row token-type table)
# are no unit: no recipe entry pays for itself there, and every plan leaves them float32.
MIN_TABLE_ROWS = 16
# Block sizes the quantizer offers for blockwise int4 (QuantGranularity.BLOCKWISE_*).
INT4_BLOCKS = (32, 64, 128, 256)


@dataclass(frozen=True)
class PlanUnit:
    """One unique weight of a float flatbuffer: the buffer every reader shares, the
    tensor name it is known by, its shape, and the op scopes (the quantizer's regex
    target: an op's output names joined by ";") of the ops reading it, by op kind."""

    name: str
    buffer: int  # -1 for an OPS unit (no weight)
    # FULLY_CONNECTED (a weight), EMBEDDING_LOOKUP (a table) or OPS (the activation
    # quantizers of every op of one kind, ``ops:KIND``: :func:`activation_units`)
    kind: str
    shape: tuple[int, ...]
    scopes: tuple[str, ...]
    tied_scopes: tuple[str, ...] = ()  # FULLY_CONNECTED readers of a table (tied decoder)
    ops: int = 0  # OPS: how many ops of that kind the graph holds

    @property
    def params(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 0

    @property
    def op_kind(self) -> str:
        """The op kind an OPS unit decides (``SOFTMAX`` for ``ops:SOFTMAX``)."""
        return self.name.removeprefix(OP_GROUP_PREFIX)


def _scope(sg: Any, op: Any) -> str:
    names = [sg.tensors[o].name.decode() for o in op.outputs if o >= 0 and sg.tensors[o].name]
    return ";".join(names) + (";" if names else "")


def _unit_name(names: set[str]) -> str:
    """The unit's name among its readers' weight tensor names: a parameter's name when one
    reader carries it (``compact_names`` names weights after the parameter they equal),
    else the first converter name — the same for the same graph, so a plan replays."""
    params = sorted(n for n in names if n.endswith(".weight"))
    return params[0] if params else sorted(names)[0]


def plan_units(model_bytes: bytes, *, activations: bool = False) -> list[PlanUnit]:
    """The units of a float flatbuffer a precision plan decides: each constant
    FULLY_CONNECTED weight buffer once (however many layers and signatures read it) and
    each EMBEDDING_LOOKUP table of at least :data:`MIN_TABLE_ROWS` rows (a FULLY_CONNECTED
    reading a table is the tied decoder: it joins the table's unit); with
    ``activations`` (an ``int8-full`` plan) also one OPS unit per activation op kind
    (:func:`activation_units`). Ordered: tables, then weights, each by name, then the OPS
    units. A scope shared by readers of two buffers would let one unit's recipe entry
    reach the other's ops: refused (:class:`QuantizationError`)."""
    from albert_edge.tflite import flatbuffer as fb

    model = fb.read_model(model_bytes)
    kinds = fb.builtin_names()
    readers: dict[int, dict[str, Any]] = {}
    owner: dict[str, int] = {}
    for sg in model.subgraphs:
        for op in sg.operators:
            kind = kinds.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex]))
            if kind not in ("FULLY_CONNECTED", "EMBEDDING_LOOKUP") or len(op.inputs) < 2:
                continue
            w = sg.tensors[op.inputs[1]]
            data = model.buffers[int(w.buffer)].data if w.buffer else None
            if data is None or not len(data) or fb.tensor_type_names().get(w.type) != "FLOAT32":
                continue
            r = readers.setdefault(
                int(w.buffer), {"kinds": set(), "names": set(), "shape": tuple(w.shape)}
            )
            r["kinds"].add(kind)
            r["names"].add(w.name.decode() if w.name else f"buffer{int(w.buffer)}")
            r.setdefault(kind, []).append(_scope(sg, op))
    units = []
    for buf, r in readers.items():
        table = "EMBEDDING_LOOKUP" in r["kinds"]
        if table and int(r["shape"][0]) < MIN_TABLE_ROWS:
            continue
        kind = "EMBEDDING_LOOKUP" if table else "FULLY_CONNECTED"
        for s in r.get("EMBEDDING_LOOKUP", []) + r.get("FULLY_CONNECTED", []):
            if owner.setdefault(s, buf) != buf:
                raise QuantizationError(
                    f"op scope {s!r} names readers of two weights; a precision plan cannot "
                    "address them apart (a bug in albert-edge; report it)"
                )
        units.append(
            PlanUnit(
                _unit_name(r["names"]),
                buf,
                kind,
                tuple(int(d) for d in r["shape"]),
                tuple(sorted(r.get(kind, []))),
                tuple(sorted(r.get("FULLY_CONNECTED", []))) if table else (),
            )
        )
    units = sorted(units, key=lambda u: (u.kind != "EMBEDDING_LOOKUP", u.name))
    return [*units, *activation_units(model)] if activations else units


OP_GROUP_PREFIX = "ops:"
# The ops whose activation quantizers an int8-full fallback may leave in float, a unit per
# kind ("ops:SOFTMAX": every SOFTMAX of the graph). Layout ops (RESHAPE, TRANSPOSE, SLICE)
# only pass their input's scale on; FULLY_CONNECTED is decided per weight.
ACTIVATION_OP_KINDS = (
    "ADD",
    "BATCH_MATMUL",
    "GELU",
    "MEAN",
    "MUL",
    "RSQRT",
    "SELECT_V2",
    "SOFTMAX",
    "SQUARED_DIFFERENCE",
    "SUB",
    "SUM",
    "TANH",
)


def activation_units(model: Any) -> list[PlanUnit]:
    """One OPS unit (``ops:KIND``) for each of :data:`ACTIVATION_OP_KINDS` the float
    flatbuffer ``model`` (a ``ModelT``) holds: the activation-quantizer units of an
    ``int8-full`` plan, beside its weights. A kind is one unit because ALBERT applies the
    same layer at every depth: the softmax of layer 3 is the softmax of layer 1, so one
    decision moves all of them."""
    from collections import Counter

    from albert_edge.tflite import flatbuffer as fb

    kinds = fb.builtin_names()
    n = Counter(
        kinds.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex]))
        for sg in model.subgraphs
        for op in sg.operators
    )
    return [
        PlanUnit(OP_GROUP_PREFIX + k, -1, "OPS", (), (), ops=n[k])
        for k in ACTIVATION_OP_KINDS
        if n[k]
    ]


def _exactly(scopes: Iterable[str]) -> str:
    """A regex matching exactly these op scopes (the quantizer ``re.search``es it)."""
    import re

    return "^(?:" + "|".join(re.escape(s) for s in sorted(scopes)) + ")$"


def int4_table_block(dim: int, block_size: int) -> int:
    """The int4 table's block: the largest offered block <= ``block_size`` dividing the
    row length (E), else the smallest one dividing it; 0 (per tensor) when none does."""
    fits = [b for b in INT4_BLOCKS if dim % b == 0]
    under = [b for b in fits if b <= block_size]
    return max(under) if under else (min(fits) if fits else 0)


def plan_recipe(
    units: Iterable[PlanUnit],
    precisions: Mapping[str, str],
    base: str,
    *,
    per_channel: bool,
    block_size: int,
    quantize_embeddings: bool = True,
) -> Any:
    """The ai-edge-quantizer recipe of a precision plan: one entry per unit, its regex the
    exact scopes of the ops reading that weight, so every layer and signature reading a
    shared weight gets the same precision (and the weight stays one buffer).

    ``int8-dynamic`` base (weights only; activations float): a unit at ``int8`` is the
    int8-dynamic recipe's entry (FULLY_CONNECTED per channel as ``per_channel`` says; a
    table per tensor); at ``int4`` a FULLY_CONNECTED weight is int4 per channel (LiteRT's
    hybrid FULLY_CONNECTED runs it in XNNPACK and in the builtin kernels alike; its
    blockwise form measured 0.29 logit apart between the two, so it is not used) and a
    table is int4 in blocks along E (:func:`int4_table_block`: the gathered rows are
    dequantized; the schema stores a float16 scale per block); at ``int4-tensor`` a
    table is int4 with one scale (per tensor a 16-level table moved logits by 0.06 on the
    embedded model, blocks of 64 by 0.025, so the search measures both: on E = 64 the
    blocks' scales are a row's fp16 each, 60 kB on a 30,000-row table); at ``fp32`` no
    entry. A table a decoder reads (tied) quantizes its decoder with it, per tensor, so
    the bytes stay one buffer.

    ``int8-full`` base: the int8-full recipe, then a ``no_quantize`` entry for each unit
    at ``fp32``: its FULLY_CONNECTED ops compute in float (the quantizer puts a
    DEQUANTIZE before and a QUANTIZE after them) — the activation quantizers a fallback
    leaves out; an OPS unit (``ops:KIND``) at ``fp32`` (:func:`activation_units`) does
    the same for every op of that kind."""
    units = list(units)
    if base == "int8-full":
        return _full_plan_recipe(units, precisions, per_channel, quantize_embeddings)
    if base != "int8-dynamic":
        raise QuantizationError(f"no TFLite precision plan on {base!r}")
    return _dynamic_plan_recipe(units, precisions, per_channel, block_size)


def _full_plan_recipe(
    units: list[PlanUnit],
    precisions: Mapping[str, str],
    per_channel: bool,
    quantize_embeddings: bool,
) -> Any:
    """The int8-full recipe with a ``no_quantize`` entry per unit the plan keeps at fp32."""
    from ai_edge_quantizer import algorithm_manager, qtyping, recipe_manager

    op = qtyping.TFLOperationName
    rm = _recipe("int8-full", per_channel=per_channel, quantize_embeddings=quantize_embeddings)
    manager = recipe_manager.RecipeManager()
    manager.load_quantization_recipe(rm)
    for u in units:
        if precisions.get(u.name, "int8") != "fp32":
            continue
        if u.kind == "FULLY_CONNECTED":
            manager.add_quantization_config(
                regex=_exactly(u.scopes),
                operation_name=op.FULLY_CONNECTED,
                algorithm_key=algorithm_manager.AlgorithmName.NO_QUANTIZE,
            )
        elif u.kind == "OPS":
            manager.add_quantization_config(
                regex=".*",
                operation_name=op[u.op_kind],
                algorithm_key=algorithm_manager.AlgorithmName.NO_QUANTIZE,
            )
    return manager.get_quantization_recipe()


def _dynamic_plan_recipe(
    units: list[PlanUnit], precisions: Mapping[str, str], per_channel: bool, block_size: int
) -> Any:
    """A weight-only recipe entry per unit the plan stores at int8 or int4 (none at fp32)."""
    from ai_edge_quantizer import qtyping, recipe_manager

    op = qtyping.TFLOperationName
    gran = qtyping.QuantGranularity
    rm = recipe_manager.RecipeManager()
    fc_int8 = gran.CHANNELWISE if per_channel else gran.TENSORWISE
    for u in units:
        p = precisions.get(u.name, "fp32")
        if p == "fp32":
            continue
        bits = 4 if p.startswith("int4") else 8
        if u.kind == "FULLY_CONNECTED":
            rm.add_dynamic_config(
                regex=_exactly(u.scopes),
                operation_name=op.FULLY_CONNECTED,
                num_bits=bits,
                granularity=gran.CHANNELWISE if bits == 4 else fc_int8,
            )
            continue
        block = int4_table_block(u.shape[-1], block_size) if p == "int4" else 0
        rm.add_dynamic_config(
            regex=_exactly(u.scopes),
            operation_name=op.EMBEDDING_LOOKUP,
            num_bits=bits,
            granularity=gran(f"BLOCKWISE_{block}") if block else gran.TENSORWISE,
        )
        if u.tied_scopes:
            rm.add_dynamic_config(
                regex=_exactly(u.tied_scopes),
                operation_name=op.FULLY_CONNECTED,
                num_bits=bits,
                granularity=gran.TENSORWISE,
            )
    return rm.get_quantization_recipe()


def check_plan_types(
    model: Any, units: Iterable[PlanUnit], precisions: Mapping[str, str]
) -> str | None:
    """Why the quantized ``model`` does not store each planned weight at its precision
    (None when it does): every reader of a unit reads an INT4 / INT8 / FLOAT32 tensor as
    its plan says (through a DEQUANTIZE where the quantizer puts one)."""
    from albert_edge.tflite import flatbuffer as fb

    want = {"fp32": "FLOAT32", "int8": "INT8", "int4": "INT4", "int4-tensor": "INT4"}
    types, kinds = fb.tensor_type_names(), fb.builtin_names()
    units = list(units)
    by_scope = {s: u for u in units for s in (*u.scopes, *u.tied_scopes)}
    for sg in model.subgraphs:
        producer = {int(o): op for op in sg.operators for o in op.outputs}
        for op in sg.operators:
            u = by_scope.get(_scope(sg, op))
            if u is None or u.name not in precisions:  # a unit the plan leaves to the recipe
                continue
            w = stored_weight(model, op, producer, kinds)
            p = precisions[u.name]
            have = types.get(sg.tensors[w].type)
            if have != want[p]:
                return f"{u.name} is read as {have}, its plan says {p}"
            q = sg.tensors[w].quantization
            if p == "int4-tensor" and (
                q is None or q.scale is None or len(q.scale) != 1 or q.detailsType
            ):
                return f"{u.name} is not stored with one scale, its plan says {p}"
    groups = {
        u.op_kind: precisions[u.name] for u in units if u.kind == "OPS" and u.name in precisions
    }
    for sg in model.subgraphs:
        for op in sg.operators:
            kind = kinds.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex]))
            if kind not in groups or len(op.outputs) == 0:
                continue
            have = types.get(sg.tensors[int(op.outputs[0])].type)
            if have != want[groups[kind]]:
                return f"ops:{kind} computes in {have}, its plan says {groups[kind]}"
    return None
