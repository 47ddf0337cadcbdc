"""Quantizing ALBERT ONNX graphs: int8-dynamic, int8-static (QDQ), int4, fp16.

Each precision is a named, frozen recipe (:mod:`albert_edge.onnx.quant.recipes`)
run as onnx_ir passes (:func:`build_passes`), on the ``onnx_ir`` model the export
produced: the graph becomes a protobuf only where ONNX Runtime takes one. The
quantizers are ONNX Runtime's own (``quantize_dynamic``, ``quantize_static``, ``MatMulNBitsQuantizer``, the transformers float16 converter). What
albert-edge adds is the part that keeps ALBERT small, checked as postconditions on every
result:

1. every consumer reads a shared weight straight from one initializer before the
   quantizer runs (``quant-prepare``), so a shared weight is quantized once and all its
   L consumers read the one quantized tensor;
2. per-consumer copies the quantizers emit anyway are merged afterwards
   (``quant-dedup``);
3. every weight MatMul — all layers, the fused Attention's QKV too — computes quantized
   (no ``float_matmuls`` in :func:`albert_edge.onnx.inspect.matmul_counts`, the one
   count: integer weights, fp16 ones for fp16), no two initializers hold the same bytes,
   and the weights total at most 1.05 × the bytes they need at best (unique parameters
   at the precision's bytes plus scales and zero points:
   :func:`~albert_edge.onnx.quant.plan.stored_weights_floor`);
4. the written file loads in ONNX Runtime on this machine (a precision the runtime
   cannot run fails at convert, not on a user's device; checked on the file itself,
   :func:`~albert_edge.onnx.quant.check.check_written`).

Any broken postcondition raises :class:`QuantizationError`; nothing is written. This
module is the front: options, the pass list, the manifest's report
(``albert-edge quantize`` is :mod:`albert_edge.onnx.quant.artifact`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from albert_edge.data import Calibration, input_file_record
from albert_edge.errors import QuantizationError, UnsupportedError
from albert_edge.onnx.quant.plan import codes_block, int4_block_size
from albert_edge.onnx.quant.recipes import (
    SATURATION_FREE_MAX_ABS,
    QuantRecipe,
    hints_note,
    int8_recipe,
    recipe,
    runtime_hints,
)
from albert_edge.onnx.quant.state import QuantState, quiet
from albert_edge.options import DEFAULT_CALIBRATION, DEFAULT_CALIBRATION_SOURCE

if TYPE_CHECKING:
    import onnx
    import onnx_ir as ir

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.options import ConvertOptions
    from albert_edge.tokenizer import AlbertTokenizer

__all__ = [
    "DEFAULT_CALIBRATION",
    "QUANT_PRECISIONS",
    "build_passes",
    "calibration_file",
    "check_options",
    "load_calibration",
    "quantize_model",
]

QUANT_PRECISIONS = ("int8-dynamic", "int8-static", "int4", "fp16")
# Said plainly wherever int4 is produced (manifest + convert report), per --int4-kernel:
# measured, not hoped (the figures and their runs: docs/precisions.md).
INT4_SPEED_NOTES = {
    "int8": (
        "int4 (--int4-kernel int8) stores 4-bit codes and computes with int8-dynamic's "
        "kernels: ONNX Runtime folds the codes to int8 at load, so it runs at int8-dynamic's "
        "speed (AMD EPYC, x86-vnni, 2 threads, albert-base seq 128: 39.9 vs 38.5 ms p50, "
        "36.7 vs 36.5 ms min; fp32 127.8 ms), faster than fp32 at every length 8-512, at "
        "half int8's file size (5.98 vs 11.82 MB; benchmarks/results/precisions.md). Once "
        "loaded it is the int8 model in memory; the unpacking raises peak memory at load "
        "(157 vs 96 MB) and load time (153 vs 99 ms). --int4-kernel nbits keeps 4-bit "
        "weights in memory at about half the speed"
    ),
    "nbits": (
        "int4 (--int4-kernel nbits) runs ONNX Runtime's MatMulNBits (accuracy level 4): on "
        "the x86 CPU measured (AMD EPYC, x86-vnni, 2 threads) about half int8-dynamic's "
        "speed (albert-base, seq 128: 64.7 vs 37.7 ms; fp32 119.1 ms) and slower than fp32 "
        "on small hidden sizes (H=128); it keeps 4-bit weights in memory (albert-base peak "
        "85 MB) and is the form ONNX Runtime's GPU and ARM int4 kernels take"
    ),
}
INT4_SIZE_NOTES = {
    "int8": (
        "int4 stores 4-bit codes plus what the floor (parameters x 0.5 bytes) does not "
        "count: a one-byte multiplier per block of every weight and its int8 scale, the "
        "word table's row scales (4 bits per row where a byte would cost over 2 % of the "
        "row), fp32 biases/LayerNorm and the graph itself: albert-base 1.024x its floor, "
        "the trained tiny model 1.040x (benchmarks/results/precisions.md)"
    ),
    "nbits": (
        "int4 stores 4-bit codes plus fixed costs the floor (parameters x 0.5 bytes) does "
        "not count: an fp32 scale per block (up to 256 values) of every MatMulNBits weight, "
        "a one-byte scale per word-table row, fp32 biases/LayerNorm and the graph itself "
        "(benchmarks/results/int4_floor.md)"
    ),
}

EMBEDDINGS_FP32 = (
    "The V×E word-embedding table stays fp32 (--keep-embeddings-wide; by default it is "
    "stored at the quantized precision); it is still factorized (V×E table + E×H projection)."
)


def check_options(options: ConvertOptions) -> None:
    """Refuse option combinations the ONNX quantizers cannot honour (and unreadable
    calibration files), before any work."""
    if options.target != "onnx":
        raise UnsupportedError(f"albert-edge's ONNX quantizer cannot produce --to {options.target}")
    if options.precision not in QUANT_PRECISIONS:
        raise UnsupportedError(
            f"precision {options.precision!r} is not a quantized precision; choose one of "
            + ", ".join(QUANT_PRECISIONS)
        )
    if options.calibration is not None and options.precision != "int8-static":
        raise UnsupportedError(
            f"--calibration applies to --precision int8-static only, not {options.precision}; "
            "drop --calibration"
        )
    if options.per_channel is False and not (
        options.precision.startswith("int8") or options.int4_folded
    ):
        raise UnsupportedError(
            f"--per-tensor applies to int8 precisions and int4 on int8 kernels only, not "
            f"{options.precision}; drop --per-tensor"
        )
    # A missing, empty or binary calibration file fails here, before any export work;
    # without --calibration, int8-static calibrates on the packaged SST-2 train sample.
    load_calibration(options)


def calibration_file(options: ConvertOptions) -> Path | None:
    """The file int8-static calibrates on: ``--calibration``, else :data:`DEFAULT_CALIBRATION`
    (None for the other precisions, which calibrate on nothing)."""
    if options.precision != "int8-static":
        return None
    return Path(options.calibration) if options.calibration is not None else DEFAULT_CALIBRATION


def load_calibration(options: ConvertOptions, ckpt: Checkpoint | None = None) -> Calibration | None:
    """The calibration examples (int8-static) of ``--calibration`` (any task's file, or
    plain sentences) or the packaged SST-2 sample, validated before any model work; with
    ``ckpt``, also refused where they do not fit its head (a SQuAD file for a classifier,
    SST-2 sentences for a question-answering model: :meth:`Calibration.check_fits`)."""
    path = calibration_file(options)
    if path is None:
        return None
    from albert_edge.data import read_calibration

    cal = read_calibration(path, options.num_calibration, default=options.calibration is None)
    if ckpt is not None:
        from dataclasses import replace

        from albert_edge.torch_model import trained_length

        # a task's windows at the length the model was fine-tuned at, as verify encodes them
        cal = replace(cal, max_len=trained_length(ckpt))
        cfg = ckpt.config
        cal.check_fits(
            ckpt.head.name,
            finetuning_task=getattr(cfg, "finetuning_task", None),
            num_labels=int(cfg.num_labels),
            model=ckpt.path,
        )
    return cal


def _target_report(options: ConvertOptions) -> dict[str, Any]:
    """The manifest's record of which int8 recipe was chosen, and where it is right."""
    r = int8_recipe(options.runs_on)
    return {
        "target": r.target,
        "reduce_range": r.reduce_range,
        "accurate_on": list(r.accurate_on),
        "target_reason": r.why,
    }


