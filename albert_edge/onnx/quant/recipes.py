"""Quantization recipes, as data: the one table of ONNX precisions (:data:`RECIPES`), how
each stores the word table (:data:`EMBEDDING_RECIPES`) and, for the int8 precisions, the
recipe per deployment ``--target`` (:data:`INT8_TARGETS`).

Why data and nothing else: ``albert_edge.options`` validates ``--target`` against
:data:`INT8_TARGETS` and sits below every pipeline, so this module imports no pass;
:func:`albert_edge.onnx.quant.front.build_passes` turns a recipe into its pass list:

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
   ``check-no-saturation``; once the file is written, ONNX Runtime reads it:
   ``check-runs`` (and for int4, ``check-int4-folds``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from albert_edge.errors import UnsupportedError
from albert_edge.kernels import KERNELS

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class EmbeddingRecipe:
    """How albert-edge's own passes store the V×E word table and the position table
    (ORT's quantizers cannot: :mod:`albert_edge.onnx.quant.embed` says why)."""

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


# --- int8 recipes per deployment target ------------------------------------------------
#
# Integer recipes per deployment target, as data: what each trades, and where it is right.
#
# An int8 MatMul in ONNX Runtime is u8 activations × s8 weights. On x86 AVX2 (and AVX-512
# without VNNI) MLAS multiplies with ``VPMADDUBSW``, which adds each *pair* of u8×s8
# products into a signed int16 with saturation: 2 × 255 × 127 = 64,770 does not fit in
# 32,767, so full-range weights saturate whenever two large activations meet two large
# weights of the same sign. VNNI (``VPDPBUSD``), ARM64 (``SDOT``/``UDOT``/i8mm) and wasm
# SIMD accumulate in int32 and never saturate.
#
# ``reduce_range`` (7-bit weights, |w| ≤ 64) bounds a pair at 2 × 255 × 64 = 32,640 < 32,767:
# no saturation on any kernel, for one bit of weight resolution; the integer results are then
# the same on every kernel family, so a measurement here speaks for all of them. Measured on
# the README's int8 artifact (trained SST-2 model, ``verify``'s grid, logits SQNR; AMD EPYC
# with AVX-512 VNNI host, the other kernels emulated by ``albert-edge verify --on``):
#
# =====================================  =========  ========  =====  =====
# recipe                                 x86-vnni   x86-avx2  arm64  wasm
# =====================================  =========  ========  =====  =====
# 8-bit per-channel (before)             39.3       17.3      39.2   39.3
# 7-bit per-channel                      29.3       29.3      29.4   29.3
# 7-bit per-tensor (``portable``)        39.8       39.8      40.1   40.0
# 8-bit u8u8 (no saturation either)      37.7       37.7      37.8   37.7
# =====================================  =========  ========  =====  =====
#
# Speed (albert-base, batch 1, seq 128, 2 threads, VNNI host, one interleaved run): 7-bit
# 50.8 ms, 8-bit 53.6 ms, u8u8 74.6 ms, so u8u8's safety costs 1.47× and is not offered.
# Per-tensor vs per-channel at 7 bits is close (real SST-2 dev sentences: 45.0 vs 46.6 dB;
# random tiny configs, seeds 0-3: 28.2-42.1 vs 37.5-40.4 dB), per-channel's grid figure is
# pulled down by one padded batch; per-tensor is also onnxruntime's own default.
# ``benchmarks/cross_kernel.py`` re-measures all of this.
#
# ``--target`` names the hardware; a full-range recipe is only offered for targets whose
# kernels accumulate in int32, and the manifest records where the artifact is right.


@dataclass(frozen=True)
class Int8Recipe:
    """How int8 weights are quantized for one deployment target."""

    target: str
    reduce_range: bool  # 7-bit weights: no int16 pair saturation on x86 AVX2 u8s8
    weight_type: str  # "s8" (u8s8 kernels) or "u8" (u8u8 kernels: never saturate)
    per_channel: bool  # one scale per output channel (else one per tensor)
    accurate_on: tuple[str, ...]  # kernel families whose arithmetic the recipe is right on
    why: str
    # a per-tensor recipe's exception, chosen from the weights alone: a weight whose
    # largest output channel (max |w|) is more than this many times its median channel's
    # gets one scale per channel (None: every weight as ``per_channel`` says)
    channel_spread: float | None = None

    def __post_init__(self) -> None:
        unknown = [k for k in self.accurate_on if k not in KERNELS]
        if unknown:
            raise UnsupportedError(f"recipe {self.target!r} names unknown kernels {unknown}")
        saturating = [k for k in self.accurate_on if KERNELS[k].saturating_u8s8]
        if self.weight_type not in ("s8", "u8"):
            raise UnsupportedError(f"recipe {self.target!r}: weight_type must be s8 or u8")
        if saturating and self.weight_type == "s8" and not self.reduce_range:
            raise UnsupportedError(
                f"recipe {self.target!r}: full-range int8 weights saturate on {saturating}"
            )


_INT32_KERNELS = tuple(k for k, fam in KERNELS.items() if not fam.saturating_u8s8)

# Per-tensor, except where one channel dwarfs the rest. One 7-bit scale per tensor gives
# a channel whose largest |w| is r times below the tensor's 64 / r levels. Every weight of
# the models trained from scratch here spreads 1.0-3.0x (per-tensor and per-channel within
# a few dB: the table above); a student whose layers start from a pretrained encoder's
# (benchmarks.teacher --teacher-layers) carries its outlier dimension: group 0's FFN output
# spreads 22.8x, and per-tensor lost 1.95 SST-2 dev points where per-channel lost 0.11
# (benchmarks/results/teacher.md). Above 4x (16 levels or fewer for the median channel)
# that weight gets a scale per channel: 5 bytes per output channel, chosen without data.
PORTABLE_CHANNEL_SPREAD = 4.0


def channel_spread(weight: np.ndarray) -> float:
    """How unevenly a ``[K, N]`` weight's output channels (columns) are scaled: the
    largest column's max |w| over the median column's (1.0 for an even weight; inf where
    the median column is all zeros and another is not). What a per-tensor int8 recipe's
    ``channel_spread`` exception is judged on (:data:`PORTABLE_CHANNEL_SPREAD`)."""
    import numpy as np

    return spread_of(np.abs(np.asarray(weight, dtype=np.float64)).max(axis=0))


def spread_of(maxima: np.ndarray) -> float:
    """:func:`channel_spread` from the channels' max |w| (QAT's fake quantizer has them)."""
    import numpy as np

    cols = np.asarray(maxima, dtype=np.float64).ravel()
    top, mid = float(cols.max(initial=0.0)), float(np.median(cols)) if cols.size else 0.0
    if top == 0.0:
        return 1.0
    return top / mid if mid > 0.0 else math.inf


INT8_TARGETS: dict[str, Int8Recipe] = {
    r.target: r
    for r in (
        Int8Recipe(
            "portable",
            reduce_range=True,
            weight_type="s8",
            per_channel=False,
            accurate_on=tuple(KERNELS),
            why="7-bit weights: no u8s8 saturation on x86 AVX2, same speed everywhere; one "
            "scale per channel for a weight whose channels differ by more than "
            f"{PORTABLE_CHANNEL_SPREAD:g}x",
            channel_spread=PORTABLE_CHANNEL_SPREAD,
        ),
        Int8Recipe(
            "x86-vnni",
            reduce_range=False,
            weight_type="s8",
            per_channel=True,
            accurate_on=_INT32_KERNELS,
            why="8-bit weights: VNNI accumulates in int32 (wrong on AVX2-only x86: saturates)",
        ),
        Int8Recipe(
            "arm64",
            reduce_range=False,
            weight_type="s8",
            per_channel=True,
            accurate_on=_INT32_KERNELS,
            why="8-bit weights: ARM64 dot-product kernels accumulate in int32",
        ),
        Int8Recipe(
            "wasm",
            reduce_range=False,
            weight_type="s8",
            per_channel=True,
            accurate_on=_INT32_KERNELS,
            why="8-bit weights: wasm SIMD accumulates in int32",
        ),
    )
}

RUNS_ON = tuple(INT8_TARGETS)

# Candidates measured by benchmarks/cross_kernel.py but not offered as a --target.
CANDIDATES: dict[str, Int8Recipe] = {
    "u8u8": Int8Recipe(
        "u8u8",
        reduce_range=False,
        weight_type="u8",
        per_channel=True,
        accurate_on=tuple(KERNELS),
        why="8-bit asymmetric uint8 weights: MLAS's u8u8 kernels widen to int16 first",
    ),
}


def int8_recipe(target: str) -> Int8Recipe:
    if target in CANDIDATES:
        return CANDIDATES[target]
    if target not in INT8_TARGETS:
        raise UnsupportedError(
            f"unknown --target {target!r}; choose one of {', '.join(INT8_TARGETS)} (portable: right "
            "on every CPU)"
        )
    return INT8_TARGETS[target]


# u8 activations × s8 weights: a pair of products stays inside int16 iff |w| ≤ 64.
SATURATION_FREE_MAX_ABS = 64


# --- ONNX Runtime session settings per CPU class -----------------------------------------
#
# The int8 graph is one file for every CPU; how ONNX Runtime runs it is not in the file.
# What is measured to matter (docs/onnx-speed.md, benchmarks/results/onnx_speed.md; AMD
# EPYC with AVX-512 VNNI, 2 cores shared with other work, batch 1, 128 tokens, 2 threads):
#
# * At one thread the default int8 file runs at litert-torch's speed (fastest runs, paired
#   round by round: embedded 0.95x, H256 0.97x): MLAS's int8 kernels cost what XNNPACK's
#   do per core, and no other ORT form is faster (QKV MatMul + MultiHeadAttention 1.01x /
#   0.85x, int8-static QDQ 1.12x / 0.95x, MatMulNBits 8- or 4-bit at accuracy level 4
#   1.5-1.9x, at two threads beside the default's 0.93x / 0.81x).
# * ORT's intra-op pool spins its workers between kernels (``allow_spinning`` defaults to
#   1). At two threads on a machine whose cores are not all ORT's, the spinning worker
#   holds a core the kernel it waits on needs: H256's typical run (p50) is 36.5 ms with
#   spinning against 4.4 ms without, and litert-torch's 7.7 ms. With spinning off, workers
#   sleep between kernels.
# * What spinning off costs: a wake-up per parallel kernel. At real lengths (W2, SST-2
#   sentences) on small models that is measurable: median 0.42 vs 0.33 ms (embedded),
#   0.99 vs 0.86 ms (H256), while albert-base gains (50 vs 131 ms); and where the second
#   core is free, spinning's fastest runs are faster.
#   ``albert-edge bench --backend ort-cpu-defaults`` times the file without the hint.
# * Bounded spinning (``spin_duration_us`` 1-200, ``spin_backoff_max``),
#   ``force_spinning_stop``, ``dynamic_block_base`` and pinning the worker
#   (``intra_op_thread_affinities``) were measured too and lose to spinning off at 128
#   tokens.
#
# ``OrtSessionHint.config`` goes to ``SessionOptions.add_session_config_entry``; the
# manifest records the table (``quantization.runtime_hints``), the model card says it,
# and albert-edge's ONNX runner applies the host class's entry (``albert-edge bench``,
# verify and the runners run what a user is told to run).


@dataclass(frozen=True)
class OrtSessionHint:
    """ONNX Runtime session config entries for one CPU kernel family, and why."""

    kernel: str
    config: MappingProxyType[str, str]
    measured_on: str  # the machine the entry was chosen on ("" = carried over, not measured)
    why: str

    def __post_init__(self) -> None:
        if self.kernel not in KERNELS:
            raise UnsupportedError(f"session hint names unknown kernel family {self.kernel!r}")


# No CPU class gets a hint today: ONNX Runtime's defaults (intra-op spinning on) are the
# fastest measured setting when the artifact has its cores to itself. On a quiet 2-core AMD
# EPYC (avx512_vnni, load average 1.5-1.9) turning spinning off made W1 at 128 tokens and
# 2 threads 1.40-1.49x slower and W2 slower too (benchmarks/results/onnx_speed_quiet*.md,
# three runs); it only wins where other work holds the cores (load 15-21: H256 p50 4.4 vs
# 36.5 ms, benchmarks/results/onnx_speed.md). A class whose measurement says otherwise
# gets an OrtSessionHint here; bench's opt-in ``ort-cpu-defaults`` backend times without.
ORT_SESSION_HINTS: MappingProxyType[str, OrtSessionHint] = MappingProxyType({})


def session_hint(kernel: str) -> OrtSessionHint | None:
    """The session settings for ``kernel`` (a :data:`albert_edge.kernels.KERNELS` name),
    or None where ONNX Runtime's defaults stand (arm64, wasm: not measured)."""
    return ORT_SESSION_HINTS.get(kernel)


def runtime_hints() -> dict[str, object]:
    """The manifest's ``runtime_hints``: session config entries per kernel family."""
    return {
        "onnxruntime_session_config": {k: dict(h.config) for k, h in ORT_SESSION_HINTS.items()},
        "why": {k: h.why for k, h in ORT_SESSION_HINTS.items()},
        "applied_by": "albert-edge's ONNX runner (bench, verify) on the host's kernel family",
    }


def hints_note() -> str:
    """One sentence for the model card: what to set in one's own ONNX Runtime session."""
    parts = [
        f"{k}: " + ", ".join(f"{key}={val}" for key, val in h.config.items())
        for k, h in ORT_SESSION_HINTS.items()
    ]
    if not parts:
        return (
            "ONNX Runtime's default session settings: keep intra-op spinning on where the "
            "model has its cores to itself (turning it off cost 1.4x at 128 tokens on a "
            "quiet 2-core x86); where other work shares the cores, "
            "session.intra_op.allow_spinning=0 can be far faster: time both "
            "(docs/onnx-speed.md)"
        )
    return (
        "set these ONNX Runtime session config entries (SessionOptions."
        "add_session_config_entry): " + "; ".join(parts) + " (docs/onnx-speed.md)"
    )
