"""ONNX Runtime's own quantizers as passes: they do the per-node work right, so they stay.

Each pass hands the quantizer a proto of the model (:func:`~albert_edge.onnx.quant.
state.proto_of`: no value_info) and reads its output back one initializer per name
(:func:`~albert_edge.onnx.quant.state.model_of`). What albert-edge adds around
them — one initializer per shared weight before, the rewrites they lack, dedup after — are
the other passes of the recipe. Postcondition of every quantizer pass: each node it was
asked to quantize no longer computes in fp32 (the recipe's final check counts all of them).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx_ir as ir

from albert_edge.errors import QuantizationError
from albert_edge.onnx.passes.base import AlbertFunctionalPass, AlbertInPlacePass
from albert_edge.onnx.quant.plan import INT4_ACCURACY_LEVEL
from albert_edge.onnx.quant.recipes import int8_recipe
from albert_edge.onnx.quant.state import QuantState, model_of, proto_of, quiet

if TYPE_CHECKING:
    import onnx

    from albert_edge.data import Calibration


def _load(path: Path) -> onnx.ModelProto:
    import onnx

    return onnx.load(str(path))


class _OrtPass(AlbertFunctionalPass):
    tool = ""

    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state

    def quantize(self, proto: onnx.ModelProto) -> onnx.ModelProto:
        raise NotImplementedError

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        out = self.quantize(proto_of(model))
        self.report = {"tool": self.tool, "nodes": len(self.state.nodes)}
        return ir.passes.PassResult(model_of(out, self.name), modified=True)

    def ensures(self, model: ir.Model) -> None:
        asked = set(self.state.nodes)
        float_left = [
            n.name
            for n in model.graph
            if n.name in asked
            and n.op_type in ("MatMul", "Attention", "Gemm")
            and not _reads_dequantized(n)
        ]
        if float_left:
            raise QuantizationError(
                f"{self.state.precision}: {self.tool} left {len(float_left)} node(s) in float "
                f"({', '.join(float_left[:4])}); this is a quantizer bug"
            )


def _reads_dequantized(node: ir.Node) -> bool:
    """A MatMul whose weight comes from DequantizeLinear (QDQ) or an fp16 initializer."""
    if len(node.inputs) < 2 or node.inputs[1] is None:
        return False
    w = node.inputs[1]
    src = w.producer()
    if src is not None and src.op_type == "DequantizeLinear":
        return True
    return w.const_value is not None and w.const_value.dtype in (
        ir.DataType.FLOAT16,
        ir.DataType.BFLOAT16,
    )


class OrtDynamicQuantPass(_OrtPass):
    """``onnxruntime.quantization.quantize_dynamic`` (QOperator: MatMulInteger, QAttention
    on the fused graph): int8 weights per the ``--target`` recipe, activations at run time."""

    name = "quant-ort-dynamic"
    tool = "quantize_dynamic"

    def quantize(self, proto: onnx.ModelProto) -> onnx.ModelProto:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        opts = self.state.options
        recipe = int8_recipe(opts.runs_on)
        with tempfile.TemporaryDirectory(prefix="albert-edge-q-") as d, quiet():
            out = Path(d) / "q.onnx"
            quantize_dynamic(
                proto,
                out,
                per_channel=opts.weight_per_channel,
                reduce_range=recipe.reduce_range,
                weight_type=QuantType.QUInt8 if recipe.weight_type == "u8" else QuantType.QInt8,
                op_types_to_quantize=["MatMul", "Attention"],
                nodes_to_quantize=self.state.nodes,
                nodes_to_exclude=self.state.excluded,
                extra_options={
                    "DefaultTensorType": onnx.TensorProto.FLOAT,
                    "MatMulConstBOnly": True,
                },
            )
            return _load(out)


class CalibrationFeedsPass(AlbertInPlacePass):
    """int8-static: one feed per calibration sentence, shaped as the graph's inputs
    (:func:`albert_edge.onnx.quant.calib.calibration_feeds`). Changes nothing."""

    name = "quant-calibration-feeds"

    def __init__(
        self, state: QuantState, texts: list[str] | Calibration, tokenizer: Any, max_length: int
    ):
        super().__init__()
        self.state, self.texts, self.tokenizer, self.max_length = (
            state,
            texts,
            tokenizer,
            max_length,
        )

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        from albert_edge.onnx.quant.calib import calibration_feeds

        self.state.feeds = calibration_feeds(
            model, self.texts, self.tokenizer, max_length=self.max_length
        )
        self.report = {"samples": len(self.state.feeds)}
        return ir.passes.PassResult(model, modified=False)

    def ensures(self, model: ir.Model) -> None:
        if not self.state.feeds:
            self.fail("no calibration feeds")


class OrtStaticQuantPass(_OrtPass):
    """``onnxruntime.quantization.quantize_static`` (QDQ): int8 weights, uint8 activations
    with calibrated scales, on a graph typed by ORT's symbolic shape inference (ONNX's own
    skips com.microsoft ops, and untyped contrib outputs would stay fp32)."""

    name = "quant-ort-static"
    tool = "quantize_static"

    def quantize(self, proto: onnx.ModelProto) -> onnx.ModelProto:
        import onnx
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

        from albert_edge.onnx.quant.calib import calibrate_method, make_reader

        opts, plan = self.state.options, self.state.plan
        assert self.state.feeds is not None
        with tempfile.TemporaryDirectory(prefix="albert-edge-q-") as d, quiet():
            out = Path(d) / "q.onnx"
            quantize_static(
                _with_types(proto),
                out,
                make_reader(self.state.feeds),
                quant_format=QuantFormat.QDQ,
                op_types_to_quantize=["MatMul"],
                nodes_to_quantize=self.state.nodes,
                nodes_to_exclude=self.state.excluded,
                per_channel=opts.weight_per_channel,
                reduce_range=int8_recipe(opts.runs_on).reduce_range,
                activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8,
                calibrate_method=calibrate_method(opts.calibration_method),
                extra_options={
                    "DefaultTensorType": onnx.TensorProto.FLOAT,
                    "MatMulConstBOnly": True,
                    # the per-tensor recipe's per-channel exceptions (recipes.py), by ORT's
                    # own per-weight overrides (the QDQ path reads them; axis 1: [K, N])
                    **(
                        {"TensorQuantOverrides": {w: [{"axis": 1}] for w in plan.channel_weights}}
                        if plan is not None and plan.channel_weights
                        else {}
                    ),
                    # one sentence per calibration step: lengths differ (no padding), and
                    # the histogram methods can only stack equal shapes
                    **({"CalibStridedMinMax": 1} if opts.calibration_method != "minmax" else {}),
                },
            )
            return _load(out)


def _with_types(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with value types for contrib-op outputs (SkipLayerNormalization, FastGelu,
    MultiHeadAttention ...). ONNX shape inference skips com.microsoft ops; without types
    the static quantizer neither calibrates nor quantizes their outputs, and the MatMuls
    they feed would run with fp32 activations. ORT's symbolic shape inference knows them.
    """
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    with quiet():
        typed = SymbolicShapeInference.infer_shapes(model, auto_merge=True, guess_output_rank=True)
    if typed is None:
        raise QuantizationError("ONNX Runtime's symbolic shape inference failed on this graph")
    result: onnx.ModelProto = typed
    return result


