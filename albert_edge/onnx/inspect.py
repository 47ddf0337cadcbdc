"""``albert-edge inspect model.onnx``: size accounting and the ALBERT facts of a graph.

Definitions (the same functions fill ``manifest.json``'s ``sizes`` at convert time):

* ``unique_tensor_bytes`` — bytes of every stored tensor (initializers and Constant
  nodes), each distinct (dtype, shape, bytes) counted once;
* ``duplicate_tensor_bytes`` — bytes of stored tensors that repeat one already counted;
* ``unique_params`` — the model parameters those unique tensors represent: float and
  low-bit integer weights, counted unpacked (a 4-bit weight packed two per byte counts
  two), not quantization scales/zero points and not int32/int64 shape or index constants;
* ``floor_bytes`` / ``ratio_to_floor`` / ``precision`` — from :mod:`albert_edge.facts`
  (the checkpoint's parameters at the requested precision, never this file's dtypes);
* ``matmuls_total`` / ``matmuls_quantized`` — nodes that multiply by a constant weight
  (MatMul, Gemm, Attention and their quantized forms) and how many of them read that weight
  as an integer tensor: an integer op (MatMulInteger, DynamicQuantizeMatMul, QAttention,
  MatMulNBits, ...) or a MatMul/Gemm/Attention fed by DequantizeLinear of an integer
  initializer. Activation × activation MatMuls (QKᵀ, softmax·V) are not counted;
  ``matmuls_fp16`` counts the float ones whose weight is stored as fp16/bf16;
* ``factorized_embedding_intact`` — :func:`albert_edge.onnx.passes.guard.check_factorization`
  with V, E, H from the model's metadata (written at export) or ``config.json`` beside it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx_ir as ir

from albert_edge.errors import AlbertEdgeError
from albert_edge.io import require_model_file
from albert_edge.onnx.ops import (
    INT4_DECODE_OPS,
    INT_WEIGHT_OPS,
    QUANT_MARKER_OPS,
    WEIGHT_OPS,
)
from albert_edge.torch_model import CONFIG_KEYS
from converters.onnx_export import METADATA_KEY  # defined where it is written; re-exported

if TYPE_CHECKING:
    import onnx

# Inputs of quantized ops that are scales / zero points / indices, not parameters.
QUANT_META_INPUTS = {
    "DequantizeLinear": (1, 2),
    "QuantizeLinear": (1, 2),
    "MatMulInteger": (2, 3),
    "DynamicQuantizeMatMul": (2, 3),
    "MatMulIntegerToFloat": (2, 3, 4, 5),
    "MatMulNBits": (2, 3, 4),
    "MatMulBnb4": (2,),
    "GatherBlockQuantized": (2, 3),  # word tables written before the standard-op form
    "QAttention": (3, 4, 6, 7),
    "Int4Weight": (1,),  # the block multipliers of albert_edge.Int4Weight
    "Int4Scales": (0, 1),  # 4-bit log2 row scales and their fp32 super-scale
    "QLinearMatMul": (1, 2, 4, 5, 6, 7),
    "QGemm": (1, 2, 4, 5, 7, 8),
    "QEmbedLayerNormalization": tuple(range(8, 20)),
}
_PASS_THROUGH = (
    "Identity",
    "Transpose",
    "Cast",
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    *INT4_DECODE_OPS,  # the weight (table) is its 4-bit codes
)
# What a weight may pass through between its initializer and the op that applies it.
_WEIGHT_PATH = (*_PASS_THROUGH, "DequantizeLinear", "DynamicQuantizeLinear")
_PARAM_DTYPES = {
    ir.DataType.FLOAT,
    ir.DataType.FLOAT16,
    ir.DataType.BFLOAT16,
    ir.DataType.DOUBLE,
    ir.DataType.INT8,
    ir.DataType.UINT8,
    ir.DataType.INT4,
    ir.DataType.UINT4,
    ir.DataType.INT16,
    ir.DataType.UINT16,
}


def _stored(model: ir.Model) -> list[tuple[ir.Value, ir.TensorProtocol]]:
    from albert_edge.onnx.passes.guard import stored_tensors

    return [(v, t) for v, t, _ in stored_tensors(model) if v is not None]


def _is_quant_meta(value: ir.Value) -> bool:
    from albert_edge.onnx.passes.guard import gathered_scales

    uses = list(value.uses())
    if bool(uses) and all(
        u.idx in QUANT_META_INPUTS.get(u.node.op_type, ()) or _times_a_scale(u.node, u.idx)
        for u in uses
    ):
        return True
    return gathered_scales(value)  # a standard-op quantized table's per-row scales


def _times_a_scale(node: ir.Node, idx: int) -> bool:
    """``node`` multiplies its input ``idx`` by another quantization scale, so that input
    is one too: DynamicQuantizeLinear's activation scale (ORT's int8-dynamic graph
    dequantizes ``MatMulInteger`` by ``x_scale × w_scale``), or one-byte row scales
    gathered from a table (their fp32 super-scale: ``Cast(Gather(scales)) × super``)."""
    from albert_edge.onnx.passes.guard import gathered_scales

    if node.op_type != "Mul" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
        return False
    other = node.inputs[1 - idx]
    src = other.producer() if other is not None else None
    if src is not None and src.op_type == "DynamicQuantizeLinear":
        return other is src.outputs[1]
    if src is not None and src.op_type == "Cast" and src.inputs[0] is not None:
        src = src.inputs[0].producer()
    table = src.inputs[0] if src is not None and src.op_type == "Gather" else None
    return table is not None and gathered_scales(table)


def _attr_int(node: ir.Node, name: str, default: int) -> int:
    a = node.attributes.get(name)
    return a.as_int() if a is not None else default


def _param_count(value: ir.Value, tensor: ir.TensorProtocol) -> int:
    from albert_edge.onnx.passes.guard import logical_shape

    n = 1
    for d in logical_shape(value, tensor):
        n *= int(d)
    return n


def tensor_accounting(model: ir.Model) -> dict[str, Any]:
    """unique/duplicate tensor bytes, unique params and the bytes storing them in ``model``."""
    from albert_edge.onnx.passes.base import tensor_key

    seen: set[tuple[str, tuple[int, ...], str]] = set()
    unique_bytes = dup_bytes = params = stored_param_bytes = 0
    count = 0
    for value, tensor in _stored(model):
        count += 1
        nbytes = int(tensor.nbytes)
        key = tensor_key(tensor)
        if key in seen:
            dup_bytes += nbytes
            continue
        seen.add(key)
        unique_bytes += nbytes
        if tensor.dtype not in _PARAM_DTYPES:
            continue
        stored_param_bytes += nbytes
        if not _is_quant_meta(value):
            params += _param_count(value, tensor)
    return {
        "stored_tensors": count,
        "unique_tensor_bytes": unique_bytes,
        "duplicate_tensor_bytes": dup_bytes,
        "unique_params": params,
        "stored_param_bytes": stored_param_bytes,
    }


def trace_weight(value: ir.Value | None) -> tuple[ir.Value | None, list[str]]:
    """The initializer ``value`` is computed from (None if an activation) and the ops in
    between, nearest last: pass-through ops, DequantizeLinear, DynamicQuantizeLinear and
    the int4 decodes. DynamicQuantizeLinear on a weight is how optimum's int8 export feeds
    MatMulInteger from an fp32 initializer, quantized again every run: such a MatMul
    computes in int8 but stores its weight fp32, and must count as such."""
    chain: list[str] = []
    cur = value
    for _ in range(16):
        if cur is None:
            return None, chain
        if cur.is_initializer() or cur.const_value is not None:
            return cur, chain
        node = cur.producer()
        if node is None or node.op_type not in _WEIGHT_PATH:
            return None, chain
        chain.append(node.op_type)
        cur = node.inputs[0] if node.inputs else None
    return None, chain


_INT_DTYPES = frozenset(
    {
        ir.DataType.INT8,
        ir.DataType.UINT8,
        ir.DataType.INT4,
        ir.DataType.UINT4,
        ir.DataType.INT16,
        ir.DataType.UINT16,
    }
)
_HALF_DTYPES = frozenset({ir.DataType.FLOAT16, ir.DataType.BFLOAT16})


def _np_dtype(t: ir.TensorProtocol) -> str:
    try:
        return str(t.dtype.numpy())
    except (TypeError, ValueError):
        return t.dtype.name.lower()


@dataclass(frozen=True)
class WeightUse:
    """One node applying a constant weight, and how it computes with it.

    ``how``: "int8"/"int4" (an integer op on a stored integer weight), "qdq" (a float op
    fed by DequantizeLinear of an integer weight: ONNX Runtime fuses the pair into an
    integer kernel at load), "fp16" (a float op on an fp16/bf16 weight), "float", or
    "float weight, quantized at every run" (an integer op fed an fp32 weight).
    """

    node: str
    op_type: str
    weight: str  # the initializer the weight comes from
    chain: tuple[str, ...]  # ops between the initializer and the node
    dtype: str
    quantized: bool  # reads the weight as a stored integer tensor
    how: str

    @property
    def half(self) -> bool:
        return self.how == "fp16"


def _weight_use(node: ir.Node, weight: ir.Value, chain: list[str]) -> WeightUse:
    t = weight.const_value
    assert t is not None
    integer = t.dtype in _INT_DTYPES
    if node.op_type in INT_WEIGHT_OPS:
        how = "int4" if node.op_type == "MatMulBnb4" or "Int4Weight" in chain else "int8"
        if node.op_type == "MatMulNBits":
            how = f"int{_attr_int(node, 'bits', 4)}"
        if t.dtype.is_floating_point():  # optimum: DynamicQuantizeLinear(Identity(W))
            how = "float weight, quantized at every run"
    elif "DequantizeLinear" in chain:
        how = "qdq"
    elif t.dtype in _HALF_DTYPES:
        how = "fp16"
    else:
        how = "float"
    quantized = integer and (how == "qdq" or node.op_type in INT_WEIGHT_OPS)
    return WeightUse(
        str(node.name or ""),
        node.op_type,
        str(weight.name),
        tuple(chain),
        _np_dtype(t),
        quantized,
        how,
    )


def weight_matmuls(model: ir.Model) -> list[WeightUse]:
    """Every node of ``model`` that multiplies by a constant weight (:data:`WEIGHT_OPS`).

    Activation × activation MatMuls (QKᵀ, softmax·V) are not weight MatMuls and are not
    listed."""
    uses: list[WeightUse] = []
    for node in model.graph:
        entry = WEIGHT_OPS.get(node.op_type)
        if entry is None or node.domain not in ("", "ai.onnx", "com.microsoft"):
            continue
        slot = entry[0]
        if len(node.inputs) <= slot:
            continue
        weight, chain = trace_weight(node.inputs[slot])
        if weight is not None and weight.const_value is not None:
            uses.append(_weight_use(node, weight, chain))
    return uses


def matmul_counts(model: ir.Model, *, executed: bool = False) -> dict[str, Any]:
    """The one count of weight MatMuls: ``matmuls_quantized`` (computing on an integer
    weight) and ``matmuls_fp16`` (on an fp16 weight) of ``matmuls_total``, per op, and the
    ones that compute in fp32 by name (``float_matmuls``).

    ``executed``: ``model`` is the graph ONNX Runtime runs (:func:`ort_optimized_model`),
    where a MatMul still fed by DequantizeLinear is one ORT did not fuse into an integer
    kernel, so it computes in float; in a stored graph that pair is what ORT fuses at load
    and counts as quantized. That is the one difference between "what the file says" and
    "what ORT runs", and it is this flag.
    """
    uses = weight_matmuls(model)

    def integer(u: WeightUse) -> bool:
        return u.quantized and not (executed and u.how == "qdq")

    by_op: dict[str, dict[str, int]] = {}
    for u in uses:
        entry = by_op.setdefault(u.op_type, {"total": 0, "quantized": 0})
        entry["total"] += 1
        entry["quantized"] += int(integer(u))
    return {
        "matmuls_total": len(uses),
        "matmuls_quantized": sum(integer(u) for u in uses),
        "matmuls_fp16": sum(u.half for u in uses),
        "matmuls_by_op": by_op,
        "float_matmuls": [
            u.node or f"<{u.op_type} on {u.weight}>" for u in uses if not (integer(u) or u.half)
        ],
        "by_kind": dict(Counter(f"{u.op_type}:{u.how}" for u in uses)),
    }


def quantization_markers(model: ir.Model) -> list[str]:
    """Why ``model`` is not an fp32 graph: quantized ops and reduced-precision weights."""
    ops = Counter(n.op_type for n in model.graph if n.op_type in QUANT_MARKER_OPS)
    found = [f"{n} {op}" for op, n in sorted(ops.items())]
    low = [
        v.name
        for v in model.graph.initializers.values()
        if v.const_value is not None
        and v.const_value.dtype in _HALF_DTYPES
        and len(v.const_value.shape) >= 2
    ]
    if low:
        found.append(f"{len(low)} fp16/bf16 weight tensors")
    return found


def shared_weights(model: ir.Model) -> list[dict[str, Any]]:
    """Weights applied by more than one node: name, shape, dtype and how many nodes apply it.

    Counted through DequantizeLinear/Reshape/Transpose (QDQ graphs apply a shared weight
    as one DequantizeLinear feeding L MatMuls): what matters is that L consumers read one
    stored tensor; embedding tables read by several gathers count too.
    """
    per_weight: dict[str, set[str]] = {}
    values: dict[str, ir.Value] = {}
    for u in weight_matmuls(model):
        per_weight.setdefault(u.weight, set()).add(u.node or u.op_type)
    for node in model.graph:
        if node.op_type in ("Gather", "GatherBlockQuantized") and node.inputs:
            init, _ = trace_weight(node.inputs[0])
            if init is not None and init.name is not None:
                per_weight.setdefault(init.name, set()).add(node.name or node.op_type)
                values[init.name] = init
    inits = model.graph.initializers
    out = []
    for name, nodes in sorted(per_weight.items()):
        v = inits.get(name) or values.get(name)
        if len(nodes) > 1 and v is not None and v.const_value is not None:
            t = v.const_value
            out.append(
                {
                    "name": name,
                    "shape": list(t.shape.numpy()),
                    "dtype": _np_dtype(t),
                    "consumers": len(nodes),
                }
            )
    return out


def initializer_bytes(model: ir.Model) -> int:
    """Bytes of every initializer's payload (what the quantizer's size bound measures)."""
    return sum(
        int(v.const_value.nbytes)
        for v in model.graph.initializers.values()
        if v.const_value is not None
    )


def ort_optimized_model(
    model: ir.Model | onnx.ModelProto | bytes, level: str = "extended"
) -> onnx.ModelProto:
    """The graph ONNX Runtime (CPU) actually executes, after its load-time optimisations,
    as ORT writes it (a proto: ``ir.from_proto`` it to count with
    ``matmul_counts(..., executed=True)``).

    Why: a QDQ graph "runs quantized" only if ORT fuses DequantizeLinear → MatMul into an
    integer kernel (QLinearMatMul, MatMulIntegerToFloat, MatMulNBits) when it loads it;
    reading the optimised graph ORT writes out lets checks, tests and benchmarks count
    what it runs.
    """
    import tempfile

    import onnx
    import onnxruntime as ort

    if isinstance(model, ir.Model):
        data = ir.to_proto(model).SerializeToString()
    else:
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


def infer_precision(model: ir.Model) -> str:
    """fp32 / fp16 / int8-dynamic / int8-static / int4, read off the graph's ops and dtypes."""
    ops = {n.op_type for n in model.graph}
    if any(
        n.op_type in ("MatMulNBits", "GatherBlockQuantized") and _attr_int(n, "bits", 4) == 4
        for n in model.graph
    ) or any(n.op_type in ("Int4Weight", "Int4Rows") for n in model.graph):
        return "int4"
    if ops & {"DynamicQuantizeLinear", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}:
        return "int8-dynamic"
    if ops & {"QuantizeLinear", "QLinearMatMul", "QGemm", "QAttention", "MatMulInteger"}:
        return "int8-static"
    if "DequantizeLinear" in ops:
        return "int8-dynamic"
    if any(u.half for u in weight_matmuls(model)):  # the weight products read fp16
        return "fp16"
    weights = [t for _, t in _stored(model) if t.dtype.is_floating_point() and t.size > 1]
    half = sum(t.size for t in weights if t.dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16))
    if weights and half * 2 > sum(t.size for t in weights):
        return "fp16"
    return "fp32"


