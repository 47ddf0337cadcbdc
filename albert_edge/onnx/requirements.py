"""What an ONNX artifact needs from the runtime that loads it, computed from its graph.

A user with an older onnxruntime used to get ORT's own load error ("Could not find an
implementation for GatherBlockQuantized(1) node ...") with no hint of the fix. The
manifest now records, under ``"requirements"``, the minimum onnxruntime version the
graph's ops and opset need (:func:`graph_requirements`), and
:func:`check_runtime_version` turns a too-old runtime into one line naming the version.

The table holds the ONNX Runtime release that first shipped a CPU kernel for each op
albert-edge emits; ops not listed are older than the opset floor and need nothing extra.

The same graph says whether OpenVINO, Intel's runtime, can load the artifact
(:func:`openvino_support`): its ONNX front end has no conversion rule for
``com.microsoft.QAttention`` (the fused int8 attention of the default int8-dynamic
artifact) and does not expand albert-edge's model-local functions (int4 for int8 kernels),
and refuses the whole model for either. ``runs_right_on`` names the runtimes measured to
load and compute an artifact of this op set (``tests/clients/test_openvino.py`` loads every
kind albert-edge writes in OpenVINO and compares it with ONNX Runtime).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from albert_edge.errors import AlbertEdgeError

if TYPE_CHECKING:
    import onnx
    import onnx_ir as ir

MS_DOMAIN = "com.microsoft"

# ai.onnx opset → first onnxruntime release that runs it.
OPSET_MIN_ORT: dict[int, str] = {
    13: "1.7",
    14: "1.10",
    15: "1.11",
    16: "1.12",
    17: "1.13",
    18: "1.14",
    19: "1.16",
    20: "1.17",
    21: "1.20",
}
# (domain, op) → first onnxruntime release with a CPU kernel for it (as albert-edge uses it).
OP_MIN_ORT: dict[tuple[str, str], str] = {
    # word tables of artifacts written before the standard-op form (8-bit: CPU kernel in
    # 1.23); albert-edge now reads quantized tables with Gather/Cast/Mul (any version)
    (MS_DOMAIN, "GatherBlockQuantized"): "1.23",
    (MS_DOMAIN, "MatMulNBits"): "1.17",
    # int4 for int8 kernels: model-local functions ORT folds at load with uint8/int8
    # Div/Mod/Sub/Mul; 1.20.1 has no uint8 Div kernel, 1.21.1 loads them (measured)
    ("albert_edge", "Int4Weight"): "1.21",
    ("albert_edge", "Int4Rows"): "1.21",
    ("albert_edge", "Int4Scales"): "1.21",
    (MS_DOMAIN, "MultiHeadAttention"): "1.14",
    (MS_DOMAIN, "SkipSimplifiedLayerNormalization"): "1.17",
    (MS_DOMAIN, "QAttention"): "1.7",
    (MS_DOMAIN, "DynamicQuantizeMatMul"): "1.7",
    (MS_DOMAIN, "MatMulIntegerToFloat"): "1.7",
    (MS_DOMAIN, "Attention"): "1.7",
    (MS_DOMAIN, "EmbedLayerNormalization"): "1.7",
    (MS_DOMAIN, "SkipLayerNormalization"): "1.7",
    (MS_DOMAIN, "FastGelu"): "1.7",
    (MS_DOMAIN, "BiasGelu"): "1.7",
    (MS_DOMAIN, "Gelu"): "1.7",
}


# OpenVINO's ONNX front end, measured with openvino 2026.4.1 (tests/clients/test_openvino.py
# and a one-node graph per op): the com.microsoft ops albert-edge emits that it converts.
# It converts every ai.onnx op albert-edge emits; com.microsoft.QAttention has no conversion
# rule, and ops of any other domain (albert-edge's model-local int4 functions) are not
# expanded ("No conversion rule found for operations: albert_edge.Int4Weight, ...").
OPENVINO_MEASURED = "2026.4.1"
OPENVINO_CONVERTS_MS: frozenset[str] = frozenset(
    {
        "Attention",
        "BiasGelu",
        "DynamicQuantizeMatMul",
        "EmbedLayerNormalization",
        "FastGelu",
        "GatherBlockQuantized",
        "Gelu",
        "MatMulIntegerToFloat",
        "MatMulNBits",
        "MultiHeadAttention",
        "SkipLayerNormalization",
        "SkipSimplifiedLayerNormalization",
    }
)
# What to convert instead when OpenVINO is the target (measured to load and match ONNX
# Runtime there: docs/artifacts.md).
OPENVINO_INSTEAD = (
    "for OpenVINO convert with --precision int8-static (QDQ int8), or int8-dynamic with "
    "--optimize none, or int4 with --int4-kernel nbits"
)


def openvino_support(ops: Any) -> dict[str, Any]:
    """Whether OpenVINO's ONNX front end converts a graph of ``ops`` ((domain, op) pairs):
    ``{"loads": bool, "unconverted": [...], "why": ..., "measured_with": ...}``; ``why``
    names the ops it has no conversion rule for and the artifact to pick instead."""
    bad = sorted(
        {
            f"{domain}.{op}"
            for domain, op in ops
            if not (domain == "ai.onnx" or (domain == MS_DOMAIN and op in OPENVINO_CONVERTS_MS))
        }
    )
    record: dict[str, Any] = {
        "loads": not bad,
        "unconverted": bad,
        "measured_with": f"openvino {OPENVINO_MEASURED}",
    }
    if bad:
        record["why"] = f"OpenVINO has no conversion rule for {', '.join(bad)}; {OPENVINO_INSTEAD}"
    return record


def parse_version(text: str) -> tuple[int, ...]:
    """``"1.23.2"`` → (1, 23, 2); pre-release/local suffixes are ignored."""
    parts = []
    for piece in text.split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece else ""
        if not digits or not piece[0].isdigit():
            break
        parts.append(int(digits))
        if not piece.isdigit():
            break
    return tuple(parts) or (0,)


def _max_version(versions: list[str]) -> str:
    return max(versions, key=parse_version) if versions else "1.7"


def _opsets_and_ops(model: onnx.ModelProto | ir.Model) -> tuple[dict[str, int], Counter[Any]]:
    """(domain → opset, (domain, op) → count) of an onnx_ir model or a proto (what
    :mod:`albert_edge.onnx.runtime` reads)."""
    m: Any = model
    if hasattr(m, "opset_imports"):  # onnx_ir
        opsets = {(d or "ai.onnx"): int(v) for d, v in m.opset_imports.items()}
        nodes: Any = m.graph
    else:
        opsets = {(o.domain or "ai.onnx"): int(o.version) for o in m.opset_import}
        nodes = m.graph.node
    return opsets, Counter((n.domain or "ai.onnx", n.op_type) for n in nodes)


def graph_requirements(model: onnx.ModelProto | ir.Model) -> dict[str, Any]:
    """The manifest's ``"requirements"``: opsets, contrib ops used, and the minimum
    onnxruntime version (with the op that sets it)."""
    opsets, ops = _opsets_and_ops(model)
    contrib = sorted(op for (domain, op) in ops if domain == MS_DOMAIN)
    needs: dict[str, str] = {}
    onnx_opset = opsets.get("ai.onnx")
    if onnx_opset is not None:
        floor = OPSET_MIN_ORT.get(onnx_opset)
        if floor is None:
            known = max(OPSET_MIN_ORT)
            floor = OPSET_MIN_ORT[known] if onnx_opset > known else "1.7"
        needs[f"ai.onnx opset {onnx_opset}"] = floor
    for (domain, op), _ in sorted(ops.items()):
        key = (MS_DOMAIN if domain == MS_DOMAIN else domain, op)
        if key in OP_MIN_ORT:
            needs[f"{op} ({domain})"] = OP_MIN_ORT[key]
    minimum = _max_version(list(needs.values()))
    why = sorted((k for k, v in needs.items() if v == minimum))
    openvino = openvino_support(ops)
    return {
        "min_onnxruntime": minimum,
        "min_onnxruntime_because": why,
        "opsets": opsets,
        "contrib_ops": contrib,
        "op_types": sorted({op for (_, op) in ops}),
        # the runtimes measured to load and compute this op set right (docs/artifacts.md)
        "runs_right_on": [
            f"onnxruntime >= {minimum}",
            *([f"openvino {OPENVINO_MEASURED} (measured)"] if openvino["loads"] else []),
        ],
        "openvino": openvino,
    }


def artifact_requirements(
    model: onnx.ModelProto | ir.Model, quantization: dict[str, Any] | None, verified: bool
) -> dict[str, Any]:
    """:func:`graph_requirements` plus the int8 recipe and the kernels it was checked on.

    ``accurate_on`` is what the recipe guarantees by its arithmetic
    (:mod:`albert_edge.onnx.quant.recipes`); ``verified_on`` is where this artifact was actually
    run against PyTorch: this machine's kernel family when ``convert`` verified it here.
    """
    from albert_edge.errors import UnsupportedError
    from albert_edge.kernels import host_kernel

    req = graph_requirements(model)
    q = quantization or {}
    req["int8_target"] = q.get("target")
    req["accurate_on"] = list(q["accurate_on"]) if q.get("accurate_on") else None
    try:
        here = [host_kernel()] if verified else []
    except UnsupportedError:  # a CPU below AVX2: verified, but on no named family
        here = []
    req["verified_on"] = here
    return req


class RuntimeTooOldError(AlbertEdgeError):
    """The installed onnxruntime is older than the artifact's ops need."""


def check_runtime_version(
    path: object, requirements: dict[str, Any] | None, installed: str
) -> None:
    """Raise :class:`RuntimeTooOldError` (one line) if ``installed`` is below the
    artifact's ``min_onnxruntime``; no requirements recorded → nothing to check."""
    if not requirements or not requirements.get("min_onnxruntime"):
        return
    need = str(requirements["min_onnxruntime"])
    if parse_version(installed) >= parse_version(need):
        return
    because = ", ".join(requirements.get("min_onnxruntime_because") or []) or "its ops"
    raise RuntimeTooOldError(
        f"{path}: needs onnxruntime >= {need} ({because}), but {installed} is installed; "
        f'run pip install "onnxruntime>={need}"'
    )
