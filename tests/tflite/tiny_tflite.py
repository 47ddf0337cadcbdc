"""Build tiny ``.tflite`` graphs by hand (schema object API) for pass and rule-table tests.

Each graph is a few ops wired exactly like the pattern under test, so a test runs in
milliseconds and checks numerics with the real LiteRT interpreter.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from albert_edge.tflite import flatbuffer as fb

_TYPES = {"f32": "FLOAT32", "f16": "FLOAT16", "i32": "INT32", "bool": "BOOL", "i8": "INT8"}
_NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "bool": np.bool_, "i8": np.int8}
_OPTIONS = {
    "ADD": "AddOptions",
    "SUB": "SubOptions",
    "MUL": "MulOptions",
    "RESHAPE": "ReshapeOptions",
    "CAST": "CastOptions",
    "SELECT_V2": "SelectV2Options",
    "BROADCAST_TO": "BroadcastToOptions",
    "SOFTMAX": "SoftmaxOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "DEQUANTIZE": "DequantizeOptions",
    "SLICE": "SliceOptions",
}

# Versions litert-torch stamps (BROADCAST_TO has no version 1 kernel in LiteRT).
_VERSIONS = {"BROADCAST_TO": 2}


class Graph:
    """``g.t(name, shape, dtype, data=None)`` adds a tensor, ``g.op(NAME, ins, outs)`` an op."""

    def __init__(self) -> None:
        self.s = fb.schema()
        self.m = self.s.ModelT()
        self.m.version = 3
        self.m.buffers = [self.s.BufferT()]
        self.m.operatorCodes = []
        self.sg = self.s.SubGraphT()
        self.sg.tensors, self.sg.operators = [], []
        self.names: dict[str, int] = {}
        self.types = {v: k for k, v in fb.tensor_type_names().items()}
        self.ops = {v: k for k, v in fb.builtin_names().items()}

    def t(self, name: str, shape: tuple[int, ...], dtype: str = "f32", data: Any = None) -> str:
        tt = self.s.TensorT()
        tt.name = name.encode()
        tt.shape = list(shape)
        tt.type = self.types[_TYPES[dtype]]
        buf = self.s.BufferT()
        if data is not None:
            arr = np.asarray(data, dtype=_NP[dtype]).reshape(shape)
            buf.data = np.frombuffer(arr.tobytes(), dtype=np.uint8).copy()
        self.m.buffers.append(buf)
        tt.buffer = len(self.m.buffers) - 1
        self.sg.tensors.append(tt)
        self.names[name] = len(self.sg.tensors) - 1
        return name

    def op(self, name: str, ins: list[str | None], outs: list[str], **opts: Any) -> None:
        code = self.ops[name]
        idx = next(
            (i for i, oc in enumerate(self.m.operatorCodes) if fb.opcode_builtin(oc) == code),
            None,
        )
        if idx is None:
            oc = self.s.OperatorCodeT()
            oc.builtinCode = code
            oc.deprecatedBuiltinCode = min(code, 127)
            oc.version = _VERSIONS.get(name, 1)
            self.m.operatorCodes.append(oc)
            idx = len(self.m.operatorCodes) - 1
        o = self.s.OperatorT()
        o.opcodeIndex = idx
        o.inputs = [self.names[i] if i is not None else -1 for i in ins]
        o.outputs = [self.names[i] for i in outs]
        if name in _OPTIONS:
            kind = _OPTIONS[name]
            options = getattr(self.s, kind + "T")()
            for k, v in opts.items():
                setattr(options, k, v)
            o.builtinOptionsType = getattr(self.s.BuiltinOptions, kind)
            o.builtinOptions = options
        self.sg.operators.append(o)

    def build(self, inputs: list[str], outputs: list[str]) -> Any:
        self.sg.inputs = [self.names[n] for n in inputs]
        self.sg.outputs = [self.names[n] for n in outputs]
        self.m.subgraphs = [self.sg]
        sd = self.s.SignatureDefT()
        sd.signatureKey = b"serving"
        sd.subgraphIndex = 0

        def tmap(n: str) -> Any:
            tm = self.s.TensorMapT()
            tm.name = n.encode()
            tm.tensorIndex = self.names[n]
            return tm

        sd.inputs = [tmap(n) for n in inputs]
        sd.outputs = [tmap(n) for n in outputs]
        self.m.signatureDefs = [sd]
        return self.m


def attention_mask_graph(seq: int = 8, heads: int = 4, *, sink: str = "ADD") -> Any:
    """ALBERT's mask path as litert-torch lowers it: mask [1,L] → [1,1,1,L] → 1-m →
    BROADCAST_TO [1,1,L,L] → SELECT_V2(bool(1-m), -1e9, ·) → ``sink`` onto the scores."""
    g = Graph()
    g.t("scores", (heads, seq, seq))
    g.t("mask", (1, seq), "i32")
    g.t("shape4", (4,), "i32", [1, 1, 1, seq])
    g.t("m_i", (1, 1, 1, seq), "i32")
    g.t("m_f", (1, 1, 1, seq))
    g.t("one", (), "f32", 1.0)
    g.t("inv", (1, 1, 1, seq))
    g.t("bshape", (4,), "i32", [1, 1, seq, seq])
    g.t("big", (1, 1, seq, seq))
    g.t("cond", (1, 1, 1, seq), "bool")
    g.t("neg", (), "f32", -1e9)
    g.t("fill", (1, 1, seq, seq))
    g.op("RESHAPE", ["mask", "shape4"], ["m_i"])
    g.op("CAST", ["m_i"], ["m_f"])
    g.op("SUB", ["one", "m_f"], ["inv"])
    g.op("BROADCAST_TO", ["inv", "bshape"], ["big"])
    g.op("CAST", ["inv"], ["cond"])
    g.op("SELECT_V2", ["cond", "neg", "big"], ["fill"])
    if sink == "ADD":
        g.t("out", (1, heads, seq, seq))
        g.op("ADD", ["scores", "fill"], ["out"])
    else:  # a consumer that does not broadcast: the expand must stay
        g.t("out", (1, 1, seq, seq))
        g.op("SOFTMAX", ["fill"], ["out"], beta=1.0)
    return g.build(["scores", "mask"], ["out"])


def embedding_then_float_graph(*, int8_weights: bool = False, fp16_table: bool = False) -> Any:
    """ids → EMBEDDING_LOOKUP → FULLY_CONNECTED → ADD: the CPU prefix every ALBERT has."""
    rng = np.random.default_rng(0)
    g = Graph()
    g.t("ids", (4,), "i32")
    if fp16_table:
        g.t("table16", (10, 6), "f16", rng.standard_normal((10, 6)))
        g.t("table", (10, 6))
        g.op("DEQUANTIZE", ["table16"], ["table"])
    else:
        g.t("table", (10, 6), "f32", rng.standard_normal((10, 6)))
    g.t("emb", (4, 6))
    if int8_weights:
        g.t("w", (3, 6), "i8", rng.integers(-127, 127, (3, 6)))
        q = fb.schema().QuantizationParametersT()
        q.scale, q.zeroPoint = [0.01], [0]
        g.sg.tensors[g.names["w"]].quantization = q
    else:
        g.t("w", (3, 6), "f32", rng.standard_normal((3, 6)))
    g.t("h", (4, 3))
    g.t("bias", (3,), "f32", [0.1, 0.2, 0.3])
    g.t("out", (4, 3))
    g.op("EMBEDDING_LOOKUP", ["ids", "table"], ["emb"])
    g.op("FULLY_CONNECTED", ["emb", "w", None], ["h"])
    g.op("ADD", ["h", "bias"], ["out"])
    return g.build(["ids"], ["out"])


def run(model_bytes: bytes, **feeds: np.ndarray) -> dict[str, np.ndarray]:
    """Run the ``serving`` signature with LiteRT's interpreter."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model_bytes)
    out: dict[str, np.ndarray] = it.get_signature_runner("serving")(**feeds)
    return out


