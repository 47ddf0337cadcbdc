"""Which ops of a ``.tflite`` graph LiteRT's GPU accelerator takes, and how the graph splits.

Why a table of our own: ``tf.lite.experimental.Analyzer(gpu_compatibility=True)`` applies
TensorFlow's ``gpu_compatibility.cc`` rules, which accept ``BROADCAST_TO`` — LiteRT 2.x's
GPU accelerator (ml_drift, the kernels phones run) rejects it and splits the graph. This
module predicts placement offline (no GPU needed) from :data:`GPU_RULES`, each rule naming
where it comes from, and simulates TFLite's partitioning so ``inspect`` can say how many
CPU↔GPU boundaries a model has. ``bench --backend litert-gpu`` checks it against LiteRT
itself (``CompiledModel.is_fully_accelerated``) wherever a GPU adapter exists.

Placement rules, in order: (1) the op must have a GPU rule that supports it; (2) every
tensor must have rank ≤ 4 (the GPU's BHWC layout); (3) runtime (non-constant) tensors
must be float32/float16, except where a rule allows more (CAST, SELECT_V2's condition);
(4) op-specific checks (int8 weights); (5) an fp16 ``DEQUANTIZE`` of a constant runs where
its consumers run (the GPU folds it into the consumer; one feeding a CPU op stays on CPU).
Of the GPU-capable partitions the delegate takes the largest (``delegated_ops``); the
rest run on the CPU. On the pre-pass fp32 artifact this predicts 215 GPU / 43 CPU ops,
what LiteRT's GPU accelerator reported for it on an H100 (issue 16).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from albert_edge.tflite.passes.base import is_constant, op_name, shape

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT

# Where each rule comes from (cited in every rule and in the inspect report).
SRC_PARSERS = (
    "tensorflow/lite/delegates/gpu/common/model_builder.cc: NewOperationParser "
    "(ops without a parser get 'Operation is not supported')"
)
SRC_TENSORS = (
    "tensorflow/lite/delegates/gpu/common/model_builder.cc: IsAllAllowedTensors "
    "(runtime tensors must be float32/float16)"
)
SRC_LAYOUT = (
    "tensorflow/lite/delegates/gpu/common/model_builder_helper.cc: ExtractTensorShape "
    "(rank <= 4, mapped to BHWC)"
)
SRC_COMPAT = "tensorflow/lite/tools/versioning/gpu_compatibility.cc: CheckGpuDelegateCompatibility"
SRC_LITERT = (
    "measured: ai-edge-litert 2.x CompiledModel, GPU accelerator (ml_drift over "
    "WebGPU/Vulkan) on an NVIDIA H100 (issue 16)"
)
SRC_PARTITIONS = (
    "tensorflow/lite/delegates/gpu/common/model_builder.cc: GetOpsToReplace "
    "(GetNodesOfFirstNLargestPartitions, max_delegated_partitions = 1 by default)"
)
SRC_FP16 = (
    "tensorflow/lite/delegates/gpu/common/model_builder.cc: BuildModel "
    "(fp16 DEQUANTIZE nodes are ignored: the GPU reads fp16 constants directly)"
)


@dataclass(frozen=True)
class GpuRule:
    """One op's GPU support: ``supported``, why not (or the condition), where it is from."""

    supported: bool
    reason: str
    source: str
    extra_types: tuple[str, ...] = ()  # runtime tensor dtypes allowed besides float


_OK = "supported for float32/float16 tensors"

GPU_RULES: dict[str, GpuRule] = {
    **{
        op: GpuRule(True, _OK, f"{SRC_PARSERS}; {SRC_LITERT}")
        for op in (
            "ADD",
            "SUB",
            "MUL",
            "DIV",
            "RSQRT",
            "SQRT",
            "TANH",
            "LOGISTIC",
            "SOFTMAX",
            "MEAN",
            "SQUARED_DIFFERENCE",
            "FULLY_CONNECTED",
            "RESHAPE",
            "TRANSPOSE",
            "SLICE",
            "STRIDED_SLICE",
            "CONCATENATION",
            "PAD",
            "POW",
            "MAXIMUM",
            "MINIMUM",
        )
    },
    **{
        op: GpuRule(True, _OK, f"{SRC_COMPAT}; {SRC_LITERT}")
        for op in ("BATCH_MATMUL", "GELU", "EXP", "SUM")
    },
    "CAST": GpuRule(
        True,
        "casts between float32, int32 and bool",
        f"{SRC_COMPAT}; {SRC_LITERT}",
        ("INT32", "BOOL"),
    ),
    "SELECT_V2": GpuRule(
        True, "bool condition, float branches", f"{SRC_COMPAT}; {SRC_LITERT}", ("BOOL",)
    ),
    "DEQUANTIZE": GpuRule(True, "fp16 constant, folded into the GPU op that reads it", SRC_FP16),
    "BROADCAST_TO": GpuRule(
        False,
        "Operation is not supported (LiteRT's GPU accelerator; TF's Analyzer accepts it) — "
        "albert-edge's implicit_broadcast pass removes it",
        f"{SRC_LITERT}; accepted by {SRC_COMPAT}",
    ),
    "EMBEDDING_LOOKUP": GpuRule(
        False,
        "no GPU kernel (integer index gather); stays on CPU before the GPU partition",
        f"{SRC_PARSERS}; {SRC_LITERT}",
    ),
    "GATHER": GpuRule(False, "integer index gather; not taken by the GPU accelerator", SRC_PARSERS),
    "QUANTIZE": GpuRule(
        False,
        "int8 activations: the GPU accelerator computes in float; int8-full is the CPU/NPU format",
        SRC_TENSORS,
    ),
}

