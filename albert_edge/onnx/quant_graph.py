"""Graph facts that quantizing an ALBERT graph needs, read from ``onnx.ModelProto``.

ONNX Runtime's quantizers work node by node. That is exactly what loses ALBERT's weight
sharing: one shared weight feeds L MatMuls, and a per-node quantizer either skips the
uses it cannot see (Identity in between: optimum leaves 11 of 12 layers fp32) or emits a
quantized copy per use (``MatMulNBitsQuantizer`` appends the same ``W_Q4`` once per
consumer). This module holds what sits around those quantizers:

* :func:`weight_matmuls` / :func:`matmul_counts` — which nodes apply a constant weight and
  whether each does so quantized (the bar: *every* encoder MatMul of *every* layer);
* :func:`duplicate_initializer_groups`, :func:`initializer_bytes`, :func:`shared_weights`
  — every tensor stored once, and the proof;
* :func:`ort_optimized_model` / :func:`runtime_matmul_counts` — what ONNX Runtime runs.

The graph *edits* around ORT's quantizers (canonical form, Gemm → MatMul, unfused
Attention/EmbedLayerNormalization, the tied decoder guard, dedup) are onnx_ir passes in
:mod:`albert_edge.onnx.passes.quant`. Everything here reads ``onnx.ModelProto`` (what
ORT's quantizers consume and produce); the heavy imports stay inside functions so
``albert-edge --help`` stays fast.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

MS_DOMAIN = "com.microsoft"

# Float ops that apply a weight: op → index of the weight input.
FLOAT_WEIGHT_OPS: dict[str, int] = {
    "MatMul": 1,
    "Gemm": 1,
    "Attention": 1,
    "FusedMatMul": 1,  # ORT's load-time fusions (runtime graphs)
    "FusedGemm": 1,
}
# Quantized ops that apply a weight: op → index of the (quantized) weight input.
QUANT_WEIGHT_OPS: dict[str, int] = {
    "MatMulInteger": 1,
    "DynamicQuantizeMatMul": 1,
    "MatMulIntegerToFloat": 1,
    "QAttention": 1,
    "MatMulNBits": 1,
    "MatMulBnb4": 1,
    "QLinearMatMul": 3,
    "QGemm": 3,
}
# Any of these in a graph means it has been quantized already.
QUANT_MARKER_OPS = frozenset(
    {
        *QUANT_WEIGHT_OPS,
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "GatherBlockQuantized",
        "QEmbedLayerNormalization",
        "ConvInteger",
        "QLinearConv",
        "QLinearAdd",
        "QLinearMul",
        "Int4Weight",
        "Int4Rows",
    }
)
# albert_edge.Int4Weight / Int4Rows (:mod:`albert_edge.onnx.passes.quant.int4`): decodes a
# weight or table passes through at load; readers follow their first input to the codes.
INT4_DECODE_OPS = ("Int4Weight", "Int4Rows")
# Ops a weight may pass through between its initializer and the op that applies it.
_PASS_THROUGH = frozenset(
    {
        "Identity",
        "Transpose",
        "Cast",
        "Reshape",
        "Squeeze",
        "Unsqueeze",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        *INT4_DECODE_OPS,
    }
)


_FLOAT_TYPES = {1: "float32", 10: "float16", 16: "bfloat16", 11: "float64"}


# --- reading a graph -----------------------------------------------------------------


@dataclass
class GraphIndex:
    """Producers, consumers and initializers of a graph, by tensor name."""

    graph: onnx.GraphProto
    inits: dict[str, onnx.TensorProto] = field(default_factory=dict)
    producer: dict[str, onnx.NodeProto] = field(default_factory=dict)
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    @classmethod
    def of(cls, graph: onnx.GraphProto) -> GraphIndex:
        idx = cls(graph)
        idx.inits = {t.name: t for t in graph.initializer}
        for node in graph.node:
            for out in node.output:
                if out:
                    idx.producer[out] = node
            for i, name in enumerate(node.input):
                if name:
                    idx.consumers[name].append((node, i))
        return idx

    def trace_constant(self, name: str) -> tuple[str | None, list[str]]:
        """The initializer ``name`` is computed from, and the ops in between (nearest last).

        Follows Identity/Transpose/Cast/Reshape/(Un)Squeeze/DequantizeLinear through
        their data input; returns ``(None, chain)`` if the value is not a constant.
        """
        chain: list[str] = []
        seen = 0
        while name not in self.inits:
            node = self.producer.get(name)
            if node is None or node.op_type not in _PASS_THROUGH or seen > 16:
                return None, chain
            chain.append(node.op_type)
            name = node.input[0]
            seen += 1
        return name, chain


@dataclass(frozen=True)
class WeightUse:
    """One node applying a constant weight."""

    node: str
    op_type: str
    weight: str  # the initializer the weight comes from
    chain: tuple[str, ...]  # ops between the initializer and the node
    dtype: str
    quantized: bool
    how: str  # "int8", "int4", "fp16", "qdq", "float"


def _dtype(t: onnx.TensorProto) -> str:
    import onnx

    return str(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)) if t.data_type else "?"


def weight_matmuls(model: onnx.ModelProto) -> list[WeightUse]:
    """Every node of ``model`` that multiplies by a constant weight.

    Activation × activation MatMuls (QKᵀ, softmax·V) are not weight MatMuls and are not
    listed. A node counts as quantized when its weight is stored below fp32 and the op
    computes with it as such: an integer op (MatMulInteger, QAttention, MatMulNBits, ...),
    a MatMul fed by DequantizeLinear (QDQ, fused by ORT into an integer kernel), or a
    MatMul/Attention whose weight is an fp16 initializer (fp16 compute).
    """
    idx = GraphIndex.of(model.graph)
    uses: list[WeightUse] = []
    for node in model.graph.node:
        if node.op_type in QUANT_WEIGHT_OPS:
            slot = QUANT_WEIGHT_OPS[node.op_type]
            if len(node.input) <= slot:
                continue
            init, chain = idx.trace_constant(node.input[slot])
            if init is None:
                continue
            how = (
                "int4"
                if node.op_type in ("MatMulNBits", "MatMulBnb4") or "Int4Weight" in chain
                else "int8"
            )
            if node.op_type == "MatMulNBits":
                bits = next((a.i for a in node.attribute if a.name == "bits"), 4)
                how = f"int{bits}"
            t = idx.inits[init]
            stored_float = t.data_type in _FLOAT_TYPES
            if stored_float:  # optimum: DynamicQuantizeLinear(Identity(W)) on every run
                how = "float weight, quantized at every run"
            uses.append(
                WeightUse(
                    node.name, node.op_type, init, tuple(chain), _dtype(t), not stored_float, how
                )
            )
        elif node.op_type in FLOAT_WEIGHT_OPS and node.domain in ("", "ai.onnx", MS_DOMAIN):
            slot = FLOAT_WEIGHT_OPS[node.op_type]
            if len(node.input) <= slot:
                continue
            init, chain = idx.trace_constant(node.input[slot])
            if init is None:
                continue
            t = idx.inits[init]
            if "DequantizeLinear" in chain:
                how, q = "qdq", True
            elif t.data_type in (10, 16) and "Cast" not in chain:  # fp16/bf16 compute
                how, q = "fp16", True
            else:
                how, q = "float", False
            uses.append(WeightUse(node.name, node.op_type, init, tuple(chain), _dtype(t), q, how))
    return uses


def matmul_counts(model: onnx.ModelProto) -> dict[str, Any]:
    """``matmuls_quantized`` of ``matmuls_total`` weight MatMuls, and the float ones by name."""
    uses = weight_matmuls(model)
    return {
        "matmuls_quantized": sum(u.quantized for u in uses),
        "matmuls_total": len(uses),
        "float_matmuls": [
            u.node or f"<{u.op_type} on {u.weight}>" for u in uses if not u.quantized
        ],
        "by_kind": dict(Counter(f"{u.op_type}:{u.how}" for u in uses)),
    }


def quantization_markers(model: onnx.ModelProto) -> list[str]:
    """Why ``model`` is not an fp32 graph: quantized ops and reduced-precision weights."""
    ops = Counter(n.op_type for n in model.graph.node if n.op_type in QUANT_MARKER_OPS)
    found = [f"{n} {op}" for op, n in sorted(ops.items())]
    low = [t.name for t in model.graph.initializer if t.data_type in (10, 16) and len(t.dims) >= 2]
    if low:
        found.append(f"{len(low)} fp16/bf16 weight tensors")
    return found


def shared_weights(model: onnx.ModelProto) -> list[dict[str, Any]]:
    """Weights applied by more than one node: name, shape, dtype and how many nodes apply it.

    Counted through DequantizeLinear/Reshape/Transpose (QDQ graphs apply a shared weight
    as one DequantizeLinear feeding L MatMuls): what matters is that L consumers read one
    stored tensor.
    """
    idx = GraphIndex.of(model.graph)
    per_weight: dict[str, set[str]] = defaultdict(set)
    for u in weight_matmuls(model):
        per_weight[u.weight].add(u.node or u.op_type)
    for node in model.graph.node:  # embedding tables read by gathers count too
        if node.op_type in ("Gather", "GatherBlockQuantized") and node.input:
            init, _ = idx.trace_constant(node.input[0])
            if init is not None:
                per_weight[init].add(node.name or node.op_type)
    out = []
    for name, nodes in sorted(per_weight.items()):
        if len(nodes) > 1:
            t = idx.inits[name]
            out.append(
                {"name": name, "shape": list(t.dims), "dtype": _dtype(t), "consumers": len(nodes)}
            )
    return out


def ort_optimized_model(model: onnx.ModelProto | bytes, level: str = "extended") -> onnx.ModelProto:
    """The graph ONNX Runtime (CPU) actually executes, after its load-time optimisations.

    Why: a QDQ graph "runs quantized" only if ORT fuses DequantizeLinear → MatMul into an
    integer kernel (QLinearMatMul, MatMulIntegerToFloat, MatMulNBits) when it loads it;
    reading the optimised graph ORT writes out lets tests and benchmarks check that.
    """
    import tempfile
    from pathlib import Path

    import onnx
    import onnxruntime as ort

    data = model if isinstance(model, bytes) else model.SerializeToString()
    levels = {
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    with tempfile.TemporaryDirectory(prefix="albert-edge-ort-") as d:
        out = Path(d) / "optimized.onnx"
        so = ort.SessionOptions()
        so.graph_optimization_level = levels[level]
        so.optimized_model_filepath = str(out)
        so.intra_op_num_threads = 1
        so.log_severity_level = 3
        ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        return onnx.load(str(out))


def runtime_matmul_counts(model: onnx.ModelProto | bytes) -> dict[str, Any]:
    """:func:`matmul_counts` of the graph ORT executes, where a MatMul still fed by
    DequantizeLinear or Cast counts as float (ORT did not fuse it into an integer or
    fp16 kernel)."""
    optimized = ort_optimized_model(model)
    uses = weight_matmuls(optimized)
    ok = [u for u in uses if u.quantized and u.how != "qdq"]
    return {
        "matmuls_quantized": len(ok),
        "matmuls_total": len(uses),
        "float_matmuls": [u.node for u in uses if not (u.quantized and u.how != "qdq")],
        "by_kind": dict(Counter(f"{u.op_type}:{u.how}" for u in uses)),
    }


def tensor_bytes(t: onnx.TensorProto) -> bytes:
    """The raw little-endian payload of an initializer, however it is stored."""
    import onnx

    if t.HasField("raw_data"):
        return bytes(t.raw_data)
    return bytes(onnx.numpy_helper.to_array(t).tobytes())


def tensor_nbytes(t: onnx.TensorProto) -> int:
    if t.HasField("raw_data"):
        return len(t.raw_data)
    return len(tensor_bytes(t))


def duplicate_initializer_groups(model: onnx.ModelProto) -> list[list[str]]:
    """Groups of initializers holding identical bytes.

    Weights, scales and zero points are compared by raw bytes alone (an int8 weight and a
    uint8 one with the same bytes are still one tensor stored twice); int32/int64 index
    constants only with equal dtype and shape too (a scalar 1 and a [1]-shaped 1 are
    different constants that happen to share 8 bytes).
    """
    groups: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for t in model.graph.initializer:
        digest = hashlib.sha256(tensor_bytes(t)).hexdigest()
        key: tuple[Any, ...] = (
            (digest, t.data_type, tuple(t.dims)) if t.data_type in (6, 7) else (digest,)
        )
        groups[key].append(t.name)
    return [names for names in groups.values() if len(names) > 1]


def initializer_bytes(model: onnx.ModelProto) -> int:
    return sum(tensor_nbytes(t) for t in model.graph.initializer)
