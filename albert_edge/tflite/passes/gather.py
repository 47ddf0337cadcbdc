"""gather_then_dequantize: an int8 table's EMBEDDING_LOOKUP gathers int8 rows, and a
DEQUANTIZE that XNNPACK runs makes them float.

Why: with an int8 table and a float output, TFLite's EMBEDDING_LOOKUP takes its hybrid
path, which dequantizes element by element outside XNNPACK: ~16 us per lookup for 128
rows of 64 on an AVX-512 core, the word and the token-type lookups together ~1.7 % of a
6-layer H256 model's latency (``benchmarks/results/small_model_fuse.md``), the same cost
however small the table. The int8→int8 lookup is a row copy, and XNNPACK's DEQUANTIZE of
the gathered rows is one vectorized pass.

How: for each EMBEDDING_LOOKUP whose table is int8 with one scale (per tensor) and whose
output is float32, the lookup writes a new int8 tensor of the output's shape with the
table's scale and zero point, and a DEQUANTIZE writes the old float output. Exact: both
paths compute ``(q - zero_point) × scale`` in one float rounding
(``tests/tflite/test_fuse.py`` compares the outputs bit for bit).

Postcondition: no EMBEDDING_LOOKUP reads a per-tensor int8 table into a float output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import TflitePass, op_name

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


def _hybrid_lookups(model: ModelT, si: int) -> list[int]:
    """Op indices of the EMBEDDING_LOOKUPs this pass rewrites in subgraph ``si``."""
    from albert_edge.tflite import flatbuffer as fb

    types = fb.tensor_type_names()
    sg = model.subgraphs[si]
    found = []
    for k, op in enumerate(sg.operators):
        if op_name(model, op) != "EMBEDDING_LOOKUP" or len(op.inputs) < 2:
            continue
        table, out = sg.tensors[int(op.inputs[1])], sg.tensors[int(op.outputs[0])]
        q = table.quantization
        per_tensor = q is not None and q.scale is not None and len(q.scale) == 1
        if types.get(table.type) == "INT8" and types.get(out.type) == "FLOAT32" and per_tensor:
            found.append(k)
    return found


class GatherThenDequantizePass(TflitePass):
    """Int8 row gathers, dequantized in XNNPACK (see module docstring)."""

    name: ClassVar[str] = "gather_then_dequantize"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        s = fb.schema()
        rewritten = 0
        for si, sg in enumerate(model.subgraphs):
            for k in reversed(_hybrid_lookups(model, si)):
                op = sg.operators[k]
                table, out_idx = sg.tensors[int(op.inputs[1])], int(op.outputs[0])
                out = sg.tensors[out_idx]
                rows = s.TensorT()
                rows.name = (out.name or b"lookup") + b"/int8"
                rows.shape = list(out.shape)
                rows.shapeSignature = (
                    None if out.shapeSignature is None else list(out.shapeSignature)
                )
                rows.type = table.type
                rows.buffer = 0
                q = s.QuantizationParametersT()
                q.scale = [float(table.quantization.scale[0])]
                q.zeroPoint = [int(table.quantization.zeroPoint[0])]
                rows.quantization = q
                sg.tensors.append(rows)
                op.outputs = [len(sg.tensors) - 1]
                deq = s.OperatorT()
                deq.opcodeIndex = fb.opcode_index(model, s.BuiltinOperator.DEQUANTIZE, 2)
                deq.inputs, deq.outputs = [len(sg.tensors) - 1], [out_idx]
                sg.operators.insert(k + 1, deq)
                rewritten += 1
        return {"lookups_rewritten": rewritten}

    def postcondition(self, model: ModelT) -> None:
        for si in range(len(model.subgraphs)):
            if _hybrid_lookups(model, si):
                self.fail(f"subgraph {si}: an int8 table still dequantizes inside its lookup")