def classifier_like_graph(seq: int = 8) -> Any:
    """ALBERT's signature (int32 input_ids/attention_mask/token_type_ids [1,L]) on a tiny
    body: ids → EMBEDDING_LOOKUP → FULLY_CONNECTED → ``logits`` [L,2]."""
    rng = np.random.default_rng(1)
    g = Graph()
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        g.t(name, (1, seq), "i32")
    g.t("flat", (1,), "i32", [seq])
    g.t("ids", (seq,), "i32")
    g.t("table", (30000, 6), "f32", rng.standard_normal((30000, 6)))  # ALBERT vocab
    g.t("emb", (seq, 6))
    g.t("w", (2, 6), "f32", rng.standard_normal((2, 6)))
    g.t("logits", (seq, 2))
    g.op("RESHAPE", ["input_ids", "flat"], ["ids"])
    g.op("EMBEDDING_LOOKUP", ["ids", "table"], ["emb"])
    g.op("FULLY_CONNECTED", ["emb", "w", None], ["logits"])
    model = g.build(["input_ids", "attention_mask", "token_type_ids"], ["logits"])
    model.signatureDefs[0].signatureKey = f"seq_{seq}".encode()
    return model


def position_table_graph(seq: int = 8, positions: int = 64, width: int = 16) -> Any:
    """ALBERT's position path as litert-torch lowers it, beside an FC with a wide bias:
    x [1,L,W] + SLICE(table [1,P,W])[:L] → ``sum``; x → FULLY_CONNECTED(w, b[600]) → ``y``.
    The table is a float constant only SLICE/ADD read; the bias belongs to the FC."""
    rng = np.random.default_rng(2)
    g = Graph()
    g.t("x", (1, seq, width))
    g.t("table", (1, positions, width), "f32", 0.1 * rng.standard_normal((1, positions, width)))
    g.t("begin", (3,), "i32", [0, 0, 0])
    g.t("size", (3,), "i32", [1, seq, width])
    g.t("pos", (1, seq, width))
    g.t("sum", (1, seq, width))
    g.t("w", (600, width), "f32", rng.standard_normal((600, width)))
    g.t("b", (600,), "f32", rng.standard_normal(600))
    g.t("y", (1, seq, 600))
    g.op("SLICE", ["table", "begin", "size"], ["pos"])
    g.op("ADD", ["x", "pos"], ["sum"])
    g.op("FULLY_CONNECTED", ["x", "w", "b"], ["y"], keepNumDims=True)
    return g.build(["x"], ["sum", "y"])


