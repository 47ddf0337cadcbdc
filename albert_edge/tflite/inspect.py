"""``inspect model.tflite``: what the flatbuffer holds, measured from its bytes.

The same artifact keys as the ONNX inspector (``file_bytes``, ``unique_tensor_bytes``,
``duplicate_tensor_bytes``, ``floor_bytes``, ``ratio_to_floor``,
``factorized_embedding_intact``, quantized FULLY_CONNECTED / BATCH_MATMUL counts), plus
the signatures, the builtin op versions the file needs, and whether tflite-runtime 2.14
could load it.

Definitions:
- a *constant tensor* is one whose buffer holds data; ``unique_tensor_bytes`` counts each
  distinct byte content once, ``duplicate_tensor_bytes`` the rest (buffers with equal
  bytes; tensors sharing one buffer are not duplicates, that is how sharing looks);
- ``floor_bytes`` / ``ratio_to_floor`` / ``precision`` and the ``matmuls_*`` counts come
  from :func:`albert_edge.facts.tflite_facts` (the checkpoint's parameters at the
  requested precision, never this file's dtypes), the same function the manifest uses.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from albert_edge.errors import AlbertEdgeError

_ITEMSIZE = {
    "FLOAT32": 4,
    "FLOAT16": 2,
    "INT32": 4,
    "INT64": 8,
    "INT8": 1,
    "UINT8": 1,
    "INT16": 2,
    "BOOL": 1,
    "FLOAT64": 8,
    "INT4": 1,
}
_MATMULS = ("FULLY_CONNECTED", "BATCH_MATMUL")
_INT_TYPES = ("INT8", "UINT8", "INT16", "INT4")


def _tensor_info(t: Any, types: dict[int, str]) -> dict[str, Any]:
    return {
        "shape": [int(d) for d in (t.shape if t.shape is not None else [])],
        "dtype": types.get(t.type, str(t.type)).lower(),
    }


def analyze_model(model: Any, file_bytes: int, *, data: bytes | None = None) -> dict[str, Any]:
    """The inspect report of a parsed model (see module docstring for definitions).

    ``data``: the file's bytes, to report its LiteRT metadata with the associated files
    packed in its zip tail (``litert_metadata``, ``associated_files_bytes``). Its keys
    feed :func:`albert_edge.facts.tflite_facts`: each step below computes some of them,
    the assembly here keeps their names and order."""
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.litert_metadata import metadata_report
    from albert_edge.tflite.op_versions import check_runtime, runs_right_on

    types = fb.tensor_type_names()
    const_ids = fb.constant_buffer_ids(model)
    by_hash, sizes = _constant_contents(model, const_ids)
    first_tensor = _first_tensors(model, const_ids)
    op_versions = _op_versions(model)
    census = _op_census(model, const_ids)
    meta = fb.get_metadata(model) or {}
    offending = check_runtime(op_versions)
    if any(types.get(t.type) == "INT4" for sg in model.subgraphs for t in sg.tensors):
        # 4-bit weights keep the op versions of their int8 forms, so the version table
        # cannot tell; the Task Library 0.4.4's runtime measured refusing them
        offending = [*offending, "INT4 tensors (4-bit weights: ai-edge-litert reads them)"]
    litert = metadata_report(model, data) if data is not None else None
    return {
        "format": "tflite",
        "file_bytes": file_bytes,
        "unique_tensor_bytes": sum(sizes[ids[0]] for ids in by_hash.values()),
        "duplicate_tensor_bytes": sum(sizes[i] for ids in by_hash.values() for i in ids[1:]),
        "duplicate_buffer_groups": sum(1 for ids in by_hash.values() if len(ids) > 1),
        "unique_params": _unique_params(by_hash, sizes, first_tensor, types),
        "has_fp16_constants": any(
            types.get(first_tensor[b].type, "") == "FLOAT16" for b in const_ids
        ),
        "constant_buffers": len(const_ids),
        "buffers": len(model.buffers),
        "subgraphs": len(model.subgraphs),
        "tensors": sum(len(sg.tensors) for sg in model.subgraphs),
        "operators": sum(len(sg.operators) for sg in model.subgraphs),
        "factorized_embedding_intact": _factorized_embedding(
            {tuple(int(d) for d in first_tensor[b].shape) for b in const_ids}, meta
        ),
        "quantized_fully_connected": census["matmul_ops"]["FULLY_CONNECTED"]["quantized"],
        "quantized_batch_matmul": census["matmul_ops"]["BATCH_MATMUL"]["quantized"],
        **census,
        "op_versions": dict(sorted(op_versions.items())),
        "signatures": _signatures(model, types),
        "min_runtime_version": _min_runtime_version(model),
        "tflite_runtime_2_14": {
            "loads_on_tflite_runtime_2_14": not offending,
            "offending_ops": offending,
            "runs_right_on": runs_right_on(offending),
        },
        "loads_on_tflite_runtime_2_14": not offending,
        "albert_edge": meta or None,
        "litert_metadata": litert,
        "associated_files_bytes": litert["associated_files_bytes"] if litert else 0,
    }


def _constant_contents(
    model: Any, const_ids: set[int]
) -> tuple[dict[str, list[int]], dict[int, int]]:
    """Constant buffers grouped by the sha256 of their bytes (ids ascending), and each
    one's size. Why by content: two buffers with equal bytes are a duplicate the converter
    failed to share; tensors pointing at one buffer are sharing and count once."""
    from albert_edge.tflite import flatbuffer as fb

    by_hash: dict[str, list[int]] = {}
    sizes: dict[int, int] = {}
    for bid in sorted(const_ids):
        raw = fb.buffer_bytes(model, bid)
        sizes[bid] = len(raw)
        by_hash.setdefault(hashlib.sha256(raw).hexdigest(), []).append(bid)
    return by_hash, sizes


def _first_tensors(model: Any, const_ids: set[int]) -> dict[int, Any]:
    """The first tensor reading each constant buffer: a buffer has no dtype or shape of
    its own, the tensors using it carry them."""
    first_tensor: dict[int, Any] = {}
    for sg in model.subgraphs:
        for t in sg.tensors:
            if int(t.buffer) in const_ids:
                first_tensor.setdefault(int(t.buffer), t)
    return first_tensor


def _unique_params(
    by_hash: dict[str, list[int]],
    sizes: dict[int, int],
    first_tensor: dict[int, Any],
    types: dict[int, str],
) -> int:
    """Parameters: elements of each distinct constant content, via its first tensor's
    dtype (a shared weight is counted once, like the checkpoint's accounting)."""
    unique_params = 0
    for ids in by_hash.values():
        t = first_tensor[ids[0]]
        unique_params += sizes[ids[0]] // _ITEMSIZE.get(types.get(t.type, ""), 1)
    return unique_params


def _op_versions(model: Any) -> dict[str, int]:
    """The highest version of each builtin (or named custom) op: what a runtime must
    implement to load the file (see :mod:`albert_edge.tflite.op_versions`)."""
    from albert_edge.tflite import flatbuffer as fb

    ops = fb.builtin_names()
    op_versions: dict[str, int] = {}
    for oc in model.operatorCodes or []:
        name = ops.get(fb.opcode_builtin(oc), "CUSTOM")
        if name == "CUSTOM" and oc.customCode:
            name = "CUSTOM:" + oc.customCode.decode()
        op_versions[name] = max(op_versions.get(name, 0), int(oc.version))
    return op_versions


def _op_census(model: Any, const_ids: set[int]) -> dict[str, Any]:
    """Ops counted by kind: ``matmul_ops`` (FULLY_CONNECTED / BATCH_MATMUL, total and
    with an integer operand), ``weight_matmuls`` (a constant operand, possibly through a
    DEQUANTIZE of a constant: the ONNX side's definition, activation × activation
    products left out), ``float_compute_ops`` (ops computing a float32 output, casts and
    lookups aside), ``compute_ops`` (every op but those) and ``op_counts``. Why: they say whether quantization reached the
    products that hold the weights."""
    from albert_edge.tflite import flatbuffer as fb

    types, ops = fb.tensor_type_names(), fb.builtin_names()
    op_counts: Counter[str] = Counter()
    matmul = {k: {"total": 0, "quantized": 0} for k in _MATMULS}
    float_compute: Counter[str] = Counter()
    weight_matmuls = {"total": 0, "quantized": 0}
    compute = 0
    for sg in model.subgraphs:
        weights = _dequantized_constants(model, sg, const_ids)
        for op in sg.operators:
            name = ops.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex]), "CUSTOM")
            op_counts[name] += 1
            in_types = [types.get(sg.tensors[i].type, "") for i in op.inputs if i >= 0]
            if name in matmul:
                matmul[name]["total"] += 1
                if any(t in _INT_TYPES for t in in_types):
                    matmul[name]["quantized"] += 1
                if any(
                    i >= 0 and (int(sg.tensors[i].buffer) in const_ids or i in weights)
                    for i in op.inputs
                ):
                    weight_matmuls["total"] += 1
                    weight_matmuls["quantized"] += int(any(t in _INT_TYPES for t in in_types))
            if name in ("QUANTIZE", "DEQUANTIZE", "CAST", "EMBEDDING_LOOKUP", "GATHER"):
                continue
            compute += 1
            if any(types.get(sg.tensors[i].type, "") == "FLOAT32" for i in op.outputs):
                float_compute[name] += 1
    return {
        "matmul_ops": matmul,
        "weight_matmuls": weight_matmuls,
        "float_compute_ops": dict(sorted(float_compute.items())),
        "compute_ops": compute,
        "op_counts": dict(sorted(op_counts.items())),
    }


