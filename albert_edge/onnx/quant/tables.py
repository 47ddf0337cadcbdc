"""Quantizing ALBERT's V×E word-embedding table, still factorized and still stored once.

Why by hand: ONNX Runtime's ``MatMulNBitsQuantizer`` quantizes Gather only to 4 bits and
writes INT4 tensors, which forces opset 21 onto a graph exported for opset 17 (its own
log says "the generated model may not be a valid model"); ``quantize_dynamic``'s Gather
support is per-tensor uint8. Neither knows that ALBERT's masked-LM decoder reads the
same table (tied weights). So albert-edge writes the table itself, once (the rewrite is the onnx-ir pass
:mod:`albert_edge.onnx.quant.embed`; this module holds the storage formats, the
table's readers):

* ORT CPU recipes (int8-dynamic, int4): symmetric codes — int8 with one fp16 scale per
  row, or two 4-bit codes per byte (low nibble first) with one scale per block of E —
  read by standard ONNX ops only (``gather_rows``: Gather the codes and the scales
  of the looked-up rows, Cast, Mul), so every runtime loads them (transformers.js'
  bundled onnxruntime-web has no ``GatherBlockQuantized``, the contrib op earlier
  versions wrote; the forms measured are in docs/precisions.md); a tied
  decoder reads the very same initializer through ``MatMulNBits`` (a Reshape of the
  codes to [V, blocks, blob], which ORT folds at load) — one table in the file, two
  consumers.
* int8-static (QDQ, for accelerators): standard ops only — Gather on an int8 table, then
  DequantizeLinear with a per-tensor scale; a tied decoder reads DequantizeLinear(table).

The table stays V×E; nothing here ever materialises a V×H tensor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import onnx_ir as ir

from albert_edge.errors import QuantizationError

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class TableUse:
    """Where the word table is read: gathers, and tied decoder MatMuls — MatMul on a
    Transpose of the table, or (albert-edge's canonical form) Gemm(x, table, transB=1)."""

    table: str
    vocab: int
    dim: int
    gathers: tuple[str, ...]
    tied_matmuls: tuple[str, ...]
    embed_layernorms: tuple[str, ...] = ()  # fused EmbedLayerNormalization readers
    others: tuple[str, ...] = ()  # any other reader: the table cannot be quantized here

    def check_quantizable(self) -> None:
        if self.others:
            raise QuantizationError(
                f"the word-embedding table {self.table} is read by {', '.join(self.others)}; "
                "albert-edge quantizes embeddings read by Gather, EmbedLayerNormalization and "
                "a tied decoder only; pass --keep-embeddings-wide"
            )


def readers(model: ir.Model, value: ir.Value | None) -> list[tuple[ir.Node, int]]:
    """The nodes reading ``value`` and at which input, in graph order (``value.uses()``
    lists them in the order they were wired, which a rewrite changes)."""
    if value is None:
        return []
    return [(n, i) for n in model.graph for i, v in enumerate(n.inputs) if v is value]


def _dims(value: ir.Value) -> tuple[int, ...]:
    assert value.const_value is not None
    return tuple(value.const_value.shape.numpy())


def find_word_table(model: ir.Model, vocab_size: int | None = None) -> TableUse | None:
    """The word-embedding initializer and its readers, or None if the graph has none.

    The table is the 2-D float initializer gathered by a Gather whose first dimension is
    ``vocab_size`` (when known), else the largest gathered table. Readers other than
    Gather, EmbedLayerNormalization and a tied decoder are listed in ``others``
    (:meth:`TableUse.check_quantizable` refuses them).
    """
    candidates: dict[str, ir.Value] = {}
    for node in model.graph:
        first = node.inputs[0] if node.inputs else None
        if node.op_type == "Gather" and first is not None and first.is_initializer():
            t = first.const_value
            if t is not None and len(t.shape) == 2 and t.dtype in _TABLE_DTYPES:
                candidates[str(first.name)] = first
        eln = node.inputs[2] if len(node.inputs) > 2 else None
        if node.op_type == "EmbedLayerNormalization" and eln is not None and eln.is_initializer():
            candidates[str(eln.name)] = eln
    if not candidates:
        return None
    size = {n: _dims(v)[0] * _dims(v)[1] for n, v in candidates.items()}
    exact = [n for n in candidates if vocab_size and _dims(candidates[n])[0] == vocab_size]
    table = exact[0] if exact else max(size, key=lambda n: size[n])
    value = candidates[table]
    gathers, tied, fused, other = [], [], [], []
    for node, slot in readers(model, value):
        name = str(node.name or "")
        if node.op_type == "Gather" and slot == 0:
            gathers.append(name)
        elif node.op_type == "EmbedLayerNormalization" and slot == 2:
            fused.append(name)
        elif node.op_type == "Gemm" and slot == 1 and _is_plain_gemm_transb(node):
            tied.append(name)  # canonical tied decoder: Gemm(x, table, b, transB=1)
        elif node.op_type == "Transpose" and all(
            c.op_type == "MatMul" and s == 1 for c, s in readers(model, node.outputs[0])
        ):
            tied.extend(str(c.name or "") for c, _ in readers(model, node.outputs[0]))
        else:
            other.append(f"{node.op_type} {name!r}")
    v, e = _dims(value)
    return TableUse(table, v, e, tuple(gathers), tuple(tied), tuple(fused), tuple(other))


_TABLE_DTYPES = (ir.DataType.FLOAT, ir.DataType.FLOAT16)


def _is_plain_gemm_transb(node: ir.Node) -> bool:
    def attr(name: str, default: float) -> float:
        a = node.attributes.get(name)
        return float(a.value) if a is not None else default

    return (
        attr("transB", 0) == 1
        and attr("transA", 0) == 0
        and attr("alpha", 1.0) == 1.0
        and attr("beta", 1.0) == 1.0
    )


def table_block_size(
    dim: int, bits: int, block_size: int, *, tied: bool = False, fold: bool = False
) -> int:
    """The block along E that one scale covers; it always divides E (the gathered rows
    are dequantized as [.., E/block, block] × [.., E/block, 1]).

    int8 — the whole row (one scale per token), or for a tied decoder the largest power
    of two ≥ 16 dividing E (MatMulNBits' blocks); int4 — ``block_size``, halved (not
    below 16) until it divides E and is no longer than it; int4 unpacked at load
    (``fold``, no MatMulNBits reads the codes) — the largest divisor of E up to
    ``block_size``: any E (100, 24, ...), the whole row when E ≤ ``block_size``.
    """
    if bits == 8 and not tied:
        return dim
    if fold and not tied:
        return max(d for d in range(1, min(dim, block_size) + 1) if dim % d == 0)
    b = block_size
    if bits == 8:
        b = 16
        while b < dim:
            b *= 2
    while b > 16 and (b > dim or dim % b):
        b //= 2
    if dim % b:
        raise QuantizationError(
            f"a quantized word table needs E={dim} divisible by a block size >= 16; "
            "pass --keep-embeddings-wide for this model"
        )
    return b


# A row's scale byte may cost at most this fraction of the row's 4-bit codes; above it
# (E < 100: the trained tiny model's E=64 pays 3.1 %, 30 kB, most of its distance to the
# 1.05x floor bar) the folded int4 table stores 4-bit log2 scales, two rows per byte.
ROW_SCALE_BUDGET = 0.02


def table_scale_format(bits: int, *, tied: bool, dim: int = 128, fold: bool = False) -> str:
    """How a quantized word table stores its scales (see :func:`albert_edge.onnx.quant.embed.quantize_word_table`).

    "u4log" (folded int4 tables with E·bits/8 · :data:`ROW_SCALE_BUDGET` < 1 byte): four
    bits per row, the scale ``super · 2^(-k/4)``, k in 0..15 — a quarter-octave grid over
    four octaves, decoded once at load (``albert_edge.Int4Scales``). Why: where E is small
    a byte per row is a large share of the row's codes, and the log grid keeps the table's
    error and SST-2 accuracy (within the int4 bar) at half the scale bytes
    (measured: docs/precisions.md).
    """
    if tied:
        return "fp32"
    if bits == 4 and fold and dim * bits / 8 * ROW_SCALE_BUDGET < 1:
        return "u4log"
    return "u8" if bits == 4 else "fp16"


def decode_log_scales(k: np.ndarray) -> np.ndarray:
    """``2^(-k/4)`` in float32, as ``albert_edge.Int4Scales`` computes it (Pow in fp32)."""
    import numpy as np

    return np.power(np.float32(2.0), -k.astype(np.float32) / np.float32(4.0)).astype(np.float32)


def quantize_blocks(
    w: np.ndarray, bits: int, block: int, *, scales: str = "fp32", signed: bool = False
) -> tuple[np.ndarray, np.ndarray, float | None]:
    """Symmetric blockwise codes, the stored scales [V, nb], and the scales' own scale.

    Codes: int8 in [-127, 127] (``signed``, 8-bit only), else uint8 with zero point
    2^(bits-1) (4-bit: two codes per byte, low nibble first — MatMulNBits' layout).
    ``scales``: how they are stored — "fp32"; "fp16" (half the bytes); "u8": one byte per
    block, scale = code × one fp32 super-scale (the third value returned; None otherwise),
    code = ceil(scale / super) so a rounded scale is never smaller and no value clips.
    At E=64 per-row fp32/fp16 scales cost 12.5/6.25 % of a 4-bit table; "u8" 3.1 %, with
    the same table error (measured: docs/precisions.md).
    Every stored form is applied *before* the codes are computed, so codes and the scales
    a reader sees agree.
    """
    import numpy as np

    v, e = w.shape
    nb = -(-e // block)
    padded = np.zeros((v, nb * block), dtype=np.float32)
    padded[:, :e] = w
    blocks = padded.reshape(v, nb, block)
    qmax = 2 ** (bits - 1) - 1
    step = np.abs(blocks).max(axis=-1) / qmax
    super_scale: float | None = None
    if scales == "u8":
        super_scale = float(step.max()) / 255.0 or 1.0
        stored = np.clip(np.ceil(step / super_scale - 1e-6), 1, 255).astype(np.uint8)
        step = stored.astype(np.float32) * np.float32(super_scale)
    elif scales == "u4log":  # k = floor(-4·log2(step/max)): the stored scale is never smaller
        if nb != 1:
            raise QuantizationError("4-bit log scales are one per row")
        super_scale = float(step.max()) or 1.0
        ratio = np.maximum(step[:, 0], 1e-30) / super_scale
        k = np.clip(np.floor(-np.log2(ratio) * 4 + 1e-9), 0, 15).astype(np.uint8)
        step = (np.float32(super_scale) * decode_log_scales(k))[:, None]
        k = np.concatenate([k, np.zeros(v % 2, np.uint8)])  # pad to whole bytes
        stored = (k[0::2] | (k[1::2] << 4)).astype(np.uint8)
    elif scales == "fp16":
        step[step == 0] = 1.0
        stored = step.astype(np.float16)
        step = stored.astype(np.float32)
    else:
        step[step == 0] = 1.0
        stored = step.astype(np.float32)
    q = np.clip(np.rint(blocks / step[..., None]), -qmax, qmax).reshape(v, nb * block)[:, :e]
    if signed:
        if bits != 8:
            raise QuantizationError("signed table codes are 8-bit only")
        codes = q.astype(np.int8)
    else:
        codes = (q + 2 ** (bits - 1)).astype(np.uint8)
    if bits == 4:
        codes = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return np.ascontiguousarray(codes), stored, super_scale


@dataclass(frozen=True)
class TableForm:
    """How a quantized table is stored: codes [V, E·bits/8], scales [V, E/block] (fp32,
    fp16, or uint8 × the fp32 ``super_scale`` initializer)."""

    codes: str
    scales: str
    bits: int
    block: int
    dim: int
    offset: int  # zero point of the codes (0: signed int8)
    scale_format: str  # "fp32" | "fp16" | "u8" | "u4log"
    super_scale: str | None = None  # name of the fp32 scalar that u8 scales multiply
    # 4-bit codes unpacked once, at load, into an int8 [V, E] table (albert_edge.Int4Rows,
    # constant-folded by ONNX Runtime): int4 bytes on disk, int8's gather at run time
    fold: bool = False


# Side tables smaller than this stay float: below it the DequantizeLinear costs more
# bytes (a scale per column) and nodes than the table saves.
MIN_SIDE_TABLE = 1024


def side_tables(model: ir.Model, word_table: str | None) -> list[str]:
    """Float 2-D initializers of at least :data:`MIN_SIDE_TABLE` values, other than the
    word table, read only as ``Gather(table, ids)`` on axis 0 (position embeddings)."""
    out = []
    for name, value in model.graph.initializers.items():
        t = value.const_value
        if name == word_table or t is None or len(t.shape) != 2 or t.dtype != ir.DataType.FLOAT:
            continue
        if math.prod(t.shape.numpy()) < MIN_SIDE_TABLE:
            continue
        reads = readers(model, value)
        if reads and all(
            n.op_type == "Gather"
            and slot == 0
            and (n.attributes.get("axis") is None or n.attributes["axis"].as_int() == 0)
            for n, slot in reads
        ):
            out.append(name)
    return out
