#!/usr/bin/env python
"""Run the test suite (or part of it) as if on an AVX2-only x86-64 CPU, and record the result.

The suite must pass on AVX2-only x86 as well as on VNNI x86. Where no AVX2-only machine
is at hand, ``qemu-x86_64 -cpu Haswell`` (the qemu that ``albert-edge kernels setup
x86-avx2`` unpacks) runs this very venv's Python with a CPUID that has AVX2 but no
AVX-512/VNNI: ONNX Runtime (MLAS), XNNPACK and PyTorch then pick their AVX2 kernels,
including the saturating u8s8 ``VPMADDUBSW`` path that made int8 inaccurate on AVX2-only
CPUs (under this emulation the old 8-bit recipe reproduces the 17.3 dB measured on a real
AVX2-only EPYC; see ``benchmarks/results/cross_kernel.md``). Emulation is 20-60× slower,
so pick the test files that compute (``tests/onnx``, ``tests/test_verify.py``...).

Limits, stated in the report: tests that start the CLI in a subprocess run that child
natively (qemu-user does not follow ``exec`` of another binary), so only in-process
computation is emulated; timings under emulation mean nothing.

Usage: python tools/suite_on_kernel.py [--name NAME] [-- PYTEST ARGS/PATHS...]
Writes ``benchmarks/results/<name>.json`` and ``.md`` (default name ``suite_x86-avx2``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def _probe(qemu: Path) -> dict[str, str]:
    """What the emulated Python's libraries see: their chosen CPU capability."""
    code = (
        "import json, torch, onnxruntime as ort; "
        "print(json.dumps({'torch_cpu_capability': torch.backends.cpu.get_cpu_capability(), "
        "'onnxruntime': ort.__version__}))"
    )
    proc = subprocess.run(
        [str(qemu), "-cpu", "Haswell", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
    )
    last = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(last[-1]) if last else {"error": proc.stderr.strip()[-300:]}


_VERDICT = re.compile(r"^(\S+\.py)::(\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
_STATUS = {"PASSED": "passed", "XPASS": "passed", "FAILED": "failed", "ERROR": "error"}


def main() -> int:
    from albert_edge.bench.schema import cpu_kernel
    from albert_edge.kernels.setup import require_qemu

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="suite_x86-avx2")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("pytest_args", nargs="*", default=["tests/onnx", "tests/test_verify.py"])
    a = ap.parse_args()

    qemu = require_qemu("x86_64")
    probe = _probe(qemu)
    print(f"emulated x86-avx2 sees: {probe}", flush=True)
    host_kernel, host_flags = cpu_kernel()  # before the child's emulation marker is set
    a.out.mkdir(parents=True, exist_ok=True)
    # -v: one verdict line per test, read as it comes, so the results are written after
    # every test and an interrupted run keeps what it measured.
    cmd = [str(qemu), "-cpu", "Haswell", sys.executable, "-m", "pytest", "-p", "no:xdist"]
    cmd += ["-v", "--no-header", *a.pytest_args]
    result: dict[str, Any] = {
        "command": "python tools/suite_on_kernel.py " + " ".join(sys.argv[1:]),
        "host_cpu": _cpu_name(),
        "host_flags": host_flags,
        "host_kernel": host_kernel,
        "emulated": "qemu-x86_64 -cpu Haswell (AVX2, FMA; no AVX-512, no VNNI)",
        "inside": probe,
        "pytest_args": a.pytest_args,
        "returncode": None,
        "complete": False,
        "wall_s": 0.0,
        "totals": {},
        "per_file": {},
        "failures": [],
    }
    per_file: dict[str, Counter[str]] = defaultdict(Counter)
    t0 = time.time()
    tail: list[str] = []
    env = {**os.environ, "ALBERT_EDGE_EMULATED_KERNEL": "x86-avx2"}  # reports say so
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "TCG doesn't support" in line:
            continue
        tail = [*tail[-14:], line.rstrip()]
        m = _VERDICT.match(line.strip())
        if not m:
            continue
        file, test, verdict = m.groups()
        status = _STATUS.get(verdict, "skipped")
        per_file[file][status] += 1
        if status in ("failed", "error"):
            result["failures"].append(f"{file}::{test}")
        print(f"{verdict:7s} {file}::{test}", flush=True)
        _write(result, per_file, t0, a.out, a.name)
    result["returncode"] = proc.wait()
    result["complete"] = True
    if not per_file:
        result["error"] = "no test verdicts: " + " | ".join(tail)
    print("\n".join(tail))
    _write(result, per_file, t0, a.out, a.name)
    print(markdown(result))
    return 0 if result["returncode"] == 0 else 1


def _write(
    result: dict[str, Any], per_file: dict[str, Counter[str]], t0: float, out: Path, name: str
) -> None:
    totals: Counter[str] = Counter()
    for c in per_file.values():
        totals.update(c)
    result["totals"] = dict(totals)
    result["per_file"] = {k: dict(v) for k, v in sorted(per_file.items())}
    result["wall_s"] = round(time.time() - t0, 1)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{name}.md").write_text(markdown(result))


def markdown(r: dict[str, Any]) -> str:
    t = r.get("totals", {})
    lines = [
        "# The test suite on emulated AVX2-only x86-64",
        "",
        f"Host: {r['host_cpu']} (flags: {', '.join(r['host_flags'])}; host kernel "
        f"{r['host_kernel']}). Emulated: {r['emulated']}; inside, PyTorch picks "
        f"`{r['inside'].get('torch_cpu_capability', '?')}`, onnxruntime "
        f"{r['inside'].get('onnxruntime', '?')}.",
        "",
        f"Command: `{r['command']}` — "
        + (
            f"pytest exit {r['returncode']}, {r['wall_s']} s wall."
            if r.get("complete")
            else f"**interrupted or still running** after {r['wall_s']} s: the counts below "
            "are the tests that had finished."
        ),
        "",
        "Tests that run the CLI in a subprocess run that child natively (qemu-user follows no "
        "`exec`): only in-process computation is emulated. Emulated timings mean nothing.",
        "",
        f"**{t.get('passed', 0)} passed, {t.get('failed', 0)} failed, {t.get('error', 0)} "
        f"errors, {t.get('skipped', 0)} skipped.**",
        "",
        "| file | passed | failed | errors | skipped |",
        "|---|---|---|---|---|",
    ]
    for f, c in r.get("per_file", {}).items():
        lines.append(
            f"| {f} | {c.get('passed', 0)} | {c.get('failed', 0)} | {c.get('error', 0)} | "
            f"{c.get('skipped', 0)} |"
        )
    if r.get("failures"):
        lines += ["", "Failed:", *[f"- `{x}`" for x in r["failures"]]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
