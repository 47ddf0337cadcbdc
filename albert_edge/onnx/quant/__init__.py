"""Quantization as passes: each ONNX precision is a named, frozen recipe
(:data:`~albert_edge.onnx.passes.quant.recipes.RECIPES`) executed as an ordered list of
onnx_ir passes with checked postconditions.

ONNX Runtime's quantizers (``quantize_dynamic``, ``quantize_static``,
``MatMulNBitsQuantizer``, the float16 converter) do the per-node work
(:mod:`~albert_edge.onnx.passes.quant.ort`); albert-edge's own passes do what they cannot:
the canonical one-initializer-per-weight form (:mod:`~.prepare`), the rewrites they lack
(:mod:`~.rewrite`), the word and position tables (:mod:`~.embed`), dedup and the
postconditions (:mod:`~.check`): every weight MatMul quantized, every shared weight once.
"""

from albert_edge.onnx.passes.quant.plan import (
    INT4_ACCURACY_LEVEL,
    Plan,
    floor_bytes,
    int4_block_size,
)
from albert_edge.onnx.passes.quant.recipes import (
    EMBEDDING_RECIPES,
    RECIPES,
    EmbeddingRecipe,
    QuantRecipe,
    build_passes,
    recipe,
)
from albert_edge.onnx.passes.quant.state import QuantState, quiet

__all__ = [
    "EMBEDDING_RECIPES",
    "INT4_ACCURACY_LEVEL",
    "RECIPES",
    "EmbeddingRecipe",
    "Plan",
    "QuantRecipe",
    "QuantState",
    "build_passes",
    "floor_bytes",
    "int4_block_size",
    "quiet",
    "recipe",
]
