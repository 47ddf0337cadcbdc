"""The ``albert-edge-bench/1`` result rows of one job, from what its child measured.

Sizes (file, floor, ratio) come from :mod:`albert_edge.facts` for an artifact and from
config.json for a checkpoint; latency, throughput, FLOPs and the roofline bound from the
child's timings. A shape the child did not report becomes a ``failed`` row with the
reason; nothing is estimated or filled in: a field that was not measured is ``null``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from albert_edge.bench.flops import floor_bytes, model_flops, weight_gemms
from albert_edge.bench.inputs import choices_of
from albert_edge.bench.plan import Job
from albert_edge.bench.roofline import bound_ms
from albert_edge.bench.schema import empty_result
from albert_edge.bench.targets import Backend, Target
from albert_edge.errors import AlbertEdgeError


def _checkpoint_weights(path: Path) -> Path | None:
    from albert_edge.checkpoint import WEIGHT_FILES

    return next((path / w for w in WEIGHT_FILES if (path / w).is_file()), None)


def _precision(target: Target, backend: Backend) -> str:
    return backend.precision or target.precision or "unknown"


def size_fields(target: Target, backend: Backend, worker: Mapping[str, Any]) -> dict[str, Any]:
    """file_bytes / floor_bytes / ratio_to_floor for one (target, backend)."""
    precision = _precision(target, backend)
    file_bytes: int | None = None
    floor_precision = precision
    if target.format == "checkpoint":
        info = worker.get("info") or {}
        if isinstance(info.get("file_bytes"), int):
            file_bytes = info["file_bytes"]
        else:
            weights = _checkpoint_weights(target.path)
            file_bytes = weights.stat().st_size if weights else None
            floor_precision = "fp32"  # what is on disk, whatever the backend casts to
    elif target.model_file is not None:
        # An artifact: every size fact from albert_edge.facts, as convert/inspect report it.
        # A file that does not parse is reported by the worker ("load failed"), not here.
        from albert_edge.facts import artifact_facts, model_file_bytes

        try:
            facts = target.extra.get("sizes") or artifact_facts(target.model_file)
        except AlbertEdgeError:
            facts = {"file_bytes": model_file_bytes(target.model_file), "floor_bytes": None}
        sized = {k: facts.get(k) for k in ("file_bytes", "floor_bytes", "ratio_to_floor")}
        sized["floor_precision"] = facts.get("floor_precision")
        if target.floor_bytes is not None:
            sized["manifest_floor_bytes"] = target.floor_bytes
        if sized["floor_bytes"] is not None:
            return sized
        file_bytes = sized["file_bytes"]
    # One definition for every row (albert_edge.accounting's): unique parameters x the
    # precision's bytes per parameter, counted from config.json. An artifact manifest's
    # own floor (unique tensor bytes as stored) is kept beside it for reference only, so
    # that peers without a manifest and albert-edge artifacts are measured alike.
    floor: int | None = None
    if target.config:
        floor = floor_bytes(target.config, target.head, floor_precision)
    elif target.floor_bytes is not None and target.format != "checkpoint":
        floor = target.floor_bytes
    ratio = file_bytes / floor if file_bytes and floor else None
    out: dict[str, Any] = {
        "file_bytes": file_bytes,
        "floor_bytes": floor,
        "ratio_to_floor": ratio,
        "floor_precision": floor_precision,
    }
    if target.floor_bytes is not None and target.format != "checkpoint":
        out["manifest_floor_bytes"] = target.floor_bytes
    return out


def _roofline_key(precision: str, device: str) -> str:
    if device == "cuda":
        return "fp16" if precision == "fp16" else "fp32"
    return "int8" if precision.startswith("int") else "fp32"


def _roof_best(roofline: Mapping[str, Any], device: str, threads: int, key: str) -> float | None:
    table = roofline.get(device) or {}
    per = table.get("0" if device == "cuda" else str(threads)) or {}
    best = per.get(key)
    return float(best["gops"]) if best else None


def build_results(
    job: Job, worker: Mapping[str, Any], roofline: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """One row per shape of ``job`` from ``worker`` (its child's report): sizes on every
    row, timings where the child timed the shape, its failure or skip reason where not."""
    t, b = job.target, job.backend
    precision = _precision(t, b)
    sizes = size_fields(t, b, worker)
    by_shape = {(s["batch"], s["seq_len"]): s for s in worker.get("shapes", [])}
    k = choices_of(t)
    out = []
    for batch, seq in job.shapes:
        r = empty_result(
            artifact=t.name,
            format=t.format,
            precision=precision,
            backend=b.name,
            device=b.device,
            batch=batch,
            seq_len=seq,
            threads=job.threads,
        )
        r.update(
            file_bytes=sizes["file_bytes"],
            floor_bytes=sizes["floor_bytes"],
            ratio_to_floor=sizes["ratio_to_floor"],
        )
        r.update(
            tool=t.tool,
            target=str(t.path),
            head=t.head,
            choices=k,
            floor_precision=sizes["floor_precision"],
        )
        if "manifest_floor_bytes" in sizes:
            r["manifest_floor_bytes"] = sizes["manifest_floor_bytes"]
        r.update({key: v for key, v in t.extra.items() if key not in r})
        shape = by_shape.get((batch, seq))
        if worker.get("status") != "ok" or shape is None:
            r.update(
                status=worker.get("status") or "failed",
                reason=worker.get("reason") or "the worker reported nothing for this shape",
            )
            if r["status"] == "ok":
                r["status"] = "failed"
        else:
            _measured(r, job, worker, shape, roofline)
        out.append(r)
    return out


def _measured(
    r: dict[str, Any],
    job: Job,
    worker: Mapping[str, Any],
    shape: Mapping[str, Any],
    roofline: Mapping[str, Any],
) -> None:
    """Fill row ``r`` with what the child reported for its shape: status, load and
    memory, and for a timed shape latency, throughput, FLOPs and the roofline bound."""
    r.update(
        status=shape["status"],
        reason=shape.get("reason"),
        load_ms=worker.get("load_ms"),
        peak_rss_bytes=shape.get("peak_rss_bytes"),
        rss_before_load_bytes=worker.get("rss_before_load_bytes"),
        import_ms=worker.get("import_ms"),
    )
    if worker.get("info"):
        r["runtime_info"] = {k2: v for k2, v in worker["info"].items() if k2 != "file_bytes"}
    if "peak_gpu_bytes" in shape:
        r["peak_gpu_bytes"] = shape["peak_gpu_bytes"]
    if shape["status"] != "ok":
        return
    k = r["choices"]
    lat = shape["latency_ms"]
    p50_s = lat["p50"] / 1e3
    r.update(
        first_inference_ms=shape["first_inference_ms"],
        latency_ms=lat,
        warmup_runs=shape.get("warmup_runs"),
        throughput_seq_per_s=r["batch"] * k / p50_s if p50_s > 0 else None,
    )
    if "samples_ms" in shape:
        r["samples_ms"] = shape["samples_ms"]
    if "effective_seq_len" in shape:  # padded up to a fixed-length signature
        r["effective_seq_len"] = shape["effective_seq_len"]
    if job.target.config:
        effective = shape.get("effective_seq_len", r["seq_len"])
        _roofline_fields(r, job, job.target.config, effective, roofline)


def _roofline_fields(
    r: dict[str, Any],
    job: Job,
    config: Mapping[str, Any],
    effective_seq: int,
    roofline: Mapping[str, Any],
) -> None:
    """FLOPs, GOPS and, where the roofline has a ceiling for the row's precision, the
    best rate and the bound (its fraction of the measured p50) of timed row ``r``."""
    t, b = job.target, job.backend
    batch, seq, k, precision = r["batch"], r["seq_len"], r["choices"], r["precision"]
    p50 = r["latency_ms"]["p50"]
    flops = model_flops(config, t.head, batch, effective_seq, k)
    r["flops"] = flops
    r["gops"] = flops / (p50 / 1e3) / 1e9 if p50 > 0 else None
    key = _roofline_key(precision, b.device)
    best = _roof_best(roofline, b.device, job.threads, key)
    # the bound is the requested length's: tokens a fixed signature pads on
    # are the artifact's waste, not work the machine had to do
    bound = bound_ms(
        roofline,
        weight_gemms(config, batch * seq * k),
        device=b.device,
        threads=job.threads,
        precision=key,
    )
    if precision == "unknown":  # no ceiling to compare with
        best = bound = None
    if best:
        r["roofline_gops"] = best
        r["roofline_precision"] = key
    if bound and p50 > 0:
        r["roofline_bound_ms"] = bound
        r["roofline_fraction"] = bound / p50
