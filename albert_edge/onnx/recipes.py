"""Integer recipes per deployment target, as data: what each trades, and where it is right.

An int8 MatMul in ONNX Runtime is u8 activations × s8 weights. On x86 AVX2 (and AVX-512
without VNNI) MLAS multiplies with ``VPMADDUBSW``, which adds each *pair* of u8×s8
products into a signed int16 with saturation: 2 × 255 × 127 = 64,770 does not fit in
32,767, so full-range weights saturate whenever two large activations meet two large
weights of the same sign. VNNI (``VPDPBUSD``), ARM64 (``SDOT``/``UDOT``/i8mm) and wasm
SIMD accumulate in int32 and never saturate.

``reduce_range`` (7-bit weights, |w| ≤ 64) bounds a pair at 2 × 255 × 64 = 32,640 < 32,767:
no saturation on any kernel, for one bit of weight resolution; the integer results are then
the same on every kernel family, so a measurement here speaks for all of them. Measured on
the README's int8 artifact (trained SST-2 model, ``verify``'s grid, logits SQNR; AMD EPYC
with AVX-512 VNNI host, the other kernels emulated by ``albert-edge verify --on``):

=====================================  =========  ========  =====  =====
recipe                                 x86-vnni   x86-avx2  arm64  wasm
=====================================  =========  ========  =====  =====
8-bit per-channel (before)             39.3       17.3      39.2   39.3
7-bit per-channel                      29.3       29.3      29.4   29.3
7-bit per-tensor (``portable``)        39.8       39.8      40.1   40.0
8-bit u8u8 (no saturation either)      37.7       37.7      37.8   37.7
=====================================  =========  ========  =====  =====

Speed (albert-base, batch 1, seq 128, 2 threads, VNNI host, one interleaved run): 7-bit
50.8 ms, 8-bit 53.6 ms, u8u8 74.6 ms, so u8u8's safety costs 1.47× and is not offered.
Per-tensor vs per-channel at 7 bits is close (real SST-2 dev sentences: 45.0 vs 46.6 dB;
random tiny configs, seeds 0-3: 28.2-42.1 vs 37.5-40.4 dB), per-channel's grid figure is
pulled down by one padded batch; per-tensor is also onnxruntime's own default.
``benchmarks/cross_kernel.py`` re-measures all of this.

``--target`` names the hardware; a full-range recipe is only offered for targets whose
kernels accumulate in int32, and the manifest records where the artifact is right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from albert_edge.errors import UnsupportedError
from albert_edge.kernels import KERNELS


@dataclass(frozen=True)
class Int8Recipe:
    """How int8 weights are quantized for one deployment target."""

    target: str
    reduce_range: bool  # 7-bit weights: no int16 pair saturation on x86 AVX2 u8s8
    weight_type: str  # "s8" (u8s8 kernels) or "u8" (u8u8 kernels: never saturate)
    per_channel: bool  # one scale per output channel (else one per tensor)
    accurate_on: tuple[str, ...]  # kernel families whose arithmetic the recipe is right on
    why: str

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

RECIPES: dict[str, Int8Recipe] = {
    r.target: r
    for r in (
        Int8Recipe(
            "portable",
            reduce_range=True,
            weight_type="s8",
            per_channel=False,
            accurate_on=tuple(KERNELS),
            why="7-bit weights: no u8s8 saturation on x86 AVX2, same speed everywhere",
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

RUNS_ON = tuple(RECIPES)

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
    if target not in RECIPES:
        raise UnsupportedError(
            f"unknown --target {target!r}; choose one of {', '.join(RECIPES)} (portable: right "
            "on every CPU)"
        )
    return RECIPES[target]


# u8 activations × s8 weights: a pair of products stays inside int16 iff |w| ≤ 64.
SATURATION_FREE_MAX_ABS = 64
_INT8_WEIGHT_INPUTS = {"MatMulInteger": 1, "QAttention": 1, "DynamicQuantizeMatMul": 1}


def saturating_weights(model: Any) -> list[str]:
    """Names of int8 weights that can saturate an x86 AVX2 u8s8 kernel (|w| > 64).

    The static counterpart of running on AVX2: what the portable recipe promises, checked
    on the graph itself (weights of MatMulInteger/QAttention, and int8 weights that a
    DequantizeLinear feeds to a MatMul in QDQ graphs).
    """
    import numpy as np
    from onnx import TensorProto, numpy_helper

    inits = {t.name: t for t in model.graph.initializer}
    names: set[str] = set()
    for node in model.graph.node:
        idx = _INT8_WEIGHT_INPUTS.get(node.op_type)
        if idx is not None and len(node.input) > idx:
            names.add(node.input[idx])
        if node.op_type == "DequantizeLinear" and node.input:
            names.add(node.input[0])
    bad = []
    for name in sorted(names):
        t = inits.get(name)
        if t is None or t.data_type != TensorProto.INT8:
            continue
        arr = numpy_helper.to_array(t).astype(np.int16)
        if arr.size and int(np.abs(arr).max()) > SATURATION_FREE_MAX_ABS:
            bad.append(name)
    return bad
