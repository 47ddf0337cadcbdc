"""narrow_constants: store the float constants the quantizer cannot reach at the
precision's width, each behind one ``DEQUANTIZE``.

Why: ai-edge-quantizer quantizes the operands of the ops its policy lists
(FULLY_CONNECTED, EMBEDDING_LOOKUP, BATCH_MATMUL, CONV; ``float_casting`` likewise), so in
an fp16 or int8-dynamic file every other float constant stays float32. In ALBERT the
large one is the position table: litert-torch folds ``position_embeddings`` into a
``[1, P, E]`` constant that a SLICE (shorter signatures) and an ADD read, 4 bytes per
parameter where the precision promises 2 or 1 — +3 % over the int8 floor of the trained
tiny model, +1.5 % over its fp16 floor. There is no recipe entry that reaches it (the
quantizer's ``weightonly_*`` configs list only the matmul-like ops), hence this pass.

How: such a constant ``C`` becomes a narrow constant ``Cn`` (float16; or int8 symmetric
per tensor, scale = max|C| / 127, zero point 0) and a ``DEQUANTIZE Cn → C`` at the start
of each subgraph that reads it, so the readers see the same float32 tensor as before.
This is how TFLite's own converter stores fp16 weights; LiteRT dequantizes a constant
input once, at the first invoke, and keeps the result.

Every runtime reads the same table: an int8 element dequantizes to float32(q) × scale in
one rounding, so XNNPACK, TFLite's builtin kernels and LiteRT.js' wasm build give the same
bits (tests/tflite/test_bytes.py; on the trained tiny model the embedding sum after the
ADD was bit-identical in LiteRT.js and the interpreter). What the narrowed table does
change is every activation after it, by up to half a step — and an int8-dynamic
FULLY_CONNECTED quantizes its input per row at run time, so wherever two runtimes' float
kernels differ by an ulp upstream (reductions, GELU) an activation at a rounding tie goes
different ways and one output row moves by a whole step (~2e-4 on the tiny model). Which
sentences hit a tie is what the table changes, not how often: LiteRT.js vs the XNNPACK
interpreter over the 291 sample sentences, |Δlogit| > 1e-4 on 17 with this pass off, 24
with the int8 table, 21 with a float16 one.

Left float32, by design (the named exceptions): operands of the quantizer's ops (a
FULLY_CONNECTED bias — the hybrid and fp16 kernels add it in float and XNNPACK wants it
static); constants under :data:`MIN_NARROW_BYTES` (a DEQUANTIZE op and tensor per
signature cost about what narrowing a 128-float vector saves); and, under int8, vectors
(one dimension above 1: LayerNorm γ/β, biases) — one int8 scale for a whole γ is a
relative error no table-sized saving pays for (albert-base: 0.3 % of the floor), while
float16 keeps them to 2⁻¹¹.

Postcondition: no float32 constant of at least :data:`MIN_NARROW_BYTES` outside those
ops' operands (and, under int8, outside vectors) remains, and every narrowed constant dequantizes to its float32 value
within half a quantization step (fp16: within fp16 rounding).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from albert_edge.tflite.passes.base import TflitePass, op_name

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT

# float32 bytes below which narrowing does not pay for its DEQUANTIZE op and tensor.
MIN_NARROW_BYTES = 2048
# Ops whose constant operands belong to the quantizer's recipe (weights and biases).
QUANTIZER_OPS = frozenset(
    {"FULLY_CONNECTED", "BATCH_MATMUL", "CONV_2D", "DEPTHWISE_CONV_2D", "EMBEDDING_LOOKUP"}
)
# What each precision narrows to.
WIDTH = {"fp16": "FLOAT16", "int8-dynamic": "INT8"}


def _readers(model: ModelT) -> dict[int, set[str]]:
    """Buffer id → names of the ops that read a tensor backed by it."""
    out: dict[int, set[str]] = {}
    for sg in model.subgraphs:
        for op in sg.operators:
            name = op_name(model, op)
            for i in op.inputs if op.inputs is not None else []:
                if int(i) >= 0:
                    out.setdefault(int(sg.tensors[int(i)].buffer), set()).add(name)
    return out


def is_vector(shape: Any) -> bool:
    return sum(1 for d in (shape if shape is not None else []) if int(d) > 1) <= 1


def candidates(model: ModelT, precision: str) -> list[int]:
    """Buffers of float32 constants this pass narrows at ``precision`` (module docstring)."""
    from albert_edge.tflite import flatbuffer as fb

    types = fb.tensor_type_names()
    readers = _readers(model)
    found: set[int] = set()
    for sg in model.subgraphs:
        for t in sg.tensors:
            bid = int(t.buffer)
            if not bid or bid in found or types.get(t.type) != "FLOAT32":
                continue
            if len(fb.buffer_bytes(model, bid)) < MIN_NARROW_BYTES:
                continue
            if WIDTH.get(precision) == "INT8" and is_vector(t.shape):
                continue
            ops = readers.get(bid, set())
            if ops and not ops & QUANTIZER_OPS:
                found.add(bid)
    return sorted(found)


def narrow(arr: np.ndarray, width: str) -> tuple[np.ndarray, float | None]:
    """The narrow array and its int8 scale (None for float16)."""
    if width == "FLOAT16":
        return arr.astype(np.float16), None
    peak = float(np.abs(arr).max())
    scale = peak / 127.0 if peak > 0 else 1.0
    return np.clip(np.round(arr / scale), -127, 127).astype(np.int8), scale


class NarrowConstantsPass(TflitePass):
    """Float32 constants outside the quantizer's ops → the precision's width + DEQUANTIZE."""

    name: ClassVar[str] = "narrow_constants"

    def __init__(self, precision: str) -> None:
        super().__init__()
        self.precision = precision
        self._originals: dict[int, np.ndarray] = {}

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        width = WIDTH.get(self.precision)
        if width is None:
            return {"narrowed": [], "bytes_saved": 0}
        s = fb.schema()
        ttype = getattr(s.TensorType, width)
        # DEQUANTIZE v2 reads int8; fp16 input is what the quantizer's own DEQUANTIZE reads.
        version = 2 if width == "INT8" else 1
        narrowed: list[str] = []
        saved = 0
        for bid in candidates(model, self.precision):
            first = next(t for sg in model.subgraphs for t in sg.tensors if int(t.buffer) == bid)
            arr = fb.tensor_array(model, first)
            assert arr is not None
            small, scale = narrow(arr.astype(np.float32), width)
            model.buffers[bid].data = np.frombuffer(small.tobytes(), dtype=np.uint8).copy()
            self._originals[bid] = arr.astype(np.float32)
            saved += arr.nbytes - small.nbytes
            narrowed.append((first.name or b"").decode("utf-8", "replace"))
            for sg in model.subgraphs:
                new_ops = []
                for t in [t for t in sg.tensors if int(t.buffer) == bid]:
                    c = s.TensorT()
                    c.name = t.name
                    c.shape = list(t.shape)
                    c.type = ttype
                    c.buffer = bid
                    if scale is not None:
                        q = s.QuantizationParametersT()
                        q.scale, q.zeroPoint = [scale], [0]
                        c.quantization = q
                    sg.tensors.append(c)
                    t.buffer = 0  # now the DEQUANTIZE's float32 output
                    t.name = (t.name or b"const") + b"/dequantized"
                    op = s.OperatorT()
                    op.opcodeIndex = fb.opcode_index(model, s.BuiltinOperator.DEQUANTIZE, version)
                    op.inputs = [len(sg.tensors) - 1]
                    op.outputs = [sg.tensors.index(t)]
                    new_ops.append(op)
                sg.operators = new_ops + list(sg.operators)
        return {"narrowed": narrowed, "to": width.lower(), "bytes_saved": saved}

    def postcondition(self, model: ModelT) -> None:
        from albert_edge.tflite import flatbuffer as fb

        left = candidates(model, self.precision) if self.precision in WIDTH else []
        if left:
            self.fail(f"{len(left)} float32 constants >= {MIN_NARROW_BYTES} bytes left wide")
        for bid, ref in self._originals.items():
            t = next(t for sg in model.subgraphs for t in sg.tensors if int(t.buffer) == bid)
            arr = fb.tensor_array(model, t)
            assert arr is not None
            q = t.quantization
            if q is not None and q.scale is not None and len(q.scale):
                step = float(q.scale[0])
                err = float(np.abs(arr.astype(np.float32) * step - ref).max())
                ok = err <= step / 2 + 1e-7
            else:
                got = arr.astype(np.float32)
                ok = bool(np.all(np.abs(got - ref) <= np.abs(ref) * 2.0**-11 + 2.0**-24))
            if not ok:
                self.fail(f"narrowed constant {t.name!r} does not dequantize to its value")
