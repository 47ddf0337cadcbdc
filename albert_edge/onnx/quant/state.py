"""What the quantization passes of one recipe share: the options, the word table, the
plan and its floor, and the proto boundary to ONNX Runtime's quantizers.

ORT's quantizers (and the float16 converter) consume and produce ``onnx.ModelProto``;
every other quantization pass, and every fact read off the graph, works on the
``onnx_ir`` model. :func:`proto_of` and :func:`model_of` are the one place the two
meet, so each crossing gives the quantizer the graph it always got: no value_info (ORT re-runs shape inference and fails on stale
shapes), and one initializer per name (ORT's per-node quantizers append the same
quantized weight once per consumer).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import onnx_ir as ir

from albert_edge.errors import QuantizationError

if TYPE_CHECKING:
    import onnx

    from albert_edge.onnx.quant.recipes import QuantRecipe
    from albert_edge.onnx.quant.tables import TableUse
    from albert_edge.options import ConvertOptions


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence ORT's quantizer chatter (it warns through the root logger on every call)."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


@dataclass
class Plan:
    """The weights one quantization must quantize and how (found by
    :class:`albert_edge.onnx.quant.plan.PlanPass`; defined here, below it, as a field
    of :class:`QuantState`)."""

    precision: str
    per_channel: bool
    block_size: int
    weights: dict[str, tuple[int, int]]  # initializer → (K, N) of every weight to quantize
    table: TableUse | None
    quantize_table: bool
    table_bits: int
    table_block: int
    side_tables: tuple[str, ...] = ()  # position tables stored int8 per column
    int4_folded: bool = False  # int4 for int8 kernels (ConvertOptions.int4_folded)
    # a precision plan's int8 weights inside the int4 recipe (stored int8, not packed)
    int8_weights: frozenset[str] = frozenset()
    side_bits: dict[str, int] | None = None  # bits per side table (None: table_bits)
    # int8 weights with one scale per output channel in a per-tensor recipe (the recipe's
    # ``channel_spread`` exception), each with its spread: largest / median channel max |w|
    channel_weights: dict[str, float] = field(default_factory=dict)


@dataclass
class QuantState:
    """Facts one pass finds and a later one needs (one object per quantize call).

    ``table`` is the word-embedding table's readers (re-found after every rewrite that
    moves them), ``plan``/``floor`` the weights to quantize and the bytes they need at
    best (:mod:`albert_edge.onnx.quant.plan`), ``protected`` the tied decoder
    nodes int8-dynamic must not let ``quantize_dynamic`` transpose in place.
    """

    options: ConvertOptions
    vocab: int | None = None
    recipe: QuantRecipe | None = None  # set by build_passes
    table: TableUse | None = None
    plan: Plan | None = None
    floor: int = 0
    nodes: list[str] = field(default_factory=list)  # nodes the quantizer may touch
    # weight nodes a precision plan keeps fp32 (ORT reads an empty nodes_to_quantize as
    # "all nodes", so they are also excluded by name)
    excluded: list[str] = field(default_factory=list)
    block_by_node: dict[str, int] = field(default_factory=dict)  # int4: block per node
    protected: list[str] = field(default_factory=list)
    feeds: list[dict[str, Any]] | None = None  # int8-static calibration inputs
    rewrites: dict[str, int] = field(default_factory=dict)
    embeddings: dict[str, Any] | str | None = None
    # fp32 originals of weights a pass after ORT's quantizer stores again: int4's codes,
    # the per-channel exceptions of a per-tensor int8 recipe
    float_weights: dict[str, Any] = field(default_factory=dict)

    @property
    def precision(self) -> str:
        return self.options.precision

    def unit_precision(self, name: str) -> str:
        """The precision a precision plan gives the weight or table ``name`` ("fp32",
        "int8", "int4"); without a plan, or for a name it does not list, the recipe's own
        width (int8 for the int8 recipes, else int4)."""
        default = "int8" if self.precision.startswith("int8") else "int4"
        return dict(self.options.unit_precisions).get(name, default)

    def unit_bits(self, name: str, default: int) -> int:
        """Bits of a table under the plan (0: kept fp32); ``default`` without a plan."""
        if not self.options.unit_precisions:
            return default
        return {"fp32": 0, "int8": 8, "int4": 4}[self.unit_precision(name)]

    @property
    def quantize_table(self) -> bool:
        return (
            self.options.quantize_embeddings
            and self.table is not None
            and self.unit_bits(self.table.table, 8) != 0
        )

    @property
    def quantize_tables(self) -> bool:
        """Whether the embedding passes run at all (the word table or a side table may
        stay fp32 under a precision plan, the other quantized)."""
        return self.options.quantize_embeddings and self.table is not None

    @property
    def tied(self) -> set[str]:
        """The word table, when a tied decoder reads it (it is quantized as a table)."""
        return {self.table.table} if self.table is not None and self.table.tied_matmuls else set()


def proto_of(model: ir.Model) -> onnx.ModelProto:
    """``model`` as the proto ORT's quantizers get: no value_info at all.

    onnx_ir gives every initializer a type on load and writes it back as value_info; the
    quantizers re-run ONNX shape inference and fail on stale shapes, so none goes in.
    """
    proto: onnx.ModelProto = ir.to_proto(model)
    del proto.graph.value_info[:]
    return proto


def model_of(proto: onnx.ModelProto, who: str) -> ir.Model:
    """``proto`` (a quantizer's output) as an onnx_ir model, one initializer per name.

    ORT's per-node quantizers append one quantized initializer per consumer of a shared
    weight, all with the same name and bytes; onnx_ir keeps one value per name, so the
    copies are dropped here — after checking they are copies (anything else would be a
    quantizer bug, and silently keeping either tensor would be wrong).
    """
    from onnx import numpy_helper

    def tensor_bytes(t: onnx.TensorProto) -> bytes:
        return bytes(t.raw_data) if t.HasField("raw_data") else numpy_helper.to_array(t).tobytes()

    seen: dict[str, onnx.TensorProto] = {}
    keep = []
    for t in proto.graph.initializer:
        if t.name in seen:
            first = seen[t.name]
            if tensor_bytes(first) != tensor_bytes(t) or list(first.dims) != list(t.dims):
                raise QuantizationError(
                    f"{who}: quantizer produced two different tensors named {t.name}; this is a bug"
                )
            continue
        seen[t.name] = t
        keep.append(t)
    if len(keep) != len(proto.graph.initializer):
        del proto.graph.initializer[:]
        proto.graph.initializer.extend(keep)
    return ir.from_proto(proto)
