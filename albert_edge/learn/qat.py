"""Quantization-aware training: the weights ``convert --precision P`` will store, in the loop.

The fake quantizer is the recipe convert applies (:mod:`albert_edge.onnx.quant.recipes`),
not a scheme of its own:

* ``int8`` (int8-dynamic, the ``--target`` recipe: ``portable`` = 7-bit symmetric per
  tensor, |q| <= 64; the int32-accumulating targets 8-bit symmetric per output channel):
  ``torch.fake_quantize_per_tensor_affine`` / ``..._per_channel_affine``, PyTorch's
  fake-quant primitives with their straight-through gradient.
* ``int4`` (4-bit codes on int8 kernels, :mod:`albert_edge.onnx.quant.int4`): one base
  scale per tensor (or column) ``absmax / (7 M)``, per block of ``B`` input rows and column
  the smallest integer multiplier ``m <= M`` that covers the block, codes ``q in [-7, 7]``;
  the weight is ``q * m * base``. PyTorch has no block quantizer with integer block
  multipliers, so this one is written here (a few tensor ops, straight-through gradient:
  ``w + (fq(w) - w).detach()``); a test checks it against :func:`~albert_edge.onnx.quant.int4.pack`.

Which weights: every ``nn.Linear`` of the model (ORT's quantizer takes every MatMul/Gemm
weight: projection E->H, attention, FFN, pooler, classifier). The attention's Q, K and V
share one per-tensor scale, because convert quantizes them as one fused QAttention weight
``[H, 3H]``. ALBERT's shared layer is one set of parameters: it is fake-quantized once per
forward and the result used at every depth (``torch.func.functional_call``), as the
artifact stores it once. The word and position tables (albert-edge's own row/block passes)
and the run-time activation quantization of the dynamic recipes are not simulated.
``int8-static`` and ``fp16`` have no trainable quantizer here and are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from albert_edge.learn.errors import LearnError

PRECISIONS = ("int8", "int4")


@dataclass(frozen=True)
class QatSpec:
    """What is simulated: the convert precision, its int8 ``--target`` recipe, the int4
    block request (convert's ``--block-size``)."""

    precision: str
    target: str = "portable"
    block_size: int = 256

    def limit(self) -> int:
        from albert_edge.onnx.quant.recipes import SATURATION_FREE_MAX_ABS, int8_recipe

        return SATURATION_FREE_MAX_ABS if int8_recipe(self.target).reduce_range else 127

    def per_channel(self) -> bool:
        from albert_edge.onnx.quant.recipes import int8_recipe

        return int8_recipe(self.target).per_channel

    def record(self) -> dict[str, Any]:
        """What ``training.json`` (and the converted manifest's ``trained_for``) says."""
        from albert_edge.onnx.quant.recipes import RECIPES

        name = "int8-dynamic" if self.precision == "int8" else "int4"
        return {
            "precision": self.precision,
            "convert_precision": name,
            "target": self.target,
            "recipe": RECIPES[name].description,
            "weights": ("per output channel" if self.per_channel() else "per tensor")
            + f", |q| <= {self.limit()}"
            + (
                f", 4-bit codes in blocks of <= {self.block_size} input rows"
                if self.precision == "int4"
                else ""
            ),
            "simulated": "every Linear weight (Q/K/V one scale); not the embedding tables or "
            "run-time activation quantization",
        }


def qat_spec(
    precision: str | None, target: str = "portable", block_size: int = 256
) -> QatSpec | None:
    """The spec for ``--qat``, or a :class:`LearnError` for a precision with no trainable
    quantizer here."""
    if precision in (None, "", "none"):
        return None
    if precision not in PRECISIONS:
        raise LearnError(
            f"--qat {precision}: no trainable quantizer for this precision (convert's "
            f"{precision} recipe is not simulated); choose one of {', '.join(PRECISIONS)}"
        )
    from albert_edge.onnx.quant.recipes import int8_recipe

    try:
        int8_recipe(target)
    except Exception as exc:
        raise LearnError(f"--qat-target {target}: {exc}") from None
    return QatSpec(precision, target, block_size)


def fake_int8(w: Any, absmax: Any, spec: QatSpec) -> Any:
    """int8 symmetric fake quantization of a ``[out, in]`` weight (straight-through)."""
    import torch

    lim = spec.limit()
    if spec.per_channel():
        scale = (absmax.clamp_min(1e-12) / lim).to(torch.float32)
        zero = torch.zeros_like(scale, dtype=torch.int32)
        return torch.fake_quantize_per_channel_affine(w, scale, zero, 0, -lim, lim)
    scale = absmax.clamp_min(1e-12) / lim
    zero = torch.zeros((), dtype=torch.int32, device=w.device)
    return torch.fake_quantize_per_tensor_affine(w, scale.reshape(()), zero, -lim, lim)


def fake_int4(w: Any, absmax: Any, spec: QatSpec) -> Any:
    """convert's int4 (4-bit codes x block multipliers x base scale) of a ``[out, in]``
    weight, straight-through. ``absmax``: per tensor (``[]``) or per output channel."""
    import torch

    from albert_edge.onnx.quant.int4 import multiplier_max
    from albert_edge.onnx.quant.plan import codes_block

    n, k = w.shape
    block = codes_block(spec.block_size, k)
    if block is None:  # odd K: convert keeps that weight int8
        return fake_int8(w, absmax, spec)
    big_m = multiplier_max(spec.limit())
    d = w.detach()
    base = torch.where(absmax > 0, absmax / (7 * big_m), torch.ones_like(absmax))
    base = base.reshape(-1, 1, 1) if base.ndim else base
    wb = d.reshape(n, k // block, block)
    bmax = wb.abs().amax(dim=-1, keepdim=True)
    mult = torch.clamp(torch.ceil(bmax / (7 * base) - 1e-9), 1, big_m)
    q = torch.clamp(torch.round(wb / (mult * base)), -7, 7)
    deq = (q * mult * base).reshape(n, k)
    return w + (deq - w).detach()


def _absmax(weights: list[Any], per_channel: bool) -> Any:
    """The scale's absmax over ``weights`` (one fused tensor for Q/K/V)."""
    import torch

    if per_channel:
        return torch.cat([w.detach().abs().amax(dim=1) for w in weights])
    return torch.stack([w.detach().abs().max() for w in weights]).max()


def fake_quantized(model: Any, spec: QatSpec) -> dict[str, Any]:
    """``{parameter name: fake-quantized weight}`` for every Linear weight of ``model``,
    each computed once (the shared layer's too)."""
    import torch

    fq = fake_int8 if spec.precision == "int8" else fake_int4
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    out: dict[str, Any] = {}
    per_channel = spec.per_channel()
    for name, mod in linears.items():
        if name.endswith((".query", ".key", ".value")):
            stem = name.rsplit(".", 1)[0]
            if f"{stem}.query.weight" in out:
                continue
            group = [linears[f"{stem}.{p}"] for p in ("query", "key", "value")]
            amax = _absmax([m.weight for m in group], per_channel)
            for p, m in zip(("query", "key", "value"), group, strict=True):
                rows = m.weight.shape[0]
                i = ("query", "key", "value").index(p)
                a = amax[i * rows : (i + 1) * rows] if per_channel else amax
                out[f"{stem}.{p}.weight"] = fq(m.weight, a, spec)
            continue
        out[f"{name}.weight"] = fq(mod.weight, _absmax([mod.weight], per_channel), spec)
    return out