def shared_weight_graph() -> Any:
    """Two FULLY_CONNECTED ops reading one weight buffer, each input through a RESHAPE
    (an op the quantizer gives its input's scale), as ALBERT's shared layers look."""
    rng = np.random.default_rng(3)
    g = Graph()
    g.t("a", (1, 4, 8))
    g.t("b", (1, 4, 8))
    g.t("shape", (2,), "i32", [4, 8])
    g.t("a2", (4, 8))
    g.t("b2", (4, 8))
    g.t("w", (6, 8), "f32", rng.standard_normal((6, 8)))
    g.t("ya", (4, 6))
    g.t("yb", (4, 6))
    g.op("RESHAPE", ["a", "shape"], ["a2"])
    g.op("RESHAPE", ["b", "shape"], ["b2"])
    g.op("FULLY_CONNECTED", ["a2", "w", None], ["ya"])
    g.op("FULLY_CONNECTED", ["b2", "w", None], ["yb"])
    model = g.build(["a", "b"], ["ya", "yb"])
    wb = g.sg.tensors[g.names["w"]].buffer
    t = fb.schema().TensorT()
    t.name, t.shape, t.type, t.buffer = b"w:1", [6, 8], g.types["FLOAT32"], wb
    g.sg.tensors.append(t)
    g.sg.operators[3].inputs[1] = len(g.sg.tensors) - 1  # second FC reads the same buffer
    return model
