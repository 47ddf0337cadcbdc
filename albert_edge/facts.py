"""Every fact about an artifact, computed in one place.

Why one module: ``convert`` (the manifest), ``inspect``, ``verify`` and ``bench`` used to
compute sizes, the floor, quantized-MatMul counts and the precision each their own way,
and reported different answers for the same file (a manifest saying 0/19 MatMuls
quantized at its top level and 19/19 inside; ``bench`` at 1.12x the floor where
``convert`` said 1.010x). Every one of them now calls :func:`onnx_facts`,
:func:`tflite_facts` or :func:`artifact_facts`, so they cannot disagree.

Definitions (the keys of :data:`FACT_KEYS`):

* ``file_bytes`` — what a user ships: the model file plus the ONNX external-data files
  it references;
* ``unique_tensor_bytes`` / ``duplicate_tensor_bytes`` — stored constant tensors, each
  distinct content counted once / the bytes of repeats (format-specific readers:
  :func:`albert_edge.onnx.inspect.tensor_accounting`, :func:`albert_edge.tflite.inspect.analyze_model`);
* ``unique_params`` — parameters the artifact stores (its own count, for reference);
* ``checkpoint_params`` — the unique parameters of the *checkpoint* the artifact came from
  (:func:`param_count` of its config and head; tied weights once);
* ``floor_bytes`` — ``checkpoint_params`` × the bytes per parameter of ``floor_precision``
  (the precision that was asked for). It never looks at the artifact's dtypes: an
  artifact that kept a tensor wider than asked reads above 1x, which is the point. It
  counts no quantization scales, in either format: every width has an encoding with one
  scale per tensor (a few bytes), so per-channel, per-block or per-row scales are an
  encoder's choice of accuracy over bytes, not bytes the precision requires — a floor
  counting them would let a format's choice of scales raise its own bar. (ONNX int4
  tables fit the bar by storing 4-bit row scales; a TFLite table whose schema stores a
  float16 scale per block offers ``int4-tensor`` as a plan candidate, so a search can
  take the floor's form where accuracy allows);
* ``ratio_to_floor`` — ``file_bytes / floor_bytes``, where a ``.tflite``'s bytes leave out
  the associated files its LiteRT metadata packs in the file's zip tail (``spiece.model``,
  ``labels.txt``; reported as ``associated_files_bytes``): they are the tokenizer files an
  ONNX artifact ships beside the model, not weights, so the ratio keeps measuring how the
  weights are stored (``file_bytes`` stays the whole file, what a user ships);
* ``matmuls_total`` / ``matmuls_quantized`` / ``matmuls_fp16`` — ops multiplying by a
  constant weight / those reading it as an integer tensor / those reading it as fp16
  (activation x activation products, QK^T and softmax·V, are not weight products; a TFLite
  file counts every signature's subgraph). ONNX: :func:`albert_edge.onnx.inspect.matmul_counts`,
  the one count; the manifest's ``quantization`` block reports the same numbers;
* ``precision`` — what the graph computes with, read off its ops and dtypes (the requested
  precision is ``floor_precision``);
* ``factorized_embedding_intact`` — the V×E table and E×H projection stored apart, no V×H.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError, UnsupportedError
from albert_edge.manifest import MATMUL_KEYS, SIZE_KEYS  # defined once, where manifests are built
from albert_edge.torch_model import head_size, kept_heads, pruned_heads_of

# The keys every reader reports identically for one artifact.
FACT_KEYS = (*SIZE_KEYS, *MATMUL_KEYS, "precision", "factorized_embedding_intact")

# Heads whose AlbertModel keeps the pooler (transformers' add_pooling_layer=True).
POOLED_HEADS = frozenset({"base", "sequence-classification", "multiple-choice", "pretraining"})

# Bytes per stored weight at each precision's nominal width (the size floor's unit).
PRECISION_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "fp16": 2.0,
    "int8-dynamic": 1.0,
    "int8-static": 1.0,
    "int8-full": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "int4-tensor": 0.5,  # a plan unit's int4 with one scale per tensor (TFLite tables)
}


# Issue 17's bars on size ÷ floor at default flags.
SIZE_BARS: dict[str, float] = {
    "fp32": 1.02,
    "fp16": 1.02,
    "int8-dynamic": 1.05,
    "int8-static": 1.05,
    "int8-full": 1.05,
    "int4": 1.05,
    "plan": 1.05,  # a precision plan: each unit at its own width (plan_floor_bytes)
}


def tflite_size_note(
    facts: Mapping[str, Any], accounting: Mapping[str, Any], signatures: int
) -> str | None:
    """Where a TFLite file's bytes over its size bar go, in one line (None when within).

    ``accounting`` is :func:`albert_edge.tflite.inspect.byte_accounting` of the file. The
    parts named are the ones no pass can remove: the graph tables every signature repeats
    (ops, tensors, names: one subgraph per ``--seq-lens`` bucket), the quantization tables
    (the schema stores a float32 scale and an int64 zero point per channel; int8-full
    biases are int32 at input × weight scale, as TFLite's integer kernels require), and
    float constants the precision leaves wide by design.
    """
    ratio, floor = facts.get("ratio_to_floor"), facts.get("floor_bytes")
    bar = SIZE_BARS.get(str(facts.get("floor_precision")))
    if ratio is None or not floor or bar is None or ratio <= bar:
        return None
    excess = int(facts["file_bytes"]) - int(floor)
    graph = int(accounting["graph_bytes"])
    quant = int(accounting["quantization_table_bytes"])
    wide = int(accounting["kept_wide_bytes"])
    int32 = int((accounting.get("constant_bytes_by_dtype") or {}).get("int32", 0))
    parts = [
        f"{graph:,} graph tables ({signatures} signature(s), ~{graph // max(1, signatures):,} each)"
    ]
    if quant:
        parts.append(
            f"{quant:,} quantization tables (float32 scale + int64 zero point per channel)"
        )
    if int32:
        parts.append(f"{int32:,} int32 constants (integer biases, shape vectors)")
    if wide:
        parts.append(f"{wide:,} float constants kept wide")
    hint = " fewer --seq-lens buckets remove graph tables;" if signatures > 1 else ""
    return (
        f"size {ratio:.3f}x the floor, above the {bar}x bar by {excess:,} bytes: "
        f"{'; '.join(parts)} —{hint} see benchmarks/results/tflite_bytes.md"
    )


def config_dims(config: Mapping[str, Any]) -> tuple[int, ...]:
    """V, E, H, I, L, G, K, positions, token types (transformers' defaults where absent)."""
    c = config
    return (
        int(c["vocab_size"]),
        int(c.get("embedding_size", 128)),
        int(c["hidden_size"]),
        int(c["intermediate_size"]),
        int(c["num_hidden_layers"]),
        int(c.get("num_hidden_groups", 1)),
        int(c.get("inner_group_num", 1)),
        int(c.get("max_position_embeddings", 512)),
        int(c.get("type_vocab_size", 2)),
    )


def attention_widths(config: Mapping[str, Any]) -> tuple[int, ...]:
    """The Q/K/V width of each distinct shared layer (flat order, group-major): H, or for
    a pruned checkpoint (``pruned_heads``) its kept heads × the head size — the
    out-features of query/key/value and the in-features of the attention output."""
    h = int(config["hidden_size"])
    groups = int(config.get("num_hidden_groups", 1))
    inner = int(config.get("inner_group_num", 1))
    if not pruned_heads_of(config):
        return (h,) * (groups * inner)
    size = head_size(config)
    return tuple(k * size for k in kept_heads(config))


def applied_attention_widths(config: Mapping[str, Any]) -> list[int]:
    """:func:`attention_widths` of every inner-layer application, in the order transformers
    runs them: layer ``l`` of ``L`` runs group ``int(l / (L / G))``, all its K inner layers."""
    _v, _e, _h, _i, layers, groups, inner, *_ = config_dims(config)
    widths = attention_widths(config)
    return [
        widths[int(layer / (layers / groups)) * inner + k]
        for layer in range(layers)
        for k in range(inner)
    ]


def num_labels(config: Mapping[str, Any]) -> int:
    """transformers derives num_labels from id2label; configs written by it carry both."""
    id2label = config.get("id2label")
    if isinstance(id2label, Mapping) and id2label:
        return len(id2label)
    return int(config.get("num_labels", 2))


def param_count(config: Mapping[str, Any], head: str = "base") -> int:
    """Unique parameters of the transformers ALBERT module for ``head`` (tied counted once).

    Analytic, so that a bare artifact with its ``config.json`` gets the same count as the
    checkpoint it came from (``tests/bench/test_flops.py`` holds it to transformers' own
    modules for every head).
    """
    v, e, h, i, _layers, _groups, _inner, pos, types = config_dims(config)
    labels = num_labels(config)
    n = v * e + pos * e + types * e + 2 * e  # embeddings + LayerNorm
    n += e * h + h  # embedding_hidden_mapping_in
    for a in attention_widths(config):  # each distinct shared layer, its own kept heads
        n += 3 * (h * a + a) + (a * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    if head in POOLED_HEADS:
        n += h * h + h
    mlm = 2 * e + v + h * e + e  # LayerNorm, bias (decoder.bias tied to it), dense; decoder tied
    if head in ("sequence-classification", "token-classification", "question-answering"):
        n += h * labels + labels
    elif head == "multiple-choice":
        n += h + 1
    elif head == "masked-lm":
        n += mlm
    elif head == "pretraining":
        n += mlm + h * labels + labels
    return n


def floor_bytes(config: Mapping[str, Any], head: str, precision: str) -> int | None:
    """Every unique checkpoint parameter stored once at ``precision``; None if unknown."""
    width = PRECISION_BYTES.get(precision)
    if width is None:
        return None
    return int(param_count(config, head) * width)


def plan_floor_bytes(
    config: Mapping[str, Any], head: str, units: Sequence[Mapping[str, Any]]
) -> int | None:
    """The floor of a precision plan: each unit's parameters (``params``) at its own
    ``precision``'s width, and the checkpoint's other parameters (biases, LayerNorm, the
    tiny tables no recipe quantizes) at the plan's narrowest width — as the uniform
    floors count every parameter at the one width, so a plan with every unit at int4 has
    int4's floor exactly. No scales, as for every floor (the module's ``floor_bytes``):
    ``int4`` and ``int4-tensor`` are both half a byte a parameter. None if a unit's
    precision has no width."""
    widths = [PRECISION_BYTES.get(str(u.get("precision"))) for u in units]
    if not units or any(w is None for w in widths):
        return None
    known = [float(w) for w in widths if w is not None]
    unit_params = [int(u["params"]) for u in units]
    rest = param_count(config, head) - sum(unit_params)
    return int(
        sum(p * w for p, w in zip(unit_params, known, strict=True)) + max(rest, 0) * min(known)
    )


def floor_fields(
    file_bytes: int,
    config: Mapping[str, Any] | None,
    head: str | None,
    precision: str | None,
    plan: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """checkpoint_params / floor_precision / floor_bytes / ratio_to_floor (None if unknown).

    ``plan``: a precision plan (``plan.json``, the manifest's ``precision_plan``): the floor
    is the plan's (:func:`plan_floor_bytes`) and ``floor_precision`` is "plan"."""
    params = floor = None
    if config and head and all(k in config for k in ("vocab_size", "hidden_size")):
        try:
            params = param_count(config, head)
        except (KeyError, TypeError, ValueError):
            params = None
        if params is not None and plan is not None:
            floor = plan_floor_bytes(config, head, plan.get("units") or [])
            precision = "plan"
        elif params is not None and precision:
            floor = floor_bytes(config, head, precision)
    return {
        "checkpoint_params": params,
        "floor_precision": precision,
        "floor_bytes": floor,
        "ratio_to_floor": round(file_bytes / floor, 4) if floor else None,
    }


# --- what sits beside an artifact --------------------------------------------------------


def _root(path: Path) -> Path:
    """The artifact directory of a model file (the ONNX model lives one level down)."""
    from albert_edge.layout import artifact_root

    return artifact_root(path)


def _json_beside(path: Path | None, name: str) -> dict[str, Any] | None:
    if path is None:
        return None
    f = _root(path) / name
    if not f.is_file():
        f = path.parent / name
    if not f.is_file():
        return None
    try:
        data = json.loads(f.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def manifest_beside(path: Path | None) -> dict[str, Any] | None:
    """The albert-edge manifest describing ``path`` (None if absent or about another file)."""
    m = _json_beside(path, "manifest.json")
    if m is None or path is None:
        return None
    named = m.get("model_file")
    if named is not None and (_root(path) / str(named)).resolve() != path.resolve():
        return None
    return m


def _config(path: Path | None, embedded: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """config.json beside the file (labels, positions) over the embedded metadata."""
    # transformers writes config.json as a diff against its defaults (a vocab_size of
    # 30000 is left out), so the embedded metadata fills what the file omits.
    merged = {**(embedded or {}), **(_json_beside(path, "config.json") or {})}
    return merged if "vocab_size" in merged else None


# --- ONNX --------------------------------------------------------------------------------


def onnx_file_bytes(path: Path, model: Any | None = None) -> int:
    """Size on disk of an ONNX file plus the external-data files it references."""
    import onnx_ir as ir

    from albert_edge.onnx.inspect import model_files_bytes

    return model_files_bytes(path, model if model is not None else ir.load(str(path)))


def onnx_facts(
    model: Any,
    path: Path | None,
    file_bytes: int,
    *,
    precision: str | None = None,
    config: Mapping[str, Any] | None = None,
    head: str | None = None,
    plan: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The facts (:data:`FACT_KEYS`) of an in-memory ``onnx_ir.Model`` written to ``path``.

    ``precision``/``config``/``head`` are what the caller knows (convert knows all three);
    whatever is missing is read from the manifest and config.json beside ``path``, then
    from the model's own metadata and graph.
    """
    from albert_edge.onnx import inspect as oi

    meta = oi.albert_config(model, None) or {}
    manifest = manifest_beside(path) or {}
    detected = oi.infer_precision(model)
    precision = precision or manifest.get("precision") or detected
    plan = plan if plan is not None else manifest.get("precision_plan")
    head = head or manifest.get("head") or meta.get("head")
    config = config or _config(path, meta)
    acc = oi.tensor_accounting(model)
    counts = oi.matmul_counts(model)
    intact, _ = oi.factorization(model, dict(config or meta))
    return {
        "file_bytes": int(file_bytes),
        "unique_tensor_bytes": acc["unique_tensor_bytes"],
        "duplicate_tensor_bytes": acc["duplicate_tensor_bytes"],
        "unique_params": acc["unique_params"],
        **floor_fields(int(file_bytes), config, head, precision, plan),
        **{k: counts[k] for k in MATMUL_KEYS},
        "precision": detected,
        "factorized_embedding_intact": intact,
    }


def describe_onnx(
    model: Any,
    path: Path | None,
    file_bytes: int,
    *,
    precision: str | None = None,
    config: Mapping[str, Any] | None = None,
    head: str | None = None,
    plan: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`albert_edge.onnx.inspect.describe_model` with the facts in place of its own."""
    from albert_edge.onnx.inspect import describe_model

    info = describe_model(model, path, file_bytes)
    info.update(
        onnx_facts(
            model, path, file_bytes, precision=precision, config=config, head=head, plan=plan
        )
    )
    return info


# --- TFLite ------------------------------------------------------------------------------


def tflite_precision(report: Mapping[str, Any]) -> str:
    """fp32 / fp16 / int8-dynamic / int8-full from an :func:`analyze_model` report."""
    ops = report.get("op_counts") or {}
    quantized = sum(int(v["quantized"]) for v in (report.get("matmul_ops") or {}).values())
    if quantized:
        return "int8-full" if "QUANTIZE" in ops else "int8-dynamic"
    if report.get("has_fp16_constants"):
        return "fp16"
    return "fp32"


def integer_op_share(report: Mapping[str, Any]) -> dict[str, Any]:
    """How many of a TFLite graph's compute ops run on integers (what an integer-only
    NPU/DSP delegate takes), from :func:`albert_edge.tflite.inspect.analyze_model`'s
    census: compute ops are every op but QUANTIZE/DEQUANTIZE/CAST and the lookups, and
    a float one is a compute op with a float32 output (``float_compute_ops``)."""
    total = int(report.get("compute_ops") or 0)
    floats = sum(int(v) for v in (report.get("float_compute_ops") or {}).values())
    return {
        "integer_ops": total - floats,
        "compute_ops": total,
        "share": round((total - floats) / total, 4) if total else None,
    }


def tflite_facts(
    report: Mapping[str, Any],
    path: Path | None = None,
    *,
    precision: str | None = None,
    config: Mapping[str, Any] | None = None,
    head: str | None = None,
    plan: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The facts (:data:`FACT_KEYS`) of a TFLite model, from its ``analyze_model`` report
    (``plan``: its precision plan, else the manifest's; the floor is then the plan's)."""
    meta = report.get("albert_edge") or {}
    manifest = manifest_beside(path) or {}
    precision = precision or manifest.get("precision") or meta.get("precision")
    plan = plan if plan is not None else manifest.get("precision_plan")
    detected = tflite_precision(report)
    head = head or manifest.get("head") or meta.get("head")
    config = config or _config(path, meta.get("config"))
    weights = report.get("weight_matmuls") or {"total": 0, "quantized": 0}
    file_bytes = int(report["file_bytes"])
    model_bytes = file_bytes - int(report.get("associated_files_bytes") or 0)
    return {
        "file_bytes": file_bytes,
        "unique_tensor_bytes": report["unique_tensor_bytes"],
        "duplicate_tensor_bytes": report["duplicate_tensor_bytes"],
        "unique_params": report["unique_params"],
        **floor_fields(model_bytes, config, head, precision or detected, plan),
        "matmuls_total": int(weights["total"]),
        "matmuls_quantized": int(weights["quantized"]),
        "matmuls_fp16": 0,  # TFLite fp16 weights feed a DEQUANTIZE: the op computes in float
        "precision": detected,
        "factorized_embedding_intact": report.get("factorized_embedding_intact"),
    }


# --- any artifact ------------------------------------------------------------------------


def artifact_facts(path: str | Path) -> dict[str, Any]:
    """The facts of a model file (``.onnx`` / ``.tflite``) or an artifact directory."""
    p = Path(path)
    if p.is_dir():
        from albert_edge.runtime import model_file

        p = model_file(p)
    if not p.is_file():
        raise AlbertEdgeError(f"{p}: no such model file; pass an .onnx/.tflite file")
    if p.suffix == ".onnx":
        import onnx_ir as ir

        try:
            model = ir.load(str(p))
        except Exception as exc:
            raise AlbertEdgeError(
                f"{p}: not a readable ONNX model ({type(exc).__name__}); re-export it"
            ) from None
        return onnx_facts(model, p, onnx_file_bytes(p, model))
    if p.suffix == ".tflite":
        from albert_edge.tflite.inspect import inspect_tflite

        return tflite_facts(inspect_tflite(p), p)
    raise UnsupportedError(f"{p}: unknown artifact type; expected .onnx or .tflite")


def detect_precision(path: str | Path) -> str:
    """What a bare model file computes with (no manifest needed), read off its graph."""
    return str(artifact_facts(path)["precision"])


def model_file_bytes(path: str | Path) -> int:
    """``file_bytes`` of a model file: for ONNX the external data it references too."""
    p = Path(path)
    if p.suffix == ".onnx":
        try:
            return onnx_file_bytes(p)
        except Exception:  # unparsable: it names no external data; its size is its bytes
            return p.stat().st_size
    return p.stat().st_size
