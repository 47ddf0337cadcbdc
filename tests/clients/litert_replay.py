"""Per-op replay of a ``.tflite`` model across two runtimes (test_litertjs.py's int8 case).

An int8-dynamic artifact is compared op class by op class instead of logits against logits:

* :func:`expose` — a copy of the model whose signature also returns every int8-dynamic
  ("hybrid": fp32 activations, constant int8 weights) FULLY_CONNECTED's input and output,
  so a client runtime (LiteRT.js) reports what it fed each FC and what each FC gave back.
* :func:`single_fc` — one such FC as a one-op model: the artifact's operator, options,
  weight and bias bytes and quantization tables, copied as they are. The reference
  interpreter runs it on the client's exact FC input.
* :func:`cut_fcs` — the model with those FCs removed and their outputs turned into
  signature inputs; it returns every FC input. The reference interpreter runs it on the
  client's exact FC outputs: every other (fp32) op, each fed what the client fed it.

The models are test copies (written with :func:`albert_edge.tflite.flatbuffer.write_model`,
no zip tail); the artifact itself is never modified.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from albert_edge.tflite import flatbuffer as fb
from albert_edge.tflite.passes.base import op_name


def tensor_key(index: int) -> str:
    """The signature name under which tensor ``index`` is exposed / fed."""
    return f"t{index}"


def _subgraph(model: Any, signature: str) -> tuple[Any, Any]:
    (sd,) = [s for s in model.signatureDefs if s.signatureKey.decode() == signature]
    return model.subgraphs[int(sd.subgraphIndex)], sd


def _tmap(name: str, index: int) -> Any:
    tm = fb.schema().TensorMapT()
    tm.name = name.encode()
    tm.tensorIndex = index
    return tm


def hybrid_fcs(model: Any, signature: str) -> list[tuple[int, int, int]]:
    """``(op index, input tensor, output tensor)`` of every FULLY_CONNECTED of the
    signature's subgraph with an fp32 input and a constant int8 weight, in graph order."""
    sg, _ = _subgraph(model, signature)
    types = fb.tensor_type_names()
    out = []
    for k, op in enumerate(sg.operators):
        if op_name(model, op) != "FULLY_CONNECTED":
            continue
        x, w = (sg.tensors[int(i)] for i in op.inputs[:2])
        if (
            types[x.type] == "FLOAT32"
            and types[w.type] == "INT8"
            and fb.tensor_array(model, w) is not None
        ):
            out.append((k, int(op.inputs[0]), int(op.outputs[0])))
    return out


def count_ops(data: bytes, signature: str, name: str) -> int:
    """How many ``name`` operators the signature's subgraph has."""
    model = fb.read_model(bytearray(data))
    sg, _ = _subgraph(model, signature)
    return sum(op_name(model, op) == name for op in sg.operators)


def expose(data: bytes, signature: str, tensors: list[int]) -> tuple[bytes, dict[int, str]]:
    """A copy of the model whose ``signature`` also outputs ``tensors`` (as ``t<index>``),
    and the output name of each of ``tensors`` (its own name if it already was one)."""
    model = fb.read_model(bytearray(data))
    sg, sd = _subgraph(model, signature)
    names = {int(tm.tensorIndex): tm.name.decode() for tm in sd.outputs}
    new = [t for t in dict.fromkeys(tensors) if t not in names]
    sg.outputs = [int(o) for o in sg.outputs] + new
    sd.outputs = list(sd.outputs) + [_tmap(tensor_key(t), t) for t in new]
    names.update({t: tensor_key(t) for t in new})
    return fb.write_model(model), {t: names[t] for t in tensors}


def single_fc(data: bytes, signature: str, op_index: int) -> bytes:
    """Operator ``op_index`` of the signature's subgraph as a one-op model, signature
    ``fc`` (input ``x``, output ``y``): operator code, options, tensors and constant
    bytes copied from the model."""
    s = fb.schema()
    src_model = fb.read_model(bytearray(data))
    src, _ = _subgraph(src_model, signature)
    src_op = src.operators[op_index]
    m = s.ModelT()
    m.version = src_model.version
    m.buffers = [s.BufferT()]
    m.operatorCodes = [copy.deepcopy(src_model.operatorCodes[src_op.opcodeIndex])]
    sg = s.SubGraphT()
    sg.tensors = []
    remap: dict[int, int] = {}
    for i in [int(i) for i in (*src_op.inputs, *src_op.outputs)]:
        if i < 0 or i in remap:
            continue
        t = copy.deepcopy(src.tensors[i])
        buf = s.BufferT()
        raw = fb.buffer_bytes(src_model, int(t.buffer)) if t.buffer else b""
        if raw:
            buf.data = np.frombuffer(raw, dtype=np.uint8).copy()
        m.buffers.append(buf)
        t.buffer = len(m.buffers) - 1
        remap[i] = len(sg.tensors)
        sg.tensors.append(t)
    op = copy.deepcopy(src_op)
    op.opcodeIndex = 0
    op.inputs = [remap[int(i)] if int(i) >= 0 else -1 for i in src_op.inputs]
    op.outputs = [remap[int(i)] for i in src_op.outputs]
    sg.operators = [op]
    sg.inputs = [op.inputs[0]]
    sg.outputs = [op.outputs[0]]
    m.subgraphs = [sg]
    sd = s.SignatureDefT()
    sd.signatureKey = b"fc"
    sd.subgraphIndex = 0
    sd.inputs = [_tmap("x", sg.inputs[0])]
    sd.outputs = [_tmap("y", sg.outputs[0])]
    m.signatureDefs = [sd]
    return fb.write_model(m)


def cut_fcs(data: bytes, signature: str, fcs: list[tuple[int, int, int]]) -> bytes:
    """The model without the ``fcs`` operators: their outputs become inputs of
    ``signature`` (``t<index>``, after the model's own inputs), its outputs are the FC
    inputs that no removed FC produces (``t<index>``)."""
    model = fb.read_model(bytearray(data))
    sg, sd = _subgraph(model, signature)
    drop = {k for k, _, _ in fcs}
    produced = [o for _, _, o in fcs]
    sg.operators = [op for k, op in enumerate(sg.operators) if k not in drop]
    wanted = [i for i in dict.fromkeys(i for _, i, _ in fcs) if i not in set(produced)]
    sg.inputs = [int(i) for i in sg.inputs] + produced
    sd.inputs = list(sd.inputs) + [_tmap(tensor_key(t), t) for t in produced]
    sg.outputs = wanted
    sd.outputs = [_tmap(tensor_key(t), t) for t in wanted]
    return fb.write_model(model)
