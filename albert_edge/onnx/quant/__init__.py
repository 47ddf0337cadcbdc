"""ONNX quantization, in one home: every precision a named recipe run as onnx_ir passes.

* :mod:`~albert_edge.onnx.quant.front` — the front end: :func:`quantize_model`,
  :func:`check_options`, :func:`load_calibration`, the pass list of a recipe and the
  manifest's report;
* :mod:`~albert_edge.onnx.quant.artifact` — ``albert-edge quantize``
  (:func:`~albert_edge.onnx.quant.artifact.quantize_artifact`: an fp32 artifact in, a
  quantized artifact out);
* :mod:`~albert_edge.onnx.quant.recipes` — the recipes as data: the ONNX precisions
  (:data:`~albert_edge.onnx.quant.recipes.RECIPES`), the word-table forms and the int8
  recipe per ``--target``;
* the passes: :mod:`~.prepare` (one initializer per weight), :mod:`~.rewrite` (the
  rewrites ORT's quantizers lack), :mod:`~.plan` (weights and their byte bound),
  :mod:`~.ort` (ONNX Runtime's quantizers, the one proto boundary), :mod:`~.embed` and
  :mod:`~.tables` (the word and position tables), :mod:`~.int4` (4-bit storage for int8
  kernels), :mod:`~.check` (dedup and the postconditions); :mod:`~.calib` feeds
  int8-static's calibration.

Every graph fact the passes read (weight MatMuls and their count, shared weights, markers
of a quantized graph) is :mod:`albert_edge.onnx.inspect`'s, on the onnx_ir model: the
same functions fill the manifest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from albert_edge.onnx.quant.front import (
        QUANT_PRECISIONS,
        build_passes,
        check_options,
        load_calibration,
        quantize_model,
    )
    from albert_edge.onnx.quant.plan import INT4_ACCURACY_LEVEL, Plan, int4_block_size
    from albert_edge.onnx.quant.recipes import (
        EMBEDDING_RECIPES,
        RECIPES,
        EmbeddingRecipe,
        QuantRecipe,
        recipe,
    )
    from albert_edge.onnx.quant.state import QuantState, quiet

# Loaded on first use: ``albert_edge.options`` reads :mod:`~.recipes` (the int8 targets)
# and must not pay for onnx_ir and the passes to do so.
_HOMES = {
    **dict.fromkeys(
        ("QUANT_PRECISIONS", "build_passes", "check_options", "load_calibration", "quantize_model"),
        "front",
    ),
    **dict.fromkeys(("INT4_ACCURACY_LEVEL", "Plan", "int4_block_size"), "plan"),
    **dict.fromkeys(
        ("EMBEDDING_RECIPES", "RECIPES", "EmbeddingRecipe", "QuantRecipe", "recipe"), "recipes"
    ),
    **dict.fromkeys(("QuantState", "quiet"), "state"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "EMBEDDING_RECIPES",
    "INT4_ACCURACY_LEVEL",
    "QUANT_PRECISIONS",
    "RECIPES",
    "EmbeddingRecipe",
    "Plan",
    "QuantRecipe",
    "QuantState",
    "build_passes",
    "check_options",
    "int4_block_size",
    "load_calibration",
    "quantize_model",
    "quiet",
    "recipe",
]
