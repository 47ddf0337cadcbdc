"""Quantization recipes: named, frozen, each an ordered list of passes.

A recipe is data (:class:`QuantRecipe`): which of ONNX Runtime's quantizers computes the
weights, which rewrites it needs first, and what the manifest says about it.
:func:`build_passes` turns a recipe, the options and the graph's facts into the pass
list :func:`albert_edge.onnx.passes.run_passes` executes:

1. ``quant-prepare`` — one initializer per weight, unique node names;
2. ``quant-unfuse-attention`` (int8-static, int4) — the QKV projection as a MatMul;
3. ``quant-locate-table`` — the word table and its readers; then, where the table is to
   be stored quantized behind a fused EmbedLayerNormalization, ``quant-unfuse-embed-
   layernorm``;
4. ``quant-gemm-to-matmul`` — pooler/classifier Gemms as MatMul;
5. ``quant-plan`` — weights, nodes and the byte floor;
6. the quantizer (``quant-ort-*``), with the tied-decoder guard around int8-dynamic and
   int4 and the calibration feeds before int8-static; int4 (``--int4-kernel int8``, the
   default) is int8-dynamic's graph with every weight then stored as 4-bit codes
   (``quant-int4-stash`` before, ``quant-int4-pack`` after: :mod:`~.int4`), int4-nbits
   is MatMulNBits;
7. the recipe's embedding recipe (:data:`EMBEDDING_RECIPES`, skipped with
   --keep-embeddings-wide): ``quant-word-table`` + ``quant-side-tables``;
8. ``quant-dedup``, ``compact``;
9. the postconditions: ``check-weights-quantized``, ``check-shared-weights-once``,
   ``check-no-saturation``, ``check-runs`` (int4: ``check-int4-folds``).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from albert_edge.errors import UnsupportedError
from albert_edge.onnx.passes.quant.state import QuantState


@dataclass(frozen=True)
class EmbeddingRecipe:
    """How albert-edge's own passes store the V×E word table and the position table
    (ORT's quantizers cannot: :mod:`albert_edge.onnx.passes.quant.embed` says why)."""

    name: str
    bits: int
    qdq: bool  # Gather + DequantizeLinear (QDQ graphs) instead of standard-op blocks
    description: str


EMBEDDING_RECIPES: MappingProxyType[str, EmbeddingRecipe] = MappingProxyType(
    {
        e.name: e
        for e in (
            EmbeddingRecipe(
                "int8-rows",
                8,
                False,
                "int8 codes, one fp16 scale per row (fp32 per block where a tied decoder "
                "reads them through MatMulNBits); position table int8 per column",
            ),
            EmbeddingRecipe(
                "int8-qdq",
                8,
                True,
                "int8 per tensor read by Gather + DequantizeLinear (7-bit when a tied "
                "decoder multiplies by it); position table int8 per column",
            ),
            EmbeddingRecipe(
                "int4-blocks",
                4,
                False,
                "4-bit codes two per byte, one-byte block scales x an fp32 super-scale "
                "(fp32 where a tied decoder reads them); position table 4-bit per row",
            ),
        )
    }
)


@dataclass(frozen=True)
class QuantRecipe:
    """One ONNX precision: the ORT quantizer that computes it and what it needs first."""

    name: str
    quantizer: str  # pass name of the ORT quantizer pass
    description: str  # the manifest's "recipe"
    unfuse_attention: bool = False  # ORT's quantizer cannot reach a fused Attention's QKV
    # the word/side tables by albert-edge's passes; None: the quantizer converts them (fp16)
    embeddings: EmbeddingRecipe | None = None
    calibrated: bool = False


RECIPES: MappingProxyType[str, QuantRecipe] = MappingProxyType(
    {
        r.name: r
        for r in (
            QuantRecipe(
                "int8-dynamic",
                "quant-ort-dynamic",
                "onnxruntime.quantization.quantize_dynamic (QOperator: MatMulInteger, "
                "QAttention on the fused graph): int8 symmetric weights, uint8 activations "
                "quantized at run time",
                embeddings=EMBEDDING_RECIPES["int8-rows"],
            ),
            QuantRecipe(
                "int8-static",
                "quant-ort-static",
                "onnxruntime.quantization.quantize_static (QDQ): int8 symmetric weights, "
                "uint8 activations with calibrated scales; fused Attention rewritten as "
                "MatMul + MultiHeadAttention so its QKV projection is quantized too",
                unfuse_attention=True,
                embeddings=EMBEDDING_RECIPES["int8-qdq"],
                calibrated=True,
            ),
            QuantRecipe(
                "int4",
                "quant-ort-dynamic",
                "4-bit weights stored, int8 computed: onnxruntime.quantization.quantize_dynamic "
                "(QOperator: MatMulInteger, QAttention) fixes the graph and the scales, then "
                "every weight is stored as 4-bit codes with a small integer multiplier per "
                "block (albert_edge.Int4Weight, folded to int8 by ONNX Runtime at load); "
                "uint8 activations quantized at run time",
                embeddings=EMBEDDING_RECIPES["int4-blocks"],
            ),
            QuantRecipe(
                "int4-nbits",
                "quant-ort-int4",
                "onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer "
                "(MatMulNBits): 4-bit blockwise symmetric weights, fp32 activations; fused "
                "Attention rewritten as MatMul + MultiHeadAttention so its QKV projection is "
                "quantized too",
                unfuse_attention=True,
                embeddings=EMBEDDING_RECIPES["int4-blocks"],
            ),
            QuantRecipe(
                "fp16",
                "quant-ort-float16",
                "onnxruntime.transformers float16 conversion: fp16 weights and compute where "
                "ONNX Runtime has fp16 kernels (Cast inserted elsewhere), fp32 inputs and "
                "outputs",
            ),
        )
    }
)


def recipe(precision: str, int4_kernel: str = "int8") -> QuantRecipe:
    """The recipe of ``precision`` (int4: of its ``--int4-kernel``)."""
    if precision == "int4" and int4_kernel == "nbits":
        return RECIPES["int4-nbits"]
    if precision == "int4-nbits":
        raise UnsupportedError(
            "precision 'int4-nbits' is spelled --precision int4 --int4-kernel nbits"
        )
    try:
        return RECIPES[precision]
    except KeyError:
        raise UnsupportedError(
            f"precision {precision!r} is not a quantized precision; choose one of "
            + ", ".join(r for r in RECIPES if r != "int4-nbits")
        ) from None


def build_passes(
    r: QuantRecipe,
    state: QuantState,
    *,
    texts: list[str] | None = None,
    tokenizer: Any = None,
    max_length: int = 512,
) -> list[Any]:
    """The recipe's passes, in order. Passes that depend on what an earlier one finds
    (a fused EmbedLayerNormalization, a tied decoder, a word table to quantize) are always
    listed and report ``skipped`` where they do not apply."""
    from albert_edge.onnx.passes.compact import CompactGraphPass
    from albert_edge.onnx.passes.quant import check, embed, int4, ort, plan, prepare, rewrite

    state.recipe = r
    passes: list[Any] = [prepare.PrepareGraphPass()]
    if r.unfuse_attention:
        passes.append(rewrite.UnfuseAttentionPass(state))
    passes.append(rewrite.LocateWordTablePass(state))
    if r.embeddings:  # fp16 keeps a fused EmbedLayerNormalization: its tables convert in place
        passes.append(rewrite.UnfuseEmbedLayerNormPass(state))
    passes += [rewrite.GemmToMatMulPass(state), plan.PlanPass(state)]
    if r.name in ("int8-dynamic", "int4"):
        from albert_edge.onnx.recipes import SATURATION_FREE_MAX_ABS, int8_recipe

        passes += [
            *([int4.StashFloatWeightsPass(state)] if r.name == "int4" else []),
            rewrite.TiedGemmToMatMulPass(state),
            ort.OrtDynamicQuantPass(state),
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
        check.RunsCheck(state),
    ]
    if r.name == "int4":
        passes.append(int4.Int4FoldsCheck(state))
    return passes