def _dequantized_constants(model: Any, sg: Any, const_ids: set[int]) -> set[int]:
    """Tensors of ``sg`` that a DEQUANTIZE computes from a constant: weights stored
    quantized and widened at run time, still weights to the products reading them."""
    from albert_edge.tflite import flatbuffer as fb

    ops = fb.builtin_names()
    return {
        int(op.outputs[0])
        for op in sg.operators
        if ops.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex])) == "DEQUANTIZE"
        and op.inputs is not None
        and len(op.inputs)
        and int(sg.tensors[op.inputs[0]].buffer) in const_ids
    }


def _signatures(model: Any, types: dict[int, str]) -> list[dict[str, Any]]:
    """Each signature's name, sequence length (``input_ids``' last dimension) and its
    inputs and outputs: a fixed-length artifact runs one signature per length bucket.
    Listed shortest first, whatever the subgraph order (the longest is subgraph 0)."""
    signatures = []
    for sd in model.signatureDefs or []:
        sg = model.subgraphs[sd.subgraphIndex]
        ins = [
            {"name": tm.name.decode(), **_tensor_info(sg.tensors[tm.tensorIndex], types)}
            for tm in sd.inputs
        ]
        outs = [
            {"name": tm.name.decode(), **_tensor_info(sg.tensors[tm.tensorIndex], types)}
            for tm in sd.outputs
        ]
        id_input = next((i for i in ins if i["name"] == "input_ids"), None)
        signatures.append(
            {
                "name": sd.signatureKey.decode(),
                "seq_len": id_input["shape"][-1] if id_input else None,
                "inputs": ins,
                "outputs": outs,
            }
        )
    return sorted(signatures, key=lambda s: int(s["seq_len"] or 0))