# --- the public API ------------------------------------------------------------------

M = TypeVar("M", "ir.Model", "onnx.ModelProto")


def quantize_model(
    model: M,
    ckpt: Checkpoint | None,
    options: ConvertOptions,
    *,
    tokenizer: AlbertTokenizer | None = None,
    calibration_texts: Sequence[str] | Calibration | None = None,
) -> tuple[M, dict[str, Any]]:
    """Quantize an fp32 ALBERT graph; returns the new graph and the manifest's
    "quantization" entry.

    An ``onnx_ir.Model`` (what convert and quantize hand over) is quantized in place and
    returned: the graph stays in onnx_ir from export to the written file, and whoever
    writes it runs :func:`~albert_edge.onnx.quant.check.check_written` on the file
    (convert and quantize do). A ``ModelProto`` (tests, scripts) is not modified; a new proto is
    returned, already loaded once in ONNX Runtime. ``ckpt``
    (optional) supplies the vocabulary size and the tokenizer for int8-static;
    ``tokenizer``/``calibration_texts`` override them (``albert-edge quantize`` passes the
    artifact's own tokenizer; ``calibration_texts``: sentences, or a task file's examples
    read by :func:`albert_edge.data.read_calibration`).
    """
    import onnx_ir as ir

    work = model if isinstance(model, ir.Model) else ir.from_proto(model)
    with quiet():  # ORT's quantizers and onnx_ir's passes log every step at INFO/WARNING
        result, report = _quantize_model(
            work, ckpt, options, tokenizer=tokenizer, calibration_texts=calibration_texts
        )
    # (mypy checks each constraint of M apart: one branch is foreign to each)
    if isinstance(model, ir.Model):
        return result, report  # type: ignore[return-value,unused-ignore]
    from albert_edge.onnx.quant.check import check_written

    proto = ir.to_proto(result)
    report["passes"] += check_written(proto.SerializeToString(), result, options)
    return proto, report  # type: ignore[return-value,unused-ignore]


