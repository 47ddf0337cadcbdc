"""hybrid_op_versions: a FULLY_CONNECTED with a float input, per-channel int8 weights and a
float output carries version 12, the version LiteRT's own versioning gives that form.

Why: ai-edge-quantizer leaves quantized ops at the version numbers of their float forms
(FULLY_CONNECTED v5 here). Runtimes whose FULLY_CONNECTED stops below v12 load such a file
and compute it wrong, without an error: their hybrid kernel reads the weight's per-tensor
scale, which a per-channel weight does not have, so every such FC returns zeros (plus its
bias). Measured on the embedded SST-2 model (``--seq-lens 16``, default int8-dynamic, both
runtimes without delegates, ``experimental_preserve_all_tensors``): tflite-runtime 2.14.0
and ai-edge-litert 2.3 agree on every tensor up to the first FULLY_CONNECTED
(``embedding_hidden_mapping_in``, tensor 62, [16, 128]); ai-edge-litert gives
0.390, -0.096, 0.360, ... and 2.14 gives 0.0 everywhere; the logits end at
[-0.04, 0.04] instead of [-0.48, 0.15]. tflite-support 0.4.4's runtime does the same
(its BertQuestionAnswerer finds no answer). With ``--per-tensor`` weights the logits of
2.14 and ai-edge-litert are equal.

At v12 those runtimes refuse the file at load ("Didn't find op for builtin opcode
'FULLY_CONNECTED' version '12'") instead of answering wrong, and ``inspect`` / the manifest
say it does not run on tflite-runtime 2.14 (:mod:`albert_edge.tflite.op_versions`).
ai-edge-litert (and TF's converter, which stamps v12 on this form itself) runs it as before.

Postcondition: no FULLY_CONNECTED of that form is below v12.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import TflitePass, op_name
from albert_edge.tflite.passes.broadcast import drop_unused_opcodes

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT

PER_CHANNEL_HYBRID_FC_VERSION = 12


def per_channel_hybrid_fc(model: ModelT, sg: Any, op: Any) -> bool:
    """``op`` is a FULLY_CONNECTED float32 × per-channel int8 weight → float32."""
    from albert_edge.tflite import flatbuffer as fb

    if op_name(model, op) != "FULLY_CONNECTED" or len(op.inputs) < 2:
        return False
    types = fb.tensor_type_names()
    x, w, y = (sg.tensors[int(i)] for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
    q = w.quantization
    per_channel = q is not None and q.scale is not None and len(q.scale) > 1
    return bool(
        per_channel
        and types.get(x.type) == "FLOAT32"
        and types.get(w.type) == "INT8"
        and types.get(y.type) == "FLOAT32"
    )


def _versioned_opcode(model: ModelT, like: Any, version: int) -> int:
    """Index of an operator code with ``like``'s builtin at ``version`` (added if none)."""
    from albert_edge.tflite import flatbuffer as fb

    builtin = fb.opcode_builtin(like)
    for i, oc in enumerate(model.operatorCodes):
        if fb.opcode_builtin(oc) == builtin and int(oc.version) == version:
            return i
    oc = fb.schema().OperatorCodeT()
    oc.builtinCode = builtin
    oc.deprecatedBuiltinCode = min(builtin, 127)
    oc.version = version
    model.operatorCodes.append(oc)
    return len(model.operatorCodes) - 1


class HybridOpVersionsPass(TflitePass):
    name: ClassVar[str] = "hybrid_op_versions"

    def run(self, model: ModelT) -> dict[str, Any]:
        stamped = 0
        for sg in model.subgraphs:
            for op in sg.operators:
                code = model.operatorCodes[int(op.opcodeIndex)]
                if (
                    per_channel_hybrid_fc(model, sg, op)
                    and int(code.version) < PER_CHANNEL_HYBRID_FC_VERSION
                ):
                    op.opcodeIndex = _versioned_opcode(model, code, PER_CHANNEL_HYBRID_FC_VERSION)
                    stamped += 1
        return {
            "per_channel_hybrid_fc_v12": stamped,
            "opcodes_dropped": drop_unused_opcodes(model),
        }

    def postcondition(self, model: ModelT) -> None:
        for sg in model.subgraphs:
            for op in sg.operators:
                version = int(model.operatorCodes[int(op.opcodeIndex)].version)
                if per_channel_hybrid_fc(model, sg, op) and version < PER_CHANNEL_HYBRID_FC_VERSION:
                    self.fail(f"a per-channel hybrid FULLY_CONNECTED is still v{version}")