def albert_config(model: ir.Model, path: Path | None) -> dict[str, Any] | None:
    """The ALBERT facts: model metadata first, then manifest/config.json beside the file."""
    raw = model.metadata_props.get(METADATA_KEY)
    if raw:
        try:
            data = json.loads(raw)
            if isinstance(data, dict):
                return data
        except json.JSONDecodeError:
            pass
    if path is not None:
        cfg = path.parent / "config.json"
        if cfg.is_file():
            try:
                data = json.loads(cfg.read_text())
            except (OSError, json.JSONDecodeError):
                return None
            found = {k: data[k] for k in CONFIG_KEYS if k in data}
            if data.get("pruned_heads"):  # a pruned checkpoint's
                found["pruned_heads"] = data["pruned_heads"]
            return found
    return None


def factorization(model: ir.Model, config: dict[str, Any] | None) -> tuple[bool | None, list[str]]:
    from albert_edge.onnx.passes.guard import check_factorization

    if not config or not all(k in config for k in ("vocab_size", "embedding_size", "hidden_size")):
        return None, [
            "V, E, H unknown: no ALBERT metadata in the model and no config.json beside it"
        ]
    problems = check_factorization(
        model,
        int(config["vocab_size"]),
        int(config["embedding_size"]),
        int(config["hidden_size"]),
        strict=False,
    )
    return not problems, problems