def refuse_quantized(model: ir.Model, why: str = "the model is already quantized") -> None:
    """Refuse a graph that is already quantized, whatever its manifest says; ``why`` opens
    the message (the markers found and the fix follow)."""
    from albert_edge.onnx.inspect import quantization_markers

    markers = quantization_markers(model)
    if markers:
        raise QuantizationError(f"{why} ({', '.join(markers)}); quantize the fp32 artifact instead")


def _quantize_model(
    model: ir.Model,
    ckpt: Checkpoint | None,
    options: ConvertOptions,
    *,
    tokenizer: AlbertTokenizer | None,
    calibration_texts: Sequence[str] | Calibration | None,
) -> tuple[ir.Model, dict[str, Any]]:
    """Look up the recipe, run its passes (postconditions included), report."""
    from albert_edge.onnx.passes import run_passes

    check_options(options)
    refuse_quantized(model)
    texts: list[str] | Calibration | None = (
        load_calibration(options, ckpt)
        if calibration_texts is None
        else calibration_texts
        if isinstance(calibration_texts, Calibration)
        else list(calibration_texts)
    )
    r = recipe(options.precision, options.int4_kernel)
    state = QuantState(options, vocab=int(ckpt.config.vocab_size) if ckpt is not None else None)
    tok = max_len = None
    if r.calibrated:
        tok = tokenizer or (ckpt.tokenizer() if ckpt is not None else None)
        if tok is None:
            raise QuantizationError(
                "int8-static calibration needs the model's tokenizer (spiece.model); "
                "quantize an artifact directory that ships one"
            )
        max_len = min(int(ckpt.config.max_position_embeddings) if ckpt is not None else 512, 512)
    passes = build_passes(r, state, texts=texts, tokenizer=tok, max_length=max_len or 512)
    result, log = run_passes(model, passes)
    return result, _report(result, state, log, texts)


