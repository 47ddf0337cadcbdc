"""Graph facts and small rewrites that quantizing an ALBERT graph needs.

ONNX Runtime's quantizers work node by node. That is exactly what loses ALBERT's weight
sharing: one shared weight feeds L MatMuls, and a per-node quantizer either skips the
uses it cannot see (Identity in between: optimum leaves 11 of 12 layers fp32) or emits a
quantized copy per use (``MatMulNBitsQuantizer`` appends the same ``W_Q4`` once per
consumer). This module holds what sits around those quantizers:

* :func:`weight_matmuls` / :func:`matmul_counts` — which nodes apply a constant weight and
  whether each does so quantized (the bar: *every* encoder MatMul of *every* layer);
* :func:`prepare_graph` — the canonical form the quantizers need (every consumer reads
  a shared weight straight from ONE initializer), using onnx_ir's library passes;
* :func:`gemm_to_matmul`, :func:`unfuse_attention` — rewrites ORT's quantizers lack
  (``MatMulNBits`` and the QDQ quantizer handle MatMul, not Gemm or the fused Attention);
* :func:`dedup_initializers`, :func:`duplicate_initializer_groups` — store every tensor once
  and prove it.

Everything works on ``onnx.ModelProto`` (ORT's quantizers consume and produce it); the
heavy imports stay inside functions so ``albert-edge --help`` stays fast.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from albert_edge.errors import QuantizationError

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
    }
)
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
    }
)

# onnx_ir dedups only tensors below size_limit elements by default (1024): ALBERT's
# shared weights are millions.
_NO_LIMIT = 1 << 40

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
            how = "int4" if node.op_type in ("MatMulNBits", "MatMulBnb4") else "int8"
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


# --- preparing a graph ---------------------------------------------------------------


def ensure_ms_opset(model: onnx.ModelProto) -> None:
    """Declare com.microsoft if a contrib op uses it (ORT's fusion output often does not)."""
    import onnx

    uses_ms = any(n.domain == MS_DOMAIN for n in model.graph.node)
    if uses_ms and not any(o.domain == MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid(MS_DOMAIN, 1))


def _run_ir_passes(model: onnx.ModelProto, passes: Iterable[Any]) -> onnx.ModelProto:
    import onnx_ir as ir

    m = ir.from_proto(model)
    for p in passes:
        m = p(m).model
    proto: onnx.ModelProto = ir.to_proto(m)
    return proto


def prepare_graph(model: onnx.ModelProto) -> onnx.ModelProto:
    """The canonical form ORT's quantizers need, or a :class:`QuantizationError`.

    albert-edge's own export pipeline already guarantees it; this makes the quantizer
    safe on a raw TorchScript export too, using onnx_ir's library passes: Identity
    elimination (raw exports reach layers 2..L's shared weights through Identity, which
    is why optimum's quantizer skips them) and initializer deduplication. A weight reached
    through a run-time Transpose of a shared initializer cannot be quantized once for
    all its uses; that form is refused rather than silently copied — except the tied
    word-embedding table (Gather + Transpose → MatMul decoder), which
    :mod:`albert_edge.onnx.quant_embed` handles.
    """
    from onnx_ir.passes.common import (
        DeduplicateInitializersPass,
        IdentityEliminationPass,
        RemoveUnusedNodesPass,
    )

    out = _run_ir_passes(
        model,
        [
            IdentityEliminationPass(),
            DeduplicateInitializersPass(size_limit=_NO_LIMIT),
            RemoveUnusedNodesPass(),
        ],
    )
    ensure_ms_opset(out)
    name_nodes(out)
    # ORT's quantizers re-run ONNX shape inference and fail on stale value_info (for
    # example shapes recorded for initializers that a Gemm rewrite transposes).
    del out.graph.value_info[:]
    idx = GraphIndex.of(out.graph)
    for u in weight_matmuls(out):
        readers = idx.consumers.get(u.weight, [])
        tied_table = any(n.op_type == "Gather" and slot == 0 for n, slot in readers)
        if "Transpose" in u.chain and len(readers) > 1 and not tied_table:
            raise QuantizationError(
                f"weight {u.weight} reaches {u.node or u.op_type} through a run-time Transpose "
                "and is also used elsewhere; the graph is not in albert-edge's canonical form, "
                "convert the checkpoint with `albert-edge convert` and quantize that"
            )
    return out


def make_constant(name: str, value: Any) -> onnx.NodeProto:
    """A Constant node (small index tensors live in the graph, not among the weights)."""
    from onnx import helper, numpy_helper

    return helper.make_node(
        "Constant", [], [name], name=f"{name}_const", value=numpy_helper.from_array(value, name)
    )


def _unique_namer(model: onnx.ModelProto) -> Any:
    used = {t.name for t in model.graph.initializer}
    for n in model.graph.node:
        used.update(n.output)
        used.update(n.input)
        used.add(n.name)
    used.update(i.name for i in model.graph.input)

    def fresh(base: str) -> str:
        name, k = base, 1
        while name in used:
            name, k = f"{base}_{k}", k + 1
        used.add(name)
        return name

    return fresh


def name_nodes(model: onnx.ModelProto) -> None:
    """Give every node a unique name: ORT's quantizers select nodes by name."""
    fresh = _unique_namer(model)
    seen: set[str] = set()
    for node in model.graph.node:
        if not node.name or node.name in seen:
            node.name = fresh(f"{node.op_type}_{len(seen)}")
        seen.add(node.name)


def gemm_to_matmul(model: onnx.ModelProto, *, skip_weights: set[str] | None = None) -> int:
    """Rewrite Gemm(A, W, C) with a constant W as MatMul(A, W') + C, in place.

    Why by hand: ``MatMulNBitsQuantizer`` and our QDQ recipe quantize MatMul only, and the
    pooler and classifier are exported as Gemm(transB=1). ``W'`` (W transposed once) is
    shared by every Gemm that used W, so sharing survives; weights in ``skip_weights``
    (or also read by another kind of node) are left alone rather than stored twice.
    Returns the number of rewritten nodes.
    """
    import numpy as np
    from onnx import helper, numpy_helper

    idx = GraphIndex.of(model.graph)
    fresh = _unique_namer(model)
    skip = skip_weights or set()
    transposed: dict[str, str] = {}
    new_nodes: list[onnx.NodeProto] = []
    rewritten = 0
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        w = node.input[1] if node.op_type == "Gemm" and len(node.input) > 1 else ""
        ok = (
            node.op_type == "Gemm"
            and w in idx.inits
            and w not in skip
            and len(idx.inits[w].dims) == 2
            and attrs.get("transA", 0) == 0
            and float(attrs.get("alpha", 1.0)) == 1.0
            and float(attrs.get("beta", 1.0)) == 1.0
            and all(c.op_type == "Gemm" for c, _ in idx.consumers[w])
        )
        if not ok:
            new_nodes.append(node)
            continue
        weight = w
        if attrs.get("transB", 0):
            if w not in transposed:
                arr = np.ascontiguousarray(numpy_helper.to_array(idx.inits[w]).T)
                t = numpy_helper.from_array(arr, fresh(f"{w}_T"))
                model.graph.initializer.append(t)
                transposed[w] = t.name
            weight = transposed[w]
        has_bias = len(node.input) > 2 and node.input[2]
        mm_out = fresh(f"{node.output[0]}_mm") if has_bias else node.output[0]
        name = node.name or fresh("Gemm")
        new_nodes.append(helper.make_node("MatMul", [node.input[0], weight], [mm_out], name=name))
        if has_bias:
            new_nodes.append(
                helper.make_node(
                    "Add", [mm_out, node.input[2]], [node.output[0]], name=fresh(f"{name}_bias")
                )
            )
        rewritten += 1
    if rewritten:
        del model.graph.node[:]
        model.graph.node.extend(new_nodes)
        drop = [w for w in transposed if not any(w in n.input for n in model.graph.node)]
        keep = [t for t in model.graph.initializer if t.name not in drop]
        del model.graph.initializer[:]
        model.graph.initializer.extend(keep)
    return rewritten


def unfuse_attention(model: onnx.ModelProto) -> int:
    """Replace each fused ``Attention`` by MatMul(x, W_qkv) → Split → ``MultiHeadAttention``.

    Why: ORT's weight-only (MatMulNBits) and QDQ quantizers cannot reach the packed QKV
    weight inside the Attention contrib op, so int4 and int8-static would leave Q/K/V fp32.
    After this rewrite the projection is a plain MatMul on the same shared [H, 3H]
    initializer, and MultiHeadAttention (same kernel family, same mask semantics: a 1-D
    mask index or a 2-D key padding mask) does the rest. Nodes with features
    MultiHeadAttention lacks here (past state, rotary, unidirectional) raise.
    """
    import numpy as np
    from onnx import helper

    idx = GraphIndex.of(model.graph)
    fresh = _unique_namer(model)
    split_consts: dict[tuple[int, ...], str] = {}
    new_nodes: list[onnx.NodeProto] = []
    count = 0
    for node in model.graph.node:
        if node.op_type != "Attention" or node.domain != MS_DOMAIN:
            new_nodes.append(node)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        extra = [i for i, name in enumerate(node.input) if name and i >= 4 and i != 5]
        if (
            extra
            or len([o for o in node.output if o]) > 1
            or attrs.get("unidirectional", 0)
            or attrs.get("do_rotary", 0)
        ):
            raise QuantizationError(
                f"Attention node {node.name!r} uses past state, rotary embeddings or causal "
                "masking, which albert-edge's quantizer does not support; export without them"
            )
        w = node.input[1]
        if w not in idx.inits:
            raise QuantizationError(f"Attention node {node.name!r}: QKV weight is not a constant")
        three_h = int(idx.inits[w].dims[1])
        sizes = tuple(int(s) for s in attrs.get("qkv_hidden_sizes", ())) or (three_h // 3,) * 3
        if sizes not in split_consts:
            split_consts[sizes] = fresh("qkv_split_sizes")
            new_nodes.append(make_constant(split_consts[sizes], np.asarray(sizes, dtype=np.int64)))
        base = node.name or fresh("Attention")
        qkv = fresh(f"{base}_qkv")
        q, k, v = fresh(f"{base}_q"), fresh(f"{base}_k"), fresh(f"{base}_v")
        new_nodes.append(
            helper.make_node("MatMul", [node.input[0], w], [qkv], name=f"{base}_qkv_mm")
        )
        new_nodes.append(
            helper.make_node(
                "Split", [qkv, split_consts[sizes]], [q, k, v], name=f"{base}_split", axis=-1
            )
        )
        bias = node.input[2] if len(node.input) > 2 else ""
        mask = node.input[3] if len(node.input) > 3 else ""
        attn_bias = node.input[5] if len(node.input) > 5 else ""
        inputs = [q, k, v, bias, mask] + ([attn_bias] if attn_bias else [])
        kwargs = {
            k2: attrs[k2] for k2 in ("num_heads", "scale", "mask_filter_value") if k2 in attrs
        }
        new_nodes.append(
            helper.make_node(
                "MultiHeadAttention",
                inputs,
                [node.output[0]],
                name=f"{base}_mha",
                domain=MS_DOMAIN,
                **kwargs,
            )
        )
        count += 1
    if count:
        del model.graph.node[:]
        model.graph.node.extend(new_nodes)
    return count


def tied_gemms_to_matmul(model: onnx.ModelProto, table: str, gemms: Iterable[str]) -> list[str]:
    """Gemm(x, table, transB=1) → MatMul(x, Transpose(table)) for the named nodes, in place.

    Why: ``quantize_dynamic`` rewrites *every* Gemm as MatMul and, for transB=1,
    transposes the weight initializer in place ("assume B is not used by any other
    node"). For ALBERT's tied MLM decoder that initializer is the word table the
    embedding Gather also reads, which would then gather from a transposed table. A
    run-time Transpose keeps the table as it is; :func:`matmuls_to_tied_gemm` undoes this.
    Returns the names of the rewritten nodes (kept from the Gemms).
    """
    from onnx import helper

    names = set(gemms)
    fresh = _unique_namer(model)
    t_out = fresh(f"{table}_T")
    new_nodes = []
    done: list[str] = []
    for node in model.graph.node:
        if node.op_type == "Gemm" and node.name in names and node.input[1] == table:
            if not done:
                new_nodes.append(
                    helper.make_node(
                        "Transpose", [table], [t_out], name=fresh(f"{table}_transpose"), perm=[1, 0]
                    )
                )
            bias = node.input[2] if len(node.input) > 2 else ""
            mm_out = fresh(f"{node.output[0]}_mm") if bias else node.output[0]
            new_nodes.append(
                helper.make_node("MatMul", [node.input[0], t_out], [mm_out], name=node.name)
            )
            if bias:
                new_nodes.append(
                    helper.make_node(
                        "Add", [mm_out, bias], [node.output[0]], name=fresh(f"{node.name}_bias")
                    )
                )
            done.append(node.name)
        else:
            new_nodes.append(node)
    if done:
        del model.graph.node[:]
        model.graph.node.extend(new_nodes)
    return done


def matmuls_to_tied_gemm(model: onnx.ModelProto, table: str, names: Iterable[str]) -> int:
    """Undo :func:`tied_gemms_to_matmul` for nodes still reading Transpose(table)."""
    from onnx import helper

    idx = GraphIndex.of(model.graph)
    wanted = set(names)
    count = 0
    for i, node in enumerate(model.graph.node):
        if node.op_type != "MatMul" or node.name not in wanted:
            continue
        src = idx.producer.get(node.input[1])
        if src is None or src.op_type != "Transpose" or src.input[0] != table:
            continue
        gemm = helper.make_node(
            "Gemm", [node.input[0], table], list(node.output), name=node.name, transB=1
        )
        model.graph.node[i].CopyFrom(gemm)
        count += 1
    return count


def unfuse_embed_layernorm(model: onnx.ModelProto) -> int:
    """Replace ``EmbedLayerNormalization`` by the standard ops it fuses, in place.

    Why: the fused op reads the word table as a float input, so the table cannot be
    stored quantized behind it (ORT's QEmbedLayerNormalization is per-tensor uint8 for
    every table and int8-dynamic only). The embedding stage is a few gathers and one
    LayerNorm, a negligible share of ALBERT's time, so quantizing the table trades the
    fusion for a quantized table: Gather(word) + Gather(position: 0..S-1 or the given
    ids) + Gather(segment) → Add → LayerNormalization (epsilon kept). A consumed
    ``mask_index`` output is rebuilt as ReduceSum(mask) (int32), ``embedding_sum`` as the
    sum before the LayerNorm.
    """
    import numpy as np
    import onnx
    from onnx import helper

    idx = GraphIndex.of(model.graph)
    fresh = _unique_namer(model)
    consts: dict[str, str] = {}
    new_nodes: list[onnx.NodeProto] = []

    def const(key: str, value: np.ndarray) -> str:
        # Constant nodes, not initializers: index scalars like 0 and 1 would otherwise
        # duplicate bytes the graph already stores.
        if key not in consts:
            consts[key] = fresh(f"eln_{key}")
            new_nodes.append(make_constant(consts[key], value))
        return consts[key]

    count = 0
    for node in model.graph.node:
        if node.op_type != "EmbedLayerNormalization" or node.domain != MS_DOMAIN:
            new_nodes.append(node)
            continue
        ins = list(node.input) + [""] * (9 - len(node.input))
        ids, seg_ids, word, pos, seg, gamma, beta, mask, pos_ids = ins[:9]
        outs = list(node.output) + [""] * (3 - len(node.output))
        eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-12)
        b = node.name or fresh("EmbedLayerNormalization")
        parts: list[onnx.NodeProto] = []
        w_out = fresh(f"{b}_word")
        parts.append(helper.make_node("Gather", [word, ids], [w_out], name=f"{b}_word_gather"))
        total = w_out
        if not pos_ids:
            shape, seq, rng = fresh(f"{b}_shape"), fresh(f"{b}_seq"), fresh(f"{b}_positions")
            parts += [
                helper.make_node("Shape", [ids], [shape], name=f"{b}_shape"),
                helper.make_node(
                    "Gather",
                    [shape, const("one", np.asarray(1, np.int64))],
                    [seq],
                    name=f"{b}_seq",
                    axis=0,
                ),
                helper.make_node(
                    "Range",
                    [
                        const("zero", np.asarray(0, np.int64)),
                        seq,
                        const("one", np.asarray(1, np.int64)),
                    ],
                    [rng],
                    name=f"{b}_range",
                ),
            ]
            pos_ids = rng
        p_out = fresh(f"{b}_pos")
        parts.append(helper.make_node("Gather", [pos, pos_ids], [p_out], name=f"{b}_pos_gather"))
        s1 = fresh(f"{b}_sum1")
        parts.append(helper.make_node("Add", [total, p_out], [s1], name=f"{b}_add_pos"))
        total = s1
        if seg and seg_ids:
            g_out, s2 = fresh(f"{b}_seg"), fresh(f"{b}_sum2")
            parts.append(
                helper.make_node("Gather", [seg, seg_ids], [g_out], name=f"{b}_seg_gather")
            )
            parts.append(helper.make_node("Add", [total, g_out], [s2], name=f"{b}_add_seg"))
            total = s2
        if outs[2]:
            parts.append(
                helper.make_node("Identity", [total], [outs[2]], name=f"{b}_embedding_sum")
            )
        parts.append(
            helper.make_node(
                "LayerNormalization",
                [total, gamma, beta],
                [outs[0]],
                name=f"{b}_ln",
                axis=-1,
                epsilon=eps,
            )
        )
        if outs[1] and idx.consumers.get(outs[1]):
            if not mask:
                raise QuantizationError(
                    f"EmbedLayerNormalization {b!r}: its mask_index output is used but it has no mask input"
                )
            m32 = fresh(f"{b}_mask_int32")
            parts += [
                helper.make_node(
                    "Cast", [mask], [m32], name=f"{b}_mask_cast", to=onnx.TensorProto.INT32
                ),
                helper.make_node(
                    "ReduceSum",
                    [m32, const("axis1", np.asarray([1], np.int64))],
                    [outs[1]],
                    name=f"{b}_mask_index",
                    keepdims=0,
                ),
            ]
        new_nodes += parts
        count += 1
    if count:
        del model.graph.node[:]
        model.graph.node.extend(new_nodes)
    return count


def dedup_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """Store every tensor once: same-name copies first, then identical contents.

    ORT's per-node quantizers append one quantized initializer per consumer of a shared
    weight (same name, same bytes); protobuf keeps them all. Same-name copies must hold
    identical bytes (checked: anything else is a quantizer bug) and are dropped; then
    onnx_ir's DeduplicateInitializersPass merges equal tensors under different names and
    RemoveUnusedNodesPass drops what no node reads any more.
    """
    from onnx_ir.passes.common import DeduplicateInitializersPass, RemoveUnusedNodesPass

    seen: dict[str, onnx.TensorProto] = {}
    keep = []
    for t in model.graph.initializer:
        if t.name in seen:
            if tensor_bytes(seen[t.name]) != tensor_bytes(t) or list(seen[t.name].dims) != list(
                t.dims
            ):
                raise QuantizationError(
                    f"quantizer produced two different tensors named {t.name}; this is a bug"
                )
            continue
        seen[t.name] = t
        keep.append(t)
    if len(keep) != len(model.graph.initializer):
        del model.graph.initializer[:]
        model.graph.initializer.extend(keep)
    out = _run_ir_passes(
        model, [DeduplicateInitializersPass(size_limit=_NO_LIMIT), RemoveUnusedNodesPass()]
    )
    ensure_ms_opset(out)
    return out