def _factorized_embedding(shapes: set[tuple[int, ...]], meta: dict[str, Any]) -> bool | None:
    """Whether the factorized embedding survived: the V×E table and the E×H projection
    are separate constants and no V×H tensor exists (a converter that folded them would
    store V×H). Dimensions from our metadata, else from the largest constant; None when
    neither says."""
    cfg = meta.get("config", {})
    V, E, H = cfg.get("vocab_size"), cfg.get("embedding_size"), cfg.get("hidden_size")
    if V is None and shapes:
        big = max(shapes, key=lambda s: int(np.prod(s)) if s else 0)
        V, E = ((*big, None, None))[:2] if len(big) == 2 else (None, None)
    factorized: bool | None = None
    if V and E:
        has_table = (V, E) in shapes
        if H is None or H == E:
            factorized = has_table
        else:
            has_proj = (H, E) in shapes or (E, H) in shapes
            no_vh = not any(int(np.prod(s)) == V * H for s in shapes if s)
            factorized = has_table and has_proj and no_vh
    return factorized


def _min_runtime_version(model: Any) -> str | None:
    """The ``min_runtime_version`` the converter recorded in the file's metadata, if any."""
    from albert_edge.tflite import flatbuffer as fb

    min_runtime = None
    for md in model.metadata or []:
        if (md.name or b"").decode() == "min_runtime_version":
            min_runtime = fb.buffer_bytes(model, md.buffer).rstrip(b"\x00").decode(errors="replace")
    return min_runtime


