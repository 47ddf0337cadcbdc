"""Quantization-aware training: the weights ``convert --precision P`` will store, in the loop.

The fake quantizer is the recipe convert applies (:mod:`albert_edge.onnx.quant.recipes`),
not a scheme of its own:

* ``int8`` (int8-dynamic, the ``--target`` recipe: ``portable`` = 7-bit symmetric per
  tensor, |q| <= 64; the int32-accumulating targets 8-bit symmetric per output channel):
  ``torch.fake_quantize_per_tensor_affine`` / ``..._per_channel_affine``, PyTorch's
  fake-quant primitives with their straight-through gradient.
* ``int8-static`` (``quantize_static``'s QDQ weights): the same int8 weights per the
  ``--target`` recipe, plus the activations (below).
* ``int4`` (4-bit codes on int8 kernels, :mod:`albert_edge.onnx.quant.int4`): one base
  scale per tensor (or column) ``absmax / (7 M)``, per block of ``B`` input rows and column
  the smallest integer multiplier ``m <= M`` that covers the block, codes ``q in [-7, 7]``;
  the weight is ``q * m * base``. PyTorch has no block quantizer with integer block
  multipliers, so this one is written here (a few tensor ops, straight-through gradient:
  ``w + (fq(w) - w).detach()``); a test checks it against :func:`~albert_edge.onnx.quant.int4.pack`.

Which weights: every ``nn.Linear`` of the model (ORT's quantizer takes every MatMul/Gemm
weight: projection E->H, attention, FFN, pooler, classifier). The attention's Q, K and V
share one per-tensor scale, because convert quantizes them as one fused weight
``[H, 3H]`` (QAttention, or the static recipe's unfused MatMul). ALBERT's shared layer is
one set of parameters: it is fake-quantized once per forward and the result used at every
depth (``torch.func.functional_call``), as the artifact stores it once.

The embedding tables, as albert-edge's own table passes store them
(:mod:`albert_edge.onnx.quant.embed`, the recipe's
:data:`~albert_edge.onnx.quant.recipes.EMBEDDING_RECIPES`; :func:`fake_tables`): the word
table at int8 one fp16 scale per row (int8-dynamic), int8 per tensor (int8-static), or
4-bit codes per block with one-byte or 4-bit log-grid scales times a super-scale (int4 on
int8 kernels); the side tables (position, and token types when they reach
:data:`~albert_edge.onnx.quant.tables.MIN_SIDE_TABLE` values) int8 per column, or 4-bit
per row at int4. A test checks them value for value against the tables ONNX Runtime reads
from a converted artifact. The TFLite routes (ai-edge-quantizer: per-channel FC weights,
per-tensor EMBEDDING_LOOKUP) are not simulated.

``int8-static`` adds the activations ``quantize_static`` quantizes, with ranges from
torch.ao observers (:mod:`albert_edge.learn.qat_static`). The run-time activation
quantization of the dynamic recipes (int8, int4) is not simulated; ``fp16`` has no
trainable quantizer here and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from albert_edge.learn.errors import LearnError

PRECISIONS = ("int8", "int4", "int8-static")
# ``--qat`` value -> the ``convert --precision`` whose recipe it simulates
CONVERT_PRECISION = {"int8": "int8-dynamic", "int4": "int4", "int8-static": "int8-static"}


@dataclass(frozen=True)
class QatSpec:
    """What is simulated: the convert precision, its int8 ``--target`` recipe, the int4
    block request (convert's ``--block-size``); for int8-static the activation ranges'
    schedule (:mod:`albert_edge.learn.qat_static`): EMA observers with ``ema`` as the
    averaging constant until ``freeze`` of the steps, then the recipe's calibration method
    (``minmax``) over ``num_calibration`` training sentences, frozen to the end."""

    precision: str
    target: str = "portable"
    block_size: int = 256
    ema: float = 0.01
    freeze: float = 0.75
    num_calibration: int = 128
    calibration_method: str = "minmax"

    @property
    def convert_precision(self) -> str:
        return CONVERT_PRECISION[self.precision]

    @property
    def static(self) -> bool:
        return self.precision == "int8-static"

    def limit(self) -> int:
        from albert_edge.onnx.quant.recipes import SATURATION_FREE_MAX_ABS, int8_recipe

        return SATURATION_FREE_MAX_ABS if int8_recipe(self.target).reduce_range else 127

    def per_channel(self) -> bool:
        from albert_edge.onnx.quant.recipes import int8_recipe

        return int8_recipe(self.target).per_channel

    def _exception_note(self) -> str:
        from albert_edge.onnx.quant.recipes import int8_recipe

        spread = int8_recipe(self.target).channel_spread
        if self.per_channel() or spread is None or self.precision == "int4":
            return ""
        return f" (per output channel where its channels' max |w| spread over {spread:g}x)"

    def record(self) -> dict[str, Any]:
        """What ``training.json`` (and the converted manifest's ``trained_for``) says:
        the simulated recipe, and the convert options it holds for (``convert_options``:
        convert lists every one its artifact differs in)."""
        from albert_edge.onnx.quant.recipes import RECIPES

        name = self.convert_precision
        rec: dict[str, Any] = {
            "precision": self.precision,
            "convert_precision": name,
            "target": self.target,
            "recipe": RECIPES[name].description,
            "weights": ("per output channel" if self.per_channel() else "per tensor")
            + self._exception_note()
            + f", |q| <= {self.limit()}"
            + (
                f", 4-bit codes in blocks of <= {self.block_size} input rows"
                if self.precision == "int4"
                else ""
            ),
            "tables": table_recipe(self),
            "simulated": "every Linear weight (Q/K/V one scale); the word table and the "
            "side tables (position embeddings; token types when they reach the side-table "
            "minimum) as convert stores them"
            + (
                "; uint8 per-tensor activations at every tensor quantize_static quantizes "
                "(each quantized MatMul's input and output before its bias)"
                if self.static
                else "; not the run-time activation quantization"
            ),
            "convert_options": {
                "precision": name,
                "runs_on": self.target,
                "quantize_embeddings": True,
                **(
                    {"block_size": self.block_size, "int4_kernel": "int8"} if name == "int4" else {}
                ),
                **({"calibration_method": self.calibration_method} if self.static else {}),
            },
        }
        if self.static:
            rec["activations"] = {
                "observer": "torch.ao MovingAverageMinMaxObserver (averaging constant "
                f"{self.ema}) on real tokens (padding excluded) until {self.freeze:g} of the "
                f"steps, then MinMaxObserver over the first {self.num_calibration} training "
                "sentences with the weights of that step, frozen to the end",
                "approximates": "convert's ranges: quantize_static's MinMax over --calibration "
                "sentences, computed again on the trained weights (the simulated ranges are "
                "recorded as activation_ranges, for comparison; convert does not read them)",
            }
        return rec


def table_recipe(spec: QatSpec) -> str:
    """How convert stores the tables at ``spec``'s precision (the recipe's embedding
    recipe, :data:`~albert_edge.onnx.quant.recipes.EMBEDDING_RECIPES`)."""
    from albert_edge.onnx.quant.recipes import RECIPES

    emb = RECIPES[spec.convert_precision].embeddings
    assert emb is not None
    return f"{emb.name}: {emb.description}"


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
    return QatSpec(str(precision), target, block_size)


def fake_int8(w: Any, absmax: Any, spec: QatSpec) -> Any:
    """int8 symmetric fake quantization of a ``[out, in]`` weight (straight-through)."""
    import torch

    lim = spec.limit()
    if absmax.ndim:  # one per output channel (_absmax: the recipe's, or its exception)
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


def _absmax(weights: list[Any], per_channel: bool, spec: QatSpec | None = None) -> Any:
    """The scale's absmax over ``weights`` (one fused tensor for Q/K/V): per output
    channel (``[N]``) where ``per_channel``, or where ``spec``'s per-tensor int8 recipe
    makes the weight its exception as convert does (``channel_spread``: its channels'
    largest max |w| over their median, :func:`albert_edge.onnx.quant.recipes.spread_of`);
    else one (``[]``)."""
    import torch

    cols = torch.cat([w.detach().abs().amax(dim=1) for w in weights])
    if per_channel or (spec is not None and _exception(cols, spec)):
        return cols
    return cols.max()


def _exception(cols: Any, spec: QatSpec) -> bool:
    """Whether convert stores this int8 weight per channel under a per-tensor recipe."""
    from albert_edge.onnx.quant.recipes import int8_recipe, spread_of

    threshold = int8_recipe(spec.target).channel_spread
    if spec.precision == "int4" or threshold is None:  # int4 keeps its own scales
        return False
    return spread_of(cols.float().cpu().numpy()) > threshold


def fake_quantized(model: Any, spec: QatSpec) -> dict[str, Any]:
    """``{parameter name: fake-quantized weight}`` for every Linear weight of ``model``,
    each computed once (the shared layer's too), and the embedding tables convert
    quantizes (:func:`fake_tables`)."""
    import torch

    fq = fake_int4 if spec.precision == "int4" else fake_int8
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    out: dict[str, Any] = {}
    per_channel = spec.per_channel()
    for name, mod in linears.items():
        if name.endswith((".query", ".key", ".value")):
            stem = name.rsplit(".", 1)[0]
            if f"{stem}.query.weight" in out:
                continue
            group = [linears[f"{stem}.{p}"] for p in ("query", "key", "value")]
            amax = _absmax([m.weight for m in group], per_channel, spec)
            for p, m in zip(("query", "key", "value"), group, strict=True):
                rows = m.weight.shape[0]
                i = ("query", "key", "value").index(p)
                a = amax[i * rows : (i + 1) * rows] if amax.ndim else amax
                out[f"{stem}.{p}.weight"] = fq(m.weight, a, spec)
            continue
        out[f"{name}.weight"] = fq(mod.weight, _absmax([mod.weight], per_channel, spec), spec)
    out.update(fake_tables(model, spec))
    return out


# --- the embedding tables, as albert-edge's own table passes store them -----------------
#
# The formulas are :func:`albert_edge.onnx.quant.tables.quantize_blocks` (word table,
# 4-bit side tables), :func:`albert_edge.onnx.quant.embed._qdq_table` (int8-static word
# table) and :func:`albert_edge.onnx.quant.embed.quantize_side_tables` (int8 per column),
# written again in torch so that they run on the training device every step; a test
# checks them against the tables ONNX Runtime reads from a converted artifact.


def _ste(w: Any, deq: Any) -> Any:
    """``deq`` forward, the identity backward (straight-through)."""
    return w + (deq - w).detach()


def _blocks(w: Any, bits: int, block: int, scales: str) -> Any:
    """Symmetric codes per block of ``block`` values along a row, dequantized, with the
    stored scale format applied first (``fp16``, ``u8`` x super-scale, ``u4log``)."""
    import torch

    v, e = w.shape
    nb = -(-e // block)
    d = torch.nn.functional.pad(w.detach().float(), (0, nb * block - e))
    blocks = d.reshape(v, nb, block)
    qmax = 2 ** (bits - 1) - 1
    step = blocks.abs().amax(dim=-1) / qmax
    if scales == "u8":
        sup = float(step.max()) / 255.0 or 1.0
        stored = torch.clamp(torch.ceil(step / sup - 1e-6), 1, 255)
        step = stored * torch.tensor(sup, dtype=torch.float32, device=w.device)
    elif scales == "u4log":
        sup = float(step.max()) or 1.0
        ratio = torch.clamp_min(step[:, :1], 1e-30) / sup
        k = torch.clamp(torch.floor(-torch.log2(ratio) * 4 + 1e-9), 0, 15)
        two = torch.tensor(2.0, dtype=torch.float32, device=w.device)
        step = torch.tensor(sup, dtype=torch.float32, device=w.device) * torch.pow(two, -k / 4)
    else:
        step = torch.where(step == 0, torch.ones_like(step), step)
        if scales == "fp16":
            step = step.half().float()
    q = torch.clamp(torch.round(blocks / step[..., None]), -qmax, qmax)
    return (q * step[..., None]).reshape(v, nb * block)[:, :e].to(w.dtype)


def _per_tensor(w: Any, qmax: int) -> Any:
    """int8 per tensor (the int8-static word table: Gather + DequantizeLinear)."""
    import torch

    amax = float(w.detach().abs().max()) or 1.0
    scale = torch.tensor(amax / qmax, dtype=torch.float32, device=w.device)
    return torch.clamp(torch.round(w.detach() / scale), -qmax, qmax) * scale


def _per_column(w: Any) -> Any:
    """int8 per column (side tables of the int8 recipes: Gather + DequantizeLinear)."""
    import torch

    scale = w.detach().abs().amax(dim=0) / 127.0
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.clamp(torch.round(w.detach() / scale), -127, 127) * scale


def fake_tables(model: Any, spec: QatSpec) -> dict[str, Any]:
    """``{parameter name: fake-quantized table}``: the word table at the recipe's
    embedding recipe, the side tables (position; token type past
    :data:`~albert_edge.onnx.quant.tables.MIN_SIDE_TABLE` values) as
    :func:`~albert_edge.onnx.quant.embed.quantize_side_tables` stores them. A
    classifier has no tied decoder, so the tables take their gather-only forms."""
    from albert_edge.onnx.quant.tables import (
        MIN_SIDE_TABLE,
        table_block_size,
        table_scale_format,
    )

    emb = getattr(getattr(model, "albert", model), "embeddings", None)
    if emb is None:
        return {}
    prefix = "albert.embeddings." if hasattr(model, "albert") else "embeddings."
    word = emb.word_embeddings.weight
    e = int(word.shape[1])
    out: dict[str, Any] = {}
    if spec.precision == "int8-static":
        out["word_embeddings.weight"] = _ste(word, _per_tensor(word, 127))
    else:
        bits = 4 if spec.precision == "int4" else 8
        fold = bits == 4  # int4 on int8 kernels: the table unpacked to int8 at load
        block = table_block_size(e, bits, spec.block_size, tied=False, fold=fold)
        fmt = table_scale_format(bits, tied=False, dim=e, fold=fold)
        out["word_embeddings.weight"] = _ste(word, _blocks(word, bits, block, fmt))
    for side in ("position_embeddings", "token_type_embeddings"):
        t = getattr(emb, side).weight
        if t.numel() < MIN_SIDE_TABLE:
            continue
        if spec.precision == "int4" and t.shape[1] % 2 == 0:
            out[f"{side}.weight"] = _ste(t, _blocks(t, 4, int(t.shape[1]), "u8"))
        else:
            out[f"{side}.weight"] = _ste(t, _per_column(t))
    return {prefix + k: v for k, v in out.items()}
