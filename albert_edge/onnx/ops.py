"""The ONNX op tables every graph fact reads, defined once.

Why a module of its own, importing nothing: the weight-op table is read by the counts
(:mod:`albert_edge.onnx.inspect`), the passes (canonicalize, the factorization guard), the
quantizer and early-exit's probe; a leaf module lets every one of them import it without
an import cycle.
"""

from __future__ import annotations

# The one table of ops that apply a constant weight: op → (index of its weight input, kind).
# kind "onnx": the standard float ops export and the passes write; "fused": ONNX Runtime's
# float fusions (Attention, and its load-time FusedMatMul/FusedGemm); "integer": ops that
# compute on a quantized weight. The counts, the quantizer's plan, canonicalize, the
# factorization guard and early-exit's probe all read this table.
WEIGHT_OPS: dict[str, tuple[int, str]] = {
    "MatMul": (1, "onnx"),
    "Gemm": (1, "onnx"),
    "Attention": (1, "fused"),
    "FusedMatMul": (1, "fused"),
    "FusedGemm": (1, "fused"),
    "MatMulInteger": (1, "integer"),
    "DynamicQuantizeMatMul": (1, "integer"),
    "MatMulIntegerToFloat": (1, "integer"),
    "QAttention": (1, "integer"),
    "MatMulNBits": (1, "integer"),
    "MatMulBnb4": (1, "integer"),
    "QLinearMatMul": (3, "integer"),
    "QGemm": (3, "integer"),
}
STANDARD_WEIGHT_OPS = tuple(op for op, (_, kind) in WEIGHT_OPS.items() if kind == "onnx")
INT_WEIGHT_OPS = {op: slot for op, (slot, kind) in WEIGHT_OPS.items() if kind == "integer"}
FLOAT_WEIGHT_OPS = {op: slot for op, (slot, kind) in WEIGHT_OPS.items() if kind != "integer"}
# albert_edge.Int4Weight / Int4Rows (:mod:`albert_edge.onnx.quant.int4`): decodes a weight
# or table passes through at load; readers follow their first input to the codes.
INT4_DECODE_OPS = ("Int4Weight", "Int4Rows")
# Any of these in a graph means it has been quantized already.
QUANT_MARKER_OPS = frozenset(
    {
        *INT_WEIGHT_OPS,
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "GatherBlockQuantized",
        "QEmbedLayerNormalization",
        "ConvInteger",
        "QLinearConv",
        "QLinearAdd",
        "QLinearMul",
        *INT4_DECODE_OPS,
    }
)

__all__ = [
    "FLOAT_WEIGHT_OPS",
    "INT4_DECODE_OPS",
    "INT_WEIGHT_OPS",
    "QUANT_MARKER_OPS",
    "STANDARD_WEIGHT_OPS",
    "WEIGHT_OPS",
]