def inspect_tflite(path: str | Path) -> dict[str, Any]:
    """Parse ``path`` and report it (see module docstring)."""
    from albert_edge.extras import require
    from albert_edge.tflite import flatbuffer as fb

    require("tflite", "inspecting a .tflite file", ("ai_edge_litert",))

    p = Path(path)
    if not p.is_file():
        raise AlbertEdgeError(f"{p}: no such .tflite file")
    data = p.read_bytes()
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise AlbertEdgeError(
            f"{p}: not a TFLite flatbuffer (no TFL3 identifier); pass a .tflite file"
        )
    try:
        model = fb.read_model(data)
    except Exception as exc:
        raise AlbertEdgeError(
            f"{p}: corrupt TFLite flatbuffer ({type(exc).__name__}); re-convert it"
        ) from None
    report = analyze_model(model, len(data), data=data)
    report["path"] = str(p)
    report["delegates"] = delegate_report(model, report)
    return report


def delegate_report(model: Any, report: dict[str, Any]) -> dict[str, Any]:
    """Ops per accelerator, partitions and unsupported ops with reasons (see
    :mod:`albert_edge.tflite.delegates`), and which accelerator the file suits."""
    from albert_edge.tflite.delegates import gpu_coverage, suits

    cov = gpu_coverage(model)
    precision = str((report.get("albert_edge") or {}).get("precision") or "fp32")
    return {"cpu": {"ops": report["operators"]}, "gpu": cov, "suits": suits(cov, precision)}


# --- where the bytes go ------------------------------------------------------------------

# Stored widths a precision's weights are meant to have; a constant of another float width
# is "kept wide" (the accounting names it, a size bar can list it as an allowed exception).
_NOMINAL_TYPES = {
    "fp32": ("FLOAT32",),
    "fp16": ("FLOAT16",),
    "int8-dynamic": _INT_TYPES,
    "int8-full": _INT_TYPES,
}


def byte_accounting(
    model: Any,
    file_bytes: int,
    precision: str | None = None,
    associated_files_bytes: int = 0,
) -> dict[str, Any]:
    """Every byte of a ``.tflite`` file by what holds it: one row per distinct constant
    buffer, the quantization tables, named metadata, the LiteRT metadata's packed files
    (``associated_files_bytes``, the zip tail after the flatbuffer: the tokenizer and
    labels, see :mod:`albert_edge.tflite.litert_metadata`), and the graph (ops, tensors,
    names, signatures, alignment) as the remainder.

    A buffer row: ``bytes`` (its data once, however many tensors share it), ``dtype``,
    ``shape``, ``name`` (the first tensor's), ``tensors`` (how many tensors read it),
    ``readers`` (the ops that consume it), ``elements``, ``kept_wide`` (a float constant of
    more than 1 KiB stored wider than ``precision``'s weights). Quantization tables are
    counted as :func:`albert_edge.tflite.flatbuffer.write_model` writes them: each
    distinct (scale, zero point) table once, float32 scales and int64 zero points.
    """
    from albert_edge.tflite import flatbuffer as fb

    meta_buffers = {int(md.buffer): (md.name or b"").decode() for md in model.metadata or []}
    rows, qtables = _buffer_rows(model, meta_buffers)
    nominal = _NOMINAL_TYPES.get(precision or "", ())
    buffers = []
    for row in sorted(rows.values(), key=lambda r: -int(r["bytes"])):
        row["readers"] = sorted(row["readers"])
        row["kept_wide"] = bool(
            nominal
            and row["dtype"].upper() not in nominal
            and row["dtype"] in ("float32", "float16")
            and row["bytes"] > 1024
        )
        buffers.append(row)
    constant = sum(int(r["bytes"]) for r in buffers)
    quant = sum(qtables.values())
    metadata = {n: len(fb.buffer_bytes(model, b)) for b, n in meta_buffers.items()}
    by_dtype: dict[str, int] = {}
    for r in buffers:
        by_dtype[r["dtype"]] = by_dtype.get(r["dtype"], 0) + int(r["bytes"])
    return {
        "file_bytes": int(file_bytes),
        "constant_bytes": constant,
        "constant_bytes_by_dtype": dict(sorted(by_dtype.items(), key=lambda kv: -kv[1])),
        "kept_wide_bytes": sum(int(r["bytes"]) for r in buffers if r["kept_wide"]),
        "quantization_table_bytes": quant,
        "quantization_tables": len(qtables),
        "metadata_bytes": metadata,
        "associated_files_bytes": int(associated_files_bytes),
        "graph_bytes": int(file_bytes)
        - constant
        - quant
        - sum(metadata.values())
        - int(associated_files_bytes),
        "buffers": buffers,
    }


