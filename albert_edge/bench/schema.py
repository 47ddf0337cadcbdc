"""The one JSON schema every benchmark result is written in (``albert-edge-bench/1``).

The CLI, :func:`albert_edge.bench.bench`, ``benchmarks/peers.py`` and the Android demo
all write this shape, so one Markdown/plot renderer and one validator serve them all.
``benchmarks/README.md`` documents every field; :func:`validate_report` is the
executable form of that documentation (the tests run it on real runs).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
from collections.abc import Mapping
from importlib import metadata
from typing import Any

SCHEMA_ID = "albert-edge-bench/1"
STATUSES = ("ok", "skipped", "failed")

# Keys every result carries (value None where the status or backend has no such number).
RESULT_KEYS: dict[str, tuple[type, ...]] = {
    "artifact": (str,),
    "format": (str,),
    "precision": (str,),
    "backend": (str,),
    "device": (str,),
    "batch": (int,),
    "seq_len": (int,),
    "threads": (int,),
    "file_bytes": (int, type(None)),
    "floor_bytes": (int, type(None)),
    "ratio_to_floor": (float, type(None)),
    "load_ms": (float, type(None)),
    "first_inference_ms": (float, type(None)),
    "latency_ms": (dict, type(None)),
    "throughput_seq_per_s": (float, type(None)),
    "peak_rss_bytes": (int, type(None)),
    "gops": (float, type(None)),
    "roofline_fraction": (float, type(None)),
    "status": (str,),
    "reason": (str, type(None)),
}
LATENCY_KEYS = ("p50", "p90", "p99", "mean", "std", "runs")
MEASURED_WHEN_OK = ("load_ms", "first_inference_ms", "latency_ms", "throughput_seq_per_s")

_VERSIONED = (
    "albert-edge",
    "torch",
    "onnxruntime",
    "onnxruntime-gpu",
    "ai-edge-litert",
    "transformers",
    "numpy",
    "onnx",
    "executorch",
)


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# The flags that decide which int8/fp32 kernels ONNX Runtime, XNNPACK and LiteRT pick.
KERNEL_FLAGS: tuple[str, ...] = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni")
KERNEL_FLAGS += ("amx_int8", "asimddp", "i8mm", "sve", "bf16")


def cpu_kernel() -> tuple[str | None, list[str]]:
    """(kernel family as ``albert-edge kernels`` names it, the deciding CPU flags).

    Why in every report: the same int8 file runs different kernels on AVX2, VNNI and
    ARM64 (AVX2's u8s8 path saturates), so a figure without the family is not a result.
    Under qemu-user /proc/cpuinfo is the host's: the emulation launchers set
    ``ALBERT_EDGE_EMULATED_KERNEL`` and that family is reported, marked emulated.
    """
    from albert_edge.errors import AlbertEdgeError
    from albert_edge.kernels import host_cpu_flags, host_kernel

    emulated = os.environ.get("ALBERT_EDGE_EMULATED_KERNEL")
    if emulated:
        return f"{emulated} (emulated)", []
    try:
        family: str | None = host_kernel()
    except AlbertEdgeError:
        family = None
    flags = host_cpu_flags()
    return family, [f for f in KERNEL_FLAGS if f in flags]


def machine_info() -> dict[str, Any]:
    """What ran the benchmark: CPU, its kernel family and flags, cores, memory, OS,
    Python and the runtimes' versions."""
    import psutil

    kernel, flags = cpu_kernel()

    versions = {name: _version(name) for name in _VERSIONED}
    return {
        "cpu": _cpu_model(),
        "arch": platform.machine(),
        "kernel": kernel,
        "cpu_flags": flags,
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "ram_bytes": int(psutil.virtual_memory().total),
        "os": platform.platform(),
        "python": platform.python_version(),
        "versions": {k: v for k, v in versions.items() if v is not None},
        "gpu": None,
    }


def empty_result(**fields: Any) -> dict[str, Any]:
    """A result with every schema key present (None where unmeasured), then ``fields``."""
    result: dict[str, Any] = dict.fromkeys(RESULT_KEYS)
    result.update(status="skipped", reason=None)
    result.update(fields)
    return result


def new_report(
    results: list[dict[str, Any]],
    *,
    roofline: Mapping[str, Any] | None = None,
    machine: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "schema": SCHEMA_ID,
        "created": now_iso(),
        "machine": dict(machine) if machine is not None else machine_info(),
        "settings": dict(settings or {}),
        "roofline": dict(roofline or {}),
        "results": results,
    }


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def validate_result(r: Mapping[str, Any]) -> list[str]:
    """Problems with one result (empty when it follows the schema)."""
    where = f"{r.get('artifact')}/{r.get('backend')}/b{r.get('batch')}/s{r.get('seq_len')}"
    problems = []
    for key, types in RESULT_KEYS.items():
        if key not in r:
            problems.append(f"{where}: missing {key!r}")
            continue
        value = r[key]
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            continue
        if not isinstance(value, types) or isinstance(value, bool):
            problems.append(
                f"{where}: {key}={value!r} is not {'/'.join(t.__name__ for t in types)}"
            )
    status = r.get("status")
    if status not in STATUSES:
        problems.append(f"{where}: status={status!r} not in {STATUSES}")
    if status in ("skipped", "failed") and not r.get("reason"):
        problems.append(f"{where}: a {status} result must say why (reason)")
    if status == "ok":
        for key in MEASURED_WHEN_OK:
            if r.get(key) is None:
                problems.append(f"{where}: status ok but {key} was not measured")
        lat = r.get("latency_ms")
        if isinstance(lat, Mapping):
            for key in LATENCY_KEYS:
                if key not in lat:
                    problems.append(f"{where}: latency_ms lacks {key!r}")
            runs = lat.get("runs")
            if not isinstance(runs, int) or runs < 1:
                problems.append(f"{where}: latency_ms.runs={runs!r} must be a positive int")
            for key in ("p50", "p90", "p99", "mean", "std"):
                v = lat.get(key)
                if v is not None and (not _is_number(v) or v < 0):
                    problems.append(f"{where}: latency_ms.{key}={v!r} must be >= 0")
    for key in ("file_bytes", "floor_bytes", "peak_rss_bytes"):
        v = r.get(key)
        if v is not None and _is_number(v) and v <= 0:
            problems.append(f"{where}: {key}={v} must be positive")
    return problems


def validate_report(report: Mapping[str, Any]) -> list[str]:
    """Problems with a whole report (empty when it follows ``albert-edge-bench/1``)."""
    problems = []
    if report.get("schema") != SCHEMA_ID:
        problems.append(f"schema={report.get('schema')!r}, expected {SCHEMA_ID!r}")
    for key, typ in (("created", str), ("machine", dict), ("roofline", dict), ("results", list)):
        if not isinstance(report.get(key), typ):
            problems.append(f"{key!r} missing or not a {typ.__name__}")
    machine = report.get("machine")
    if isinstance(machine, Mapping):
        for key in ("cpu", "os", "python", "versions"):
            if key not in machine:
                problems.append(f"machine lacks {key!r}")
    for r in report.get("results") or []:
        if not isinstance(r, Mapping):
            problems.append(f"result {r!r} is not an object")
            continue
        problems.extend(validate_result(r))
    return problems