class OrtInt4Pass(_OrtPass):
    """``MatMulNBitsQuantizer``: 4-bit blockwise symmetric weights, each MatMul at its own
    block (one quantizer run per block size), fp32 activations."""

    name = "quant-ort-int4"
    tool = "MatMulNBitsQuantizer"

    def quantize(self, proto: onnx.ModelProto) -> onnx.ModelProto:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        blocks = self.state.block_by_node
        model = proto
        for block in sorted(set(blocks.values()), reverse=True):
            exclude = [
                n.name
                for n in model.graph.node
                if n.op_type == "MatMul" and blocks.get(n.name) != block
            ]
            with quiet():
                q = MatMulNBitsQuantizer(
                    model,
                    bits=4,
                    block_size=block,
                    is_symmetric=True,
                    accuracy_level=INT4_ACCURACY_LEVEL,
                    nodes_to_exclude=exclude,
                    op_types_to_quantize=("MatMul",),
                )
                q.process()
            model = q.model.model
        return model

    def ensures(self, model: ir.Model) -> None:
        asked = set(self.state.nodes)
        left = [n.name for n in model.graph if n.name in asked and n.op_type == "MatMul"]
        if left:
            raise QuantizationError(
                f"int4: MatMulNBitsQuantizer left {len(left)} MatMul(s) in float "
                f"({', '.join(left[:4])}); this is a quantizer bug"
            )


class OrtFloat16Pass(_OrtPass):
    """onnxruntime.transformers' float16 converter: fp16 weights and compute where ORT has
    fp16 kernels (Cast elsewhere), fp32 inputs and outputs; the word table (and a tied
    decoder reading it) stays fp32 with --keep-embeddings-wide."""

    name = "quant-ort-float16"
    tool = "convert_float_to_float16"

    def quantize(self, proto: onnx.ModelProto) -> onnx.ModelProto:
        from onnxruntime.transformers.onnx_model import OnnxModel

        keep: list[str] = []
        table = self.state.table
        if table is not None and not self.state.options.quantize_embeddings:
            keep = [*table.gathers, *table.tied_matmuls, *table.embed_layernorms]
            keep += [
                n.name
                for n in proto.graph.node
                if n.op_type == "Transpose" and n.input[0] == table.table
            ]
        m = OnnxModel(proto)
        with quiet():
            m.convert_float_to_float16(
                use_symbolic_shape_infer=True, keep_io_types=True, node_block_list=keep
            )
            # The converter appends its Cast nodes at the end of the node list: ORT sorts
            # on load, but onnx.checker (and every tool that trusts the spec) needs the order.
            m.topological_sort()
        out: onnx.ModelProto = m.model
        return out

    def ensures(self, model: ir.Model) -> None:
        asked = set(self.state.nodes)
        left = [
            n.name
            for n in model.graph
            if n.name in asked and n.op_type == "MatMul" and not _reads_dequantized(n)
        ]
        if left:
            raise QuantizationError(
                f"fp16: {len(left)} MatMul(s) kept an fp32 weight ({', '.join(left[:4])})"
            )