def _buffer_rows(
    model: Any, meta_buffers: dict[int, str]
) -> tuple[dict[int, dict[str, Any]], dict[tuple[Any, ...], int]]:
    """:func:`byte_accounting`'s constant-buffer rows by buffer id (metadata buffers left
    out; ``readers`` still a set), and the bytes of each distinct quantization table."""
    from albert_edge.tflite import flatbuffer as fb

    types = fb.tensor_type_names()
    ops = fb.builtin_names()
    rows: dict[int, dict[str, Any]] = {}
    qtables: dict[tuple[Any, ...], int] = {}
    for sg in model.subgraphs:
        readers: dict[int, set[str]] = {}
        for op in sg.operators:
            name = ops.get(fb.opcode_builtin(model.operatorCodes[op.opcodeIndex]), "CUSTOM")
            for i in op.inputs if op.inputs is not None else []:
                if int(i) >= 0:
                    readers.setdefault(int(i), set()).add(name)
        for ti, t in enumerate(sg.tensors):
            q = t.quantization
            if q is not None and q.scale is not None and len(q.scale):
                zp = 0 if q.zeroPoint is None else len(q.zeroPoint)
                qtables.setdefault(fb.quant_key(q), 4 * len(q.scale) + 8 * zp)
            raw_len = len(fb.buffer_bytes(model, int(t.buffer))) if t.buffer else 0
            if not raw_len or int(t.buffer) in meta_buffers:
                continue
            row = rows.get(int(t.buffer))
            if row is None:
                dtype = types.get(t.type, str(t.type))
                row = rows[int(t.buffer)] = {
                    "buffer": int(t.buffer),
                    "name": (t.name or b"").decode("utf-8", "replace"),
                    "dtype": dtype.lower(),
                    "shape": [int(d) for d in (t.shape if t.shape is not None else [])],
                    "bytes": raw_len,
                    "elements": raw_len // _ITEMSIZE.get(dtype, 1),
                    "tensors": 0,
                    "readers": set(),
                }
            row["tensors"] += 1
            row["readers"] |= readers.get(ti, set())
    return rows, qtables


def signature_bytes(model: Any) -> dict[str, Any]:
    """What each signature costs in the file: the bytes the flatbuffer would lose without
    its subgraph (ops, tensors, names, quantization tables and the constants only it
    reads; a weight every bucket shares is counted in none of them), measured by writing
    the model without it. ``extra_bytes`` sums every signature but the longest: the price
    of the short buckets over a one-signature file."""
    from albert_edge.tflite import flatbuffer as fb

    subgraphs, sigdefs = model.subgraphs, list(model.signatureDefs or [])
    full = len(fb.write_model(model))
    readers: dict[int, set[int]] = {}
    for si, sg in enumerate(subgraphs):
        for t in sg.tensors:
            readers.setdefault(int(t.buffer), set()).add(si)
    kept = {int(md.buffer) for md in model.metadata or []}
    each: dict[str, int] = {}
    lengths: dict[str, int] = {}
    for sd in sigdefs:
        si = int(sd.subgraphIndex)
        name = sd.signatureKey.decode()
        private = [b for b, s in readers.items() if s == {si} and b and b not in kept]
        saved = [(b, model.buffers[b].data) for b in private]
        index = [(d, int(d.subgraphIndex)) for d in sigdefs]
        try:
            for b in private:
                model.buffers[b].data = None
            model.subgraphs = [sg for i, sg in enumerate(subgraphs) if i != si]
            model.signatureDefs = [d for d in sigdefs if d is not sd]
            for d in model.signatureDefs:
                d.subgraphIndex = int(d.subgraphIndex) - (int(d.subgraphIndex) > si)
            each[name] = full - len(fb.write_model(model))
        finally:
            model.subgraphs, model.signatureDefs = subgraphs, sigdefs
            for d, i in index:
                d.subgraphIndex = i
            for b, data in saved:
                model.buffers[b].data = data
        ids = next((tm for tm in sd.inputs if tm.name.decode() == "input_ids"), None)
        shape = subgraphs[si].tensors[ids.tensorIndex].shape if ids is not None else None
        lengths[name] = int(shape[-1]) if shape is not None and len(shape) else 0
    longest = max(lengths, key=lambda n: lengths[n]) if lengths else None
    return {
        "bytes": each,
        "extra_bytes": sum(v for k, v in each.items() if k != longest),
        "longest": longest,
    }
