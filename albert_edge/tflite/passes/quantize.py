"""quantize: the float flatbuffer → the precision's weights, by ai-edge-quantizer.

The recipes, the calibration and why the post-conversion quantizer is used live in
:mod:`albert_edge.tflite.quantize`; this pass runs it on the model in place (written,
quantized, read back) and names a failure as one :class:`QuantizationError`.

Precondition: the model is float (no tensor carries quantization scales).
Postcondition: every FULLY_CONNECTED weight (a constant operand) is stored at the precision — int8 for the
int8 recipes; for fp16, a float16 constant behind a DEQUANTIZE; under int8-full's
per-tensor recipe, each weight whose channels spread over 4x
(:func:`~albert_edge.tflite.quantize.channel_exceptions`) with a scale per channel.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.errors import QuantizationError
from albert_edge.tflite.passes.base import TflitePass, op_name

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


class QuantizePass(TflitePass):
    name: ClassVar[str] = "quantize"

    def __init__(
        self,
        precision: str,
        *,
        per_channel: bool = True,
        quantize_embeddings: bool = True,
        calibration: Any = None,
        unit_precisions: tuple[tuple[str, str], ...] = (),
        block_size: int = 256,
        channel_exceptions: bool = True,
    ) -> None:
        super().__init__()
        self.precision = precision
        self.unit_precisions = dict(unit_precisions)  # a precision plan: unit -> width
        self.block_size = block_size
        self.units: list[Any] = []
        self.per_channel = per_channel
        self.quantize_embeddings = quantize_embeddings
        self.calibration = calibration
        # int8-full's per-tensor recipe: the weights stored per channel all the same
        self.channel_weights: dict[str, float] = {}
        self.channel_exceptions = channel_exceptions  # off: --per-tensor / --per-channel given

    def precondition(self, model: ModelT) -> None:
        quantized = [
            t.name
            for sg in model.subgraphs
            for t in sg.tensors
            if t.quantization is not None
            and t.quantization.scale is not None
            and len(t.quantization.scale)
        ]
        if quantized:
            self.fail(f"the model is already quantized ({quantized[0]!r}); quantize a float one")

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb
        from albert_edge.tflite.quantize import full_channel_weights, quantize_flatbuffer

        t0 = time.perf_counter()
        try:
            float_bytes = fb.write_model(model)
            if self.channel_exceptions:
                self.channel_weights = full_channel_weights(
                    float_bytes,
                    self.precision,
                    per_channel=self.per_channel,
                    unit_precisions=self.unit_precisions or None,
                )
            data = quantize_flatbuffer(
                float_bytes,
                self.precision,
                per_channel=self.per_channel,
                quantize_embeddings=self.quantize_embeddings,
                calibration=self.calibration,
                unit_precisions=self.unit_precisions or None,
                block_size=self.block_size,
                channel_weights=self.channel_weights,  # {} without the exceptions
            )
            if self.unit_precisions:  # the units, named on the float graph, for the check
                from albert_edge.tflite.quantize import plan_units

                self.units = plan_units(float_bytes, activations=self.precision == "int8-full")
        except QuantizationError:
            raise
        except Exception as exc:
            raise QuantizationError(
                f"ai-edge-quantizer failed for {self.precision} ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:200]})"
            ) from None
        vars(model).update(vars(fb.read_model(data)))
        return {
            "tool": "ai-edge-quantizer",
            "seconds": round(time.perf_counter() - t0, 1),
            **(
                {"per_channel_weights": {w: round(v, 2) for w, v in self.channel_weights.items()}}
                if self.channel_weights
                else {}
            ),
        }

    def postcondition(self, model: ModelT) -> None:
        from albert_edge.tflite import flatbuffer as fb

        if self.channel_weights:  # int8-full's exceptions, each with a scale per channel
            from albert_edge.onnx.quant.recipes import PORTABLE_CHANNEL_SPREAD as SPREAD
            from albert_edge.tflite.quantize import stored_channel_spreads

            missing = sorted(set(self.channel_weights) - set(stored_channel_spreads(model)))
            if missing:
                self.fail(f"{missing[0]} is not stored per channel (channels spread > {SPREAD:g}x)")
        if self.unit_precisions:  # each planned weight at its own width
            from albert_edge.tflite.quantize import check_plan_types

            why = check_plan_types(model, self.units, self.unit_precisions)
            if why:
                self.fail(why)
            return
        types = fb.tensor_type_names()
        want = ("FLOAT16",) if self.precision == "fp16" else ("INT8",)
        for sg in model.subgraphs:
            producer = {int(o): op for op in sg.operators for o in op.outputs}
            for op in sg.operators:
                if op_name(model, op) != "FULLY_CONNECTED":
                    continue
                w = int(op.inputs[1])
                src = producer.get(w)
                if src is not None and op_name(model, src) == "DEQUANTIZE":
                    w = int(src.inputs[0])
                buffer = int(sg.tensors[w].buffer)
                if not buffer or not len(fb.buffer_bytes(model, buffer)):
                    # an activation x activation product, no weight: a layer left with one
                    # attention head (a pruned checkpoint) has its scores and context
                    # lowered to FULLY_CONNECTED by litert-torch
                    continue
                if types.get(sg.tensors[w].type) not in want:
                    self.fail(
                        f"FULLY_CONNECTED weight {sg.tensors[w].name!r} is "
                        f"{types.get(sg.tensors[w].type)}, not {want[0]} ({self.precision})"
                    )
