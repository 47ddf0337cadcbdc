"""What the signatures return after quantization: float32 logits, or int8 where asked.

``float_outputs`` (default): ai-edge-quantizer's static recipe leaves the last op's int8
tensor as the model output; apps and ``verify`` expect float logits, so each int8
signature output gets a DEQUANTIZE (:func:`albert_edge.tflite.flatbuffer.float_outputs`).
Postcondition: every signature output is float32.

``int8_outputs`` (``--int8-io``): the DEQUANTIZE in front of each int8 signature output
is dropped so full-integer delegates hand back int8 with its scale
(:func:`albert_edge.tflite.flatbuffer.int8_outputs`). Postcondition: no signature output
is the float DEQUANTIZE of an int8 tensor that nothing else reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import TflitePass, consumers, op_name

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


def _output_tensors(model: ModelT) -> list[tuple[Any, int]]:
    return [
        (model.subgraphs[int(sd.subgraphIndex)], int(tm.tensorIndex))
        for sd in model.signatureDefs or []
        for tm in sd.outputs or []
    ]


class FloatOutputsPass(TflitePass):
    name: ClassVar[str] = "float_outputs"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        return {"outputs": fb.float_outputs(model)}

    def postcondition(self, model: ModelT) -> None:
        from albert_edge.tflite import flatbuffer as fb

        types = fb.tensor_type_names()
        bad = [
            sg.tensors[i].name
            for sg, i in _output_tensors(model)
            if types.get(sg.tensors[i].type) != "FLOAT32"
        ]
        if bad:
            self.fail(f"{len(bad)} signature outputs are not float32, e.g. {bad[0]!r}")


class Int8OutputsPass(TflitePass):
    name: ClassVar[str] = "int8_outputs"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        return {"outputs": fb.int8_outputs(model)}

    def postcondition(self, model: ModelT) -> None:
        from albert_edge.tflite import flatbuffer as fb

        types = fb.tensor_type_names()
        for sg, i in _output_tensors(model):
            producer = next((op for op in sg.operators if i in list(op.outputs)), None)
            if producer is None or op_name(model, producer) != "DEQUANTIZE":
                continue
            src = int(producer.inputs[0])
            if types.get(sg.tensors[src].type) in ("INT8", "UINT8") and not consumers(sg, i):
                self.fail(f"output {sg.tensors[i].name!r} is still dequantized from int8")