def _report(
    final: ir.Model, st: Any, log: list[dict[str, Any]], texts: Any = None
) -> dict[str, Any]:
    """The manifest's "quantization" entry: the recipe, the counts its postconditions
    checked, and ``passes``, what each of its passes did.

    The MatMul counts are the artifact's (:func:`albert_edge.onnx.inspect.matmul_counts`,
    the one count the manifest's top level reports too); the size check is the
    quantizer's own bound, named for what it measures: initializer bytes over the bytes
    the parameters it stored need (``postcondition_weights_*``), not the artifact's
    ``floor_bytes``.
    """
    import onnxruntime as ort

    from albert_edge.onnx.inspect import initializer_bytes, matmul_counts, shared_weights
    from albert_edge.onnx.passes.base import duplicate_groups

    options, precision, plan, floor = st.options, st.precision, st.plan, st.floor
    counts = matmul_counts(final)
    weights_bytes = initializer_bytes(final)
    report: dict[str, Any] = {
        "precision": precision,
        "recipe": st.recipe.description,
        "int4_kernel": options.int4_kernel if precision == "int4" else None,
        "tool": f"onnxruntime {ort.__version__}",
        "per_channel": options.weight_per_channel if precision.startswith("int8") else None,
        # a per-tensor recipe's exceptions: weight -> its channel spread (recipes.py)
        **(
            {"per_channel_weights": {w: round(s, 2) for w, s in plan.channel_weights.items()}}
            if plan is not None and plan.channel_weights
            else {}
        ),
        **(_target_report(options) if precision.startswith("int8") else {}),
        **_int4_entries(st),
        # how to run it: ONNX Runtime session settings per CPU class (recipes.ORT_SESSION_HINTS)
        "runtime_hints": runtime_hints(),
        "runtime_note": hints_note(),
        "calibration": _calibration_entry(st, texts),
        "embeddings_quantized": bool(plan.quantize_table),
        "embeddings": _embeddings_entry(st),
        "matmuls_quantized": counts["matmuls_quantized"],
        "matmuls_total": counts["matmuls_total"],
        "matmuls_fp16": counts["matmuls_fp16"],
        "float_matmuls": counts["float_matmuls"],
        "matmul_kinds": counts["by_kind"],
        "shared_weights": shared_weights(final),
        "initializers": len(final.graph.initializers),
        "duplicate_initializers": duplicate_groups(final),
        "initializer_bytes": weights_bytes,
        "postcondition_weights_floor_bytes": floor,
        "postcondition_weights_ratio": round(weights_bytes / floor, 4) if floor else None,
        "rewrites": {
            "gemm_to_matmul": st.rewrites.get("gemm_to_matmul", 0),
            "attention_unfused": st.rewrites.get("attention_unfused", 0),
            "embed_layernorm_unfused": st.rewrites.get("embed_layernorm_unfused", 0),
        },
    }
    report["shared_weights_count"] = len(report["shared_weights"])
    report["passes"] = log  # what each pass of the recipe did, in order
    return report


def _int4_entries(st: Any) -> dict[str, Any]:
    """The report's int4 block sizes (per K, as the kernel reads them) and notes; None
    for other precisions."""
    options, plan, int4 = st.options, st.plan, st.precision == "int4"
    return {
        "block_size": plan.block_size if int4 else None,
        "block_sizes_by_k": {
            str(k): (
                codes_block(plan.block_size, k)
                if options.int4_folded
                else int4_block_size(plan.block_size, k)
            )
            for k in sorted({k for k, _ in plan.weights.values()})
        }
        if int4
        else None,
        "speed_note": INT4_SPEED_NOTES[options.int4_kernel] if int4 else None,
        "size_note": INT4_SIZE_NOTES[options.int4_kernel] if int4 else None,
    }


