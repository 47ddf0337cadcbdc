#!/usr/bin/env python
"""This CPU's GEMM roofline on an ALBERT config's own shapes, at every thread count asked
(issue 17, item 4: "the int8 and fp32 GEMM rate of ORT/MLAS and XNNPACK at 1 and 2
threads, at M = 128 and at short M such as 16-32").

``bench()`` measures the roofline only at the thread count and lengths of its own run;
this script measures it on its own, for a config (default albert-base) at several token
counts M, through every implementation :mod:`albert_edge.bench.roofline` has:
ONNX Runtime (MLAS) ``MatMul`` / ``MatMulInteger``, XNNPACK ``FULLY_CONNECTED`` in fp32 and
dynamic-range int8 through LiteRT, and torch's ``matmul`` / ``_int_mm``. It reports

- the **bound** at each M: the time the config's weight GEMMs (``flops.weight_gemms``)
  take at the best rate measured on each exact shape, int8 and fp32 (the bound a
  ``bench()`` row's ``roofline_fraction`` divides by), and which implementation won;
- every implementation's GOP/s on every shape.

Outputs (``--out``, default ``benchmarks/results``): ``roofline.json`` (an
albert-edge-bench/1 report with no result rows: the measurements are its ``roofline``
section) and ``roofline.md``. Run: ``python -m benchmarks.studies.roofline [--config albert-base]
[--m 16,25,32,128,512] [--threads 1,2]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

from albert_edge.bench.child import run_child  # noqa: E402
from albert_edge.bench.flops import gemm_shapes, weight_gemms  # noqa: E402
from albert_edge.bench.report import machine_line  # noqa: E402
from albert_edge.bench.roofline import bound_ms  # noqa: E402
from albert_edge.bench.schema import machine_info, new_report  # noqa: E402
from albert_edge.configs import COMMON, NAMED_CONFIGS  # noqa: E402
from benchmarks.script_report import render, write  # noqa: E402


def config_of(name: str) -> dict[str, Any]:
    if name not in NAMED_CONFIGS:
        raise SystemExit(f"roofline: unknown --config {name!r}; one of {sorted(NAMED_CONFIGS)}")
    return {**COMMON, **NAMED_CONFIGS[name]}


def _winner(roof: Mapping[str, Any], threads: int, precision: str, shape: Sequence[int]) -> str:
    rows = [
        g
        for g in roof.get("gemms") or []
        if g["device"] == "cpu"
        and int(g["threads"]) == threads
        and g["precision"] == precision
        and (g["m"], g["k"], g["n"]) == tuple(shape)
    ]
    return max(rows, key=lambda g: g["gops"])["impl"] if rows else "—"


def markdown(report: Mapping[str, Any]) -> str:
    s = report["settings"]
    roof = report["roofline"]
    config = s["config"]
    ms, threads = s["m"], s["threads"]
    lines = [
        f"# GEMM roofline on {s['config_name']}'s shapes",
        "",
        f"Machine: {machine_line(report)}. Measured by `benchmarks/studies/roofline.py` in one run; "
        f"{report['created']}; at least {s['min_time_s']} s per shape and implementation, "
        "median of the repetitions.",
        "",
        "**Bound** = the time the model's weight GEMMs (embedding projection, Q/K/V/output, "
        "FFN in/out, each as often as it runs) take at the best rate measured on each exact "
        "(M, K, N): what a `bench()` row's roofline fraction divides by. M = tokens "
        "(batch 1 × sequence length). int8 ÷ fp32 below 1: int8 pays.",
        "",
        "| threads | M | int8 bound ms | fp32 bound ms | int8 ÷ fp32 | int8 best on the FFN-in "
        "shape | fp32 best on the FFN-in shape |",
        "|---|---|---|---|---|---|---|",
    ]
    for th in threads:
        for m in ms:
            gemms = weight_gemms(config, m)
            b8, b32 = (
                bound_ms(roof, gemms, device="cpu", threads=th, precision=p)
                for p in ("int8", "fp32")
            )
            ffn_in = (m, config["hidden_size"], config["intermediate_size"])
            cells = [
                str(th),
                str(m),
                f"{b8:.2f}" if b8 else "—",
                f"{b32:.2f}" if b32 else "—",
                f"{b8 / b32:.2f}" if b8 and b32 else "—",
                _winner(roof, th, "int8", ffn_in),
                _winner(roof, th, "fp32", ffn_in),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    impls = sorted({(g["precision"], g["impl"]) for g in roof.get("gemms") or []})
    lines += [
        "",
        "## GOP/s per implementation and shape",
        "",
        "| threads | M×K×N | " + " | ".join(f"{p}: {i}" for p, i in impls) + " |",
        "|---|---|" + "---|" * len(impls),
    ]
    rate = {
        (int(g["threads"]), g["m"], g["k"], g["n"], g["precision"], g["impl"]): g["gops"]
        for g in roof.get("gemms") or []
        if g["device"] == "cpu"
    }
    shapes = sorted({(g["m"], g["k"], g["n"]) for g in roof.get("gemms") or []})
    for th in threads:
        for m, k, n in shapes:
            vals = [rate.get((th, m, k, n, p, i)) for p, i in impls]
            cells = [str(th), f"{m}×{k}×{n}", *(f"{v:.0f}" if v else "—" for v in vals)]
            lines.append("| " + " | ".join(cells) + " |")
    if roof.get("errors"):
        lines += ["", "Not measured: " + "; ".join(roof["errors"][:10])]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--config", default="albert-base", help="a named ALBERT config")
    p.add_argument("--m", default="16,25,32,128,512", help="token counts (batch·seq)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--min-time", type=float, default=0.2, help="seconds per measurement")
    p.add_argument("--no-xnnpack", action="store_true", help="skip XNNPACK (needs TensorFlow)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--render", action="store_true", help="re-render roofline.md from the JSON")
    a = p.parse_args(argv)
    if a.render:
        return render(a.out, "roofline", markdown)
    config = config_of(a.config)
    ms = [int(x) for x in a.m.split(",")]
    threads = [int(x) for x in a.threads.split(",")]
    gemms = sorted({shape for m in ms for shape in gemm_shapes(config, m)})
    spec = {
        "mode": "roofline",
        "threads": threads,
        "gemms": gemms,
        "min_time_s": a.min_time,
        "cuda": False,
        "xnnpack": not a.no_xnnpack,
    }
    print(
        f"roofline: {len(gemms)} shapes × {len(threads)} thread counts on {a.config}",
        file=sys.stderr,
    )
    with tempfile.TemporaryDirectory(prefix="albert-edge-roofline-") as tmp:
        roof = run_child(spec, Path(tmp), threads=max(threads), timeout_s=3600)
    if roof.get("status") == "failed":
        print(f"roofline: the measuring child failed: {roof.get('reason')}", file=sys.stderr)
        return 1
    roof.pop("shapes", None)
    settings = {
        "config_name": a.config,
        "config": config,
        "m": ms,
        "threads": threads,
        "min_time_s": a.min_time,
    }
    report = new_report([], roofline=roof, machine=machine_info(), settings=settings)
    return write(report, a.out, "roofline", markdown)


if __name__ == "__main__":
    sys.exit(main())
