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
- ``int8-full``: int8 weights and int8 activations calibrated on real sentences through
  every signature (static min/max), for NNAPI/NPU/DSP delegates.

The word table (V×E) is quantized only with ``--quantize-embeddings``, like the ONNX
route, and then per tensor: per-row scales would cost 12 bytes per row (a float32 scale
and an int64 zero point each, as the schema stores them), 9 % of the table at E=128.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from albert_edge.errors import QuantizationError

WORD_TABLE = "albert.embeddings.word_embeddings.weight"


def _recipe(precision: str, *, per_channel: bool, quantize_embeddings: bool) -> Any:
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
    quantize_embeddings: bool = False,
    calibration: Mapping[str, Iterable[Mapping[str, np.ndarray]]] | None = None,
    threads: int = 2,
) -> bytes:
    """Quantize a float flatbuffer; ``calibration`` maps signature → feeds (int8-full)."""
    import contextlib
    import io

    from ai_edge_quantizer import quantizer

    from albert_edge.tflite import flatbuffer as fb

    for name in ("root", "absl"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if precision == "int8-full":
        model = fb.read_model(model_bytes)
        if fb.bound_mask_fill(model):
            model_bytes = fb.write_model(model)
    q = quantizer.Quantizer(bytearray(model_bytes))
    q.load_quantization_recipe(
        _recipe(precision, per_channel=per_channel, quantize_embeddings=quantize_embeddings)
    )
    result = None
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if q.need_calibration:
            if not calibration:
                raise QuantizationError(
                    "int8-full needs calibration sentences; pass --calibration FILE (SST-2 .tsv "
                    "or one sentence per line)"
                )
            qsv = q.calibrate({k: list(v) for k, v in calibration.items()}, num_threads=threads)
            unify_shared_weight_inputs(model_bytes, qsv)
            bound_softmax_input_ranges(model_bytes, qsv)
            result = q.quantize(qsv, enable_progress_report=False, enable_progress_bar=False)
        else:
            result = q.quantize(enable_progress_report=False, enable_progress_bar=False)
    return bytes(result.quantized_model)


def calibration_feeds(
    tokenizer: Any,
    sentences: list[str],
    seq_lens: list[int],
    *,
    choices_axis: bool = False,
) -> dict[str, list[dict[str, np.ndarray]]]:
    """Per signature, the sentences that fit its bucket (padded to it), as int32 feeds.

    A sentence goes to the smallest bucket it fits, exactly as the runner will route it
    at inference, so each signature is calibrated on the inputs it will see; a bucket
    no sentence fits gets the longest sentences truncated to it.
    """
    from converters.tflite_export import signature_name

    enc = tokenizer.encode(sentences, max_length=max(seq_lens), truncation=True, padding="longest")
    lengths = [int(np.asarray(m).sum()) for m in enc.attention_mask]
    buckets: dict[int, list[int]] = {L: [] for L in seq_lens}
    for i, n in enumerate(lengths):
        buckets[min(L for L in seq_lens if n <= L)].append(i)
    out: dict[str, list[dict[str, np.ndarray]]] = {}
    by_len = sorted(range(len(sentences)), key=lambda i: -lengths[i])
    for L in seq_lens:
        idx = buckets[L] or by_len[: max(1, min(8, len(sentences)))]
        feeds = []
        for i in idx:
            e = tokenizer.encode(
                [sentences[i]], max_length=L, truncation=True, padding="max_length"
            )
            arr = e.as_numpy()
            feed = {
                k: arr[k].astype(np.int32)
                for k in ("input_ids", "attention_mask", "token_type_ids")
            }
            if choices_axis:
                feed = {k: v[:, None, :] for k, v in feed.items()}
            feeds.append(feed)
        out[signature_name(L)] = feeds
    return out


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
    from albert_edge.tflite import flatbuffer as fb

    model = fb.read_model(model_bytes)
    names = fb.builtin_names()
    groups: dict[int, set[str]] = {}
    for sg in model.subgraphs:
        for op in sg.operators:
            if (
                names.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex]))
                != "FULLY_CONNECTED"
            ):
                continue
            x, w = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
            if x.name and w.buffer:
                groups.setdefault(int(w.buffer), set()).add(x.name.decode())
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


# Softmax inputs keep at most this span (in logits) below their calibrated maximum.
SOFTMAX_INPUT_SPAN = 32.0


def bound_softmax_input_ranges(
    model_bytes: bytes, qsv: dict[str, Any], span: float = SOFTMAX_INPUT_SPAN
) -> int:
    """Clip the calibrated range of every SOFTMAX input to ``[max - span, max]``.

    The attention scores reach SOFTMAX through an ADD of the padding mask (-1e4 at
    padded positions, see :func:`albert_edge.tflite.flatbuffer.bound_mask_fill`), so
    min/max calibration gives that tensor a range of ~1e4 and an int8 step of ~40: the
    scores themselves (a span of ~20) would all round to one value. Clipped, padded
    positions saturate at ``max - span`` (weight ≤ e^-span of the row's largest, i.e.
    masked) and real scores keep a step of span/255 ≈ 0.13. Returns tensors clipped.
    """
    from albert_edge.tflite import flatbuffer as fb

    model = fb.read_model(model_bytes)
    names = fb.builtin_names()
    clipped = 0
    for sg in model.subgraphs:
        for op in sg.operators:
            if names.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex])) != "SOFTMAX":
                continue
            t = sg.tensors[op.inputs[0]]
            name = t.name.decode() if t.name else None
            if name is None or name not in qsv or "min" not in qsv[name]:
                continue
            lo, hi = np.asarray(qsv[name]["min"]), np.asarray(qsv[name]["max"])
            if float(np.max(hi) - np.min(lo)) <= span:
                continue
            qsv[name] = {**qsv[name], "min": np.maximum(lo, hi - span).astype(lo.dtype)}
            clipped += 1
    return clipped