def _calibration_entry(st: Any, texts: Any) -> dict[str, Any] | None:
    """The report's record of the calibration file (None when the recipe read none)."""
    options = st.options
    used = calibration_file(options)
    if used is None:
        return None
    return {
        **input_file_record(used),
        "samples": len(st.feeds or []),
        **(texts.record() if isinstance(texts, Calibration) else {"task": "sentences"}),
        "method": options.calibration_method,
        "source": "--calibration"
        if options.calibration is not None
        else DEFAULT_CALIBRATION_SOURCE,
    }


def _embeddings_entry(st: Any) -> dict[str, Any] | str:
    """How the word table is stored: the table pass's facts, fp16, fp32 or no table."""
    plan, table = st.plan, st.table
    if plan.quantize_table and table is not None and st.precision != "fp16":
        embeddings: dict[str, Any] | str = st.embeddings
        return embeddings
    if plan.quantize_table and table is not None:
        return {"table": table.table, "shape": [table.vocab, table.dim], "format": "fp16"}
    if table is not None:
        return EMBEDDINGS_FP32
    return "the graph has no word-embedding Gather"


def build_passes(
    r: QuantRecipe,
    state: QuantState,
    *,
    texts: list[str] | Calibration | None = None,
    tokenizer: Any = None,
    max_length: int = 512,
) -> list[Any]:
    """The recipe's passes, in order. Passes that depend on what an earlier one finds
    (a fused EmbedLayerNormalization, a tied decoder, a word table to quantize) are always
    listed and report ``skipped`` where they do not apply."""
    from albert_edge.onnx.passes.compact import CompactGraphPass
    from albert_edge.onnx.quant import channels, check, embed, int4, ort, plan, prepare, rewrite

    state.recipe = r
    passes: list[Any] = [prepare.PrepareGraphPass()]
    if r.unfuse_attention:
        passes.append(rewrite.UnfuseAttentionPass(state))
    passes.append(rewrite.LocateWordTablePass(state))
    if r.embeddings:  # fp16 keeps a fused EmbedLayerNormalization: its tables convert in place
        passes.append(rewrite.UnfuseEmbedLayerNormPass(state))
    passes += [rewrite.GemmToMatMulPass(state), plan.PlanPass(state)]
    if r.name in ("int8-dynamic", "int4"):
        passes += [
            *([int4.StashFloatWeightsPass(state)] if r.name == "int4" else []),
            rewrite.TiedGemmToMatMulPass(state),
            ort.OrtDynamicQuantPass(state),
            *([channels.ChannelScalesPass(state)] if r.name == "int8-dynamic" else []),
            rewrite.RestoreTiedGemmPass(state),
            rewrite.RelocateWordTablePass(state),
        ]
        if r.name == "int4":
            reduce = int8_recipe(state.options.runs_on).reduce_range
            passes.append(int4.PackInt4Pass(state, SATURATION_FREE_MAX_ABS if reduce else 127))
    elif r.name == "int8-static":
        passes += [
            ort.CalibrationFeedsPass(state, texts or [], tokenizer, max_length),
            ort.OrtStaticQuantPass(state),
        ]
    elif r.name == "int4-nbits":
        passes.append(ort.OrtInt4Pass(state))
    else:
        passes.append(ort.OrtFloat16Pass(state))
    if r.embeddings:
        passes += [embed.QuantizeWordTablePass(state), embed.QuantizeSideTablesPass(state)]
    passes += [
        check.DedupQuantizedPass(),
        CompactGraphPass(),
        check.WeightsQuantizedCheck(state),
        check.SharedWeightsOnceCheck(state),
        check.SaturationCheck(state),
    ]
    return passes