HYBRID_INT8 = (
    "int8 weights with float activations (dynamic-range int8): LiteRT's GPU accelerator "
    "fails to build the model ('Unable to parse bc coord for BATCH axis'); use "
    "`convert --to tflite --target gpu` (fp16) for the GPU"
)
_INT_WEIGHTS = ("INT8", "UINT8", "INT4", "INT16")
_FLOAT = ("FLOAT32", "FLOAT16")


def _place_op(model: ModelT, sg: Any, op: Any, types: dict[int, str]) -> tuple[bool, str, str]:
    """(on_gpu, reason, source) for one operator, before the DEQUANTIZE fix-up."""
    name = op_name(model, op)
    rule = GPU_RULES.get(name)
    if rule is None:
        return False, "not in albert-edge's GPU rule table (assumed CPU)", "albert-edge"
    if not rule.supported:
        return False, rule.reason, rule.source
    tensors = [int(i) for i in [*op.inputs, *op.outputs] if int(i) >= 0]
    for i in tensors:
        if len(shape(sg, i)) > 4:
            return False, f"rank-{len(shape(sg, i))} tensor (GPU layout is BHWC)", SRC_LAYOUT
    if name in ("FULLY_CONNECTED", "BATCH_MATMUL"):
        for i in tensors:
            if is_constant(model, sg, i) and types.get(sg.tensors[i].type) in _INT_WEIGHTS:
                return False, HYBRID_INT8, SRC_LITERT
    for i in tensors:
        if is_constant(model, sg, i):
            continue
        dtype = types.get(sg.tensors[i].type, "?")
        if dtype not in _FLOAT and dtype not in rule.extra_types:
            return False, f"{dtype.lower()} runtime tensor (GPU runs float tensors)", SRC_TENSORS
    if name == "DEQUANTIZE":
        src = int(op.inputs[0])
        if not (is_constant(model, sg, src) and types.get(sg.tensors[src].type) == "FLOAT16"):
            return False, "dequantize of a runtime or int8 tensor", SRC_TENSORS
    return True, rule.reason, rule.source


def _partitions(sg: Any, on_gpu: list[bool], attached: set[int]) -> list[dict[str, Any]]:
    """Split ops into alternating CPU/GPU subsets the way TFLite does: repeatedly take
    every op of the current kind whose producers are done (graph_info.cc's
    PartitionGraphIntoIndependentNodeSubsets), then switch kind. ``attached`` ops (fp16
    constant DEQUANTIZE on the GPU) take no part and join their first consumer's subset,
    as FP16GraphPartitionHelper (tensorflow/lite/delegates/utils.cc) does."""
    producer: dict[int, int] = {}
    for k, op in enumerate(sg.operators):
        for t in op.outputs:
            producer[int(t)] = k
    deps = [
        {producer[int(t)] for t in op.inputs if int(t) >= 0 and int(t) in producer} - attached
        for op in sg.operators
    ]
    n = len(sg.operators)
    done: set[int] = set(attached)
    members: list[tuple[bool, list[int]]] = []
    free = [k for k in range(n) if k not in attached]
    kind = on_gpu[free[0]] if free else False
    while len(done) < n:
        taken: list[int] = []
        progress = True
        while progress:
            progress = False
            for k in free:
                if k not in done and on_gpu[k] == kind and deps[k] <= done:
                    done.add(k)
                    taken.append(k)
                    progress = True
        if taken:
            members.append((kind, taken))
        kind = not kind
    where = {k: i for i, (_, ks) in enumerate(members) for k in ks}
    sizes = [len(ks) for _, ks in members]
    for a in sorted(attached):
        out = {int(t) for t in sg.operators[a].outputs}
        readers = [c for c in range(n) if out & {int(t) for t in sg.operators[c].inputs}]
        if readers and readers[0] in where:
            sizes[where[readers[0]]] += 1
    return [
        {"accelerator": "gpu" if g else "cpu", "ops": size}
        for (g, _), size in zip(members, sizes, strict=True)
    ]