def model_files_bytes(path: Path, model: ir.Model | None = None) -> int:
    """Size on disk of the model file plus any external-data files it references."""
    total = path.stat().st_size
    if model is not None:
        names = set()
        for _, t in _stored(model):
            if isinstance(t, ir.ExternalTensor):
                names.add(t.location)
        for name in names:
            f = path.parent / name
            if f.is_file():
                total += f.stat().st_size
    return total


def io_spec(values: Iterable[ir.Value]) -> list[dict[str, Any]]:
    spec = []
    for v in values:
        dtype = v.dtype.name.lower() if v.dtype is not None else None
        shape = (
            [
                d if isinstance(d, int) else (d.value if isinstance(d, ir.SymbolicDim) else str(d))
                for d in v.shape
            ]
            if v.shape is not None
            else None
        )
        spec.append(
            {"name": v.name, "dtype": {"float": "float32"}.get(str(dtype), dtype), "shape": shape}
        )
    return spec


def describe_model(model: ir.Model, path: Path | None, file_bytes: int) -> dict[str, Any]:
    """What the graph itself says about an in-memory model (``path`` for neighbours).

    The size floor and ratio are not here: they need the checkpoint's parameter count and
    the requested precision, and :func:`albert_edge.facts.describe_onnx` adds them (with
    this graph's counts) so every command reports the same facts.
    """
    from albert_edge.onnx.passes.base import op_counts

    config = albert_config(model, path)
    intact, problems = factorization(model, config)
    acc = tensor_accounting(model)
    counts = matmul_counts(model)
    info: dict[str, Any] = {
        "format": "onnx",
        "path": str(path) if path is not None else None,
        "precision": infer_precision(model),
        "opset": int(model.opset_imports.get("", 0)),
        "producer": f"{model.producer_name or ''} {model.producer_version or ''}".strip(),
        "inputs": io_spec(model.graph.inputs),
        "outputs": io_spec(model.graph.outputs),
        "file_bytes": int(file_bytes),
        **{k: acc[k] for k in ("unique_tensor_bytes", "duplicate_tensor_bytes", "unique_params")},
        "initializers": len(model.graph.initializers),
        **{
            k: counts[k]
            for k in ("matmuls_total", "matmuls_quantized", "matmuls_fp16", "matmuls_by_op")
        },
        "factorized_embedding_intact": intact,
        "op_counts": op_counts(model.graph),
    }
    if problems:
        info["factorization_problems"] = problems
    if config:
        info["albert"] = config
    from albert_edge.onnx.requirements import graph_requirements

    # from the graph itself, so an artifact written before these keys gets them too
    req = graph_requirements(model)
    info["runs_right_on"] = req["runs_right_on"]
    info["openvino"] = req["openvino"]
    return info