def gpu_coverage(model: ModelT) -> dict[str, Any]:
    """Predicted placement on LiteRT's GPU accelerator, per subgraph and in total."""
    from albert_edge.tflite import flatbuffer as fb

    types = fb.tensor_type_names()
    subgraphs = []
    unsupported: dict[str, dict[str, Any]] = {}
    fatal = False
    for si, sg in enumerate(model.subgraphs):
        placed = [_place_op(model, sg, op, types) for op in sg.operators]
        on_gpu = [p[0] for p in placed]
        # An fp16 DEQUANTIZE runs where its consumers run.
        for k, op in enumerate(sg.operators):
            if op_name(model, op) == "DEQUANTIZE" and on_gpu[k]:
                out = int(op.outputs[0])
                readers = [c for c, o in enumerate(sg.operators) if out in list(o.inputs)]
                if readers and not any(on_gpu[c] for c in readers):
                    on_gpu[k] = False
                    placed[k] = (False, "fp16 dequantize feeding CPU ops only", SRC_FP16)
        for k, (ok, reason, source) in enumerate(placed):
            if ok and on_gpu[k]:
                continue
            name = op_name(model, sg.operators[k])
            fatal = fatal or reason == HYBRID_INT8
            entry = unsupported.setdefault(
                f"{name}: {reason}", {"op": name, "reason": reason, "source": source, "count": 0}
            )
            entry["count"] += 1
        attached = {
            k
            for k, op in enumerate(sg.operators)
            if on_gpu[k] and op_name(model, op) == "DEQUANTIZE"
        }
        parts = _partitions(sg, on_gpu, attached)
        gpu_parts = [p["ops"] for p in parts if p["accelerator"] == "gpu"]
        cpu_ops = sorted({op_name(model, sg.operators[k]) for k, g in enumerate(on_gpu) if not g})
        subgraphs.append(
            {
                "subgraph": si,
                "ops": len(on_gpu),
                "gpu_ops": sum(on_gpu),
                "cpu_ops": len(on_gpu) - sum(on_gpu),
                "cpu_op_types": cpu_ops,
                "partitions": parts,
                "gpu_partitions": sum(p["accelerator"] == "gpu" for p in parts),
                "cpu_partitions": sum(p["accelerator"] == "cpu" for p in parts),
                "boundaries": max(0, len(parts) - 1),
                # The GPU delegate takes the largest GPU partition only (max_delegated_partitions
                # defaults to 1): the other GPU-capable partitions run on the CPU.
                "delegated_ops": max(gpu_parts, default=0),
            }
        )
    total = sum(s["ops"] for s in subgraphs)
    gpu = sum(s["gpu_ops"] for s in subgraphs)
    return {
        "accelerator": "LiteRT GPU (ml_drift)",
        "ops": total,
        "gpu_ops": gpu,
        "cpu_ops": total - gpu,
        "gpu_fraction": round(gpu / total, 4) if total else 0.0,
        "delegated_ops": sum(s["delegated_ops"] for s in subgraphs),
        "max_delegated_partitions": 1,
        "partitioning_source": SRC_PARTITIONS,
        "fully_accelerated": total > 0 and gpu == total,
        "max_boundaries": max((s["boundaries"] for s in subgraphs), default=0),
        "max_cpu_partitions": max((s["cpu_partitions"] for s in subgraphs), default=0),
        "expected_to_build": not fatal,
        "unsupported": sorted(unsupported.values(), key=lambda e: (-e["count"], e["op"])),
        "subgraphs": subgraphs,
        "rule_sources": sorted({r.source for r in GPU_RULES.values()}),
    }


def suits(coverage: dict[str, Any], precision: str) -> dict[str, str]:
    """Which accelerator an artifact suits, in words (printed by ``convert``/``inspect``)."""
    if precision.startswith("int8"):
        gpu = "no: int8 is the CPU (XNNPACK) / NPU format; convert with --target gpu for the GPU"
    elif coverage["expected_to_build"] and coverage["max_boundaries"] <= 1:
        gpu = (
            f"yes: {coverage['gpu_ops']}/{coverage['ops']} ops on the GPU, "
            f"{coverage['max_boundaries']} CPU-GPU boundary"
        )
    else:
        gpu = f"poorly: {coverage['max_boundaries']} CPU-GPU boundaries"
    return {
        "cpu": "yes (XNNPACK)",
        "gpu": gpu,
        "npu": "int8-full only" if precision != "int8-full" else "yes (integer-only graph)",
    }