def _check_is_a_model(path: Path, model: ir.Model) -> None:
    """Refuse what protobuf parses but is no model: every byte string, the empty one
    included, decodes as *some* ModelProto (zero bytes: no graph, opset 0), which then
    read as "fp32 ONNX, opset 0"."""
    size = path.stat().st_size
    if size == 0:
        raise AlbertEdgeError(f"{path}: empty file (0 bytes), not an ONNX model; re-export it")
    if not model.opset_imports or not len(model.graph.outputs) or not len(model.graph):
        raise AlbertEdgeError(
            f"{path}: not an ONNX model ({size} bytes with no graph, outputs or opset); "
            "the file is truncated or not ONNX; re-export it"
        )


def inspect_onnx(path: str | Path) -> dict[str, Any]:
    """Size accounting, weight-MatMul counts and ALBERT facts of an ``.onnx`` file.

    If an albert-edge ``manifest.json`` sits beside it, its precision, head, source and
    verification figures are reported too.
    """
    p = Path(path)
    require_model_file(p, "ONNX")
    try:
        model = ir.load(str(p))
    except Exception as exc:
        raise AlbertEdgeError(
            f"{p}: not a readable ONNX model ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}); re-export it"
        ) from None
    _check_is_a_model(p, model)
    info = describe_model(model, p, model_files_bytes(p, model))
    from albert_edge.layout import artifact_root

    root = artifact_root(p)
    manifest_path = root / "manifest.json"
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, json.JSONDecodeError):
            manifest = None
        if (
            isinstance(manifest, dict)
            and (root / str(manifest.get("model_file"))).resolve() == p.resolve()
        ):
            for key in ("head", "source", "optimize", "verification", "quantization"):
                if key in manifest:
                    info[key] = manifest[key]
    return info
