#!/usr/bin/env python
"""Where ONNX Runtime's second thread goes: per-op scaling from one to two threads, beside
LiteRT's, and ORT forms and session settings timed against the default int8 file.

Why: at batch 1, 128 tokens, albert-base's shape runs at 1.06-1.08x litert-torch at one
thread but 1.30-1.32x at two (docs/onnx-speed.md): litert-torch gains 1.55x from its
second thread, ONNX Runtime 1.28x. This script measures which ops lose it, and whether
a graph form or a session setting recovers it.

Two phases, per model (``--models``, :data:`benchmarks.small_model_profile.MODELS`; the
files are :mod:`benchmarks.onnx_speed`'s, built once under its ``--work``):

- ``profile``: ORT's profiler on the default int8 file and LiteRT's op profiler
  (:mod:`benchmarks.litert_op_profile`) on litert-torch's, at 1 and at 2 threads, every
  (file, threads) in its own process, ``--rounds`` alternating visits. Per op type: the sum
  over its nodes of each node's median kernel time at 1 and 2 threads and their ratio;
  per run, the session's whole run (ORT's ``model_run`` event; LiteRT's ``Invoke``)
  beside the sum of its kernel times: the remainder is dispatch and the thread pool's
  hand-offs.
- ``time``: the variants of :func:`variants` (litert-torch, the default file under
  ORT's defaults, other forms, session settings), each in its own process per round,
  ``--rounds`` rounds in rotated order; per variant its p50 and min over all runs, and its
  ratio to the default file and to litert-torch taken round by round (visit p50 and
  visit min over the other's in the same round, median over rounds).

Timing runs here through a bare ``onnxruntime.InferenceSession`` / LiteRT ``Interpreter``
(random token ids, all-ones mask) rather than :func:`albert_edge.bench.bench`, because the
variants are session options (optimization level, config entries, pinning) that bench
does not take. The load average is recorded before every round. Run: ``python -m
benchmarks.onnx_scaling --phase profile|time [--models base,h256] [--rounds 4]``;
``--render`` rewrites the .md from the .json. Outputs ``benchmarks/results/
onnx_scaling_{profile,time}[-NAME].{json,md}``.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks import litert_op_profile  # noqa: E402
from benchmarks import onnx_speed as osp  # noqa: E402
from benchmarks import small_model_profile as smp  # noqa: E402

med = statistics.median


def log(msg: str) -> None:
    print(f"onnx_scaling: {msg}", file=sys.stderr, flush=True)


# --- the worker: one file, one setting, in its own process ---------------------------------


def _ort_session(spec: dict[str, Any], profile_prefix: str | None = None) -> Any:
    import onnxruntime as ort

    if spec.get("pin_main") is not None:  # the caller thread (ORT pins only its workers)
        os.sched_setaffinity(0, {int(spec["pin_main"])})
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = spec["threads"]
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = getattr(
        ort.GraphOptimizationLevel, spec.get("opt_level", "ORT_ENABLE_ALL")
    )
    opts.log_severity_level = 3
    for key, value in spec.get("config", {}).items():
        opts.add_session_config_entry(key, value)
    if profile_prefix:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    return ort.InferenceSession(spec["path"], opts, providers=["CPUExecutionProvider"])


def _litert_interp(spec: dict[str, Any]) -> tuple[Any, Any]:
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=spec["path"], num_threads=spec["threads"])
    interp.allocate_tensors()
    ids = np.random.default_rng(0).integers(5, 1000, (1, 128))
    for d in interp.get_input_details():
        name = d["name"]
        value = ids if "input_ids" in name else (np.ones_like(ids) if "mask" in name else 0 * ids)
        interp.set_tensor(d["index"], value.astype(d["dtype"]).reshape(d["shape"]))
    return interp, None


def _time(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["kind"] == "litert":
        interp, _ = _litert_interp(spec)
        step = interp.invoke
    elif spec["kind"] == "litert-capi":  # the op profiler's session, profiler off
        session = litert_op_profile._Session(Path(spec["path"]), spec["threads"], 0)
        litert_op_profile._feed(session, 0)
        step = session.run
    else:
        sess = _ort_session(spec)
        feeds = smp._feeds(sess.get_inputs(), 128)

        def step() -> None:
            sess.run(None, feeds)

    for _ in range(spec["warmup"]):
        step()
    ms = []
    for _ in range(spec["runs"]):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
    return {"ms": ms}


def _ort_profile(spec: dict[str, Any]) -> dict[str, Any]:
    """Per node: its kernel time per run (us) and op type; per run: the ``model_run``
    wall time and the sum of the run's kernel times."""
    tmp = tempfile.mkdtemp()
    sess = _ort_session(spec, str(Path(tmp) / "ort"))
    feeds = smp._feeds(sess.get_inputs(), 128)
    for _ in range(spec["warmup"] + spec["runs"]):
        sess.run(None, feeds)
    trace = json.loads(Path(sess.end_profiling()).read_text())
    shutil.rmtree(tmp, ignore_errors=True)
    runs = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in trace
        if e.get("cat") == "Session" and e.get("name") == "model_run"
    )[spec["warmup"] :]
    starts = [r[0] for r in runs]
    nodes: dict[str, list[int]] = collections.defaultdict(list)
    op_of: dict[str, str] = {}
    kernel_sum = [0] * len(runs)
    for e in trace:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        i = bisect.bisect_right(starts, e["ts"]) - 1
        if i < 0 or e["ts"] > runs[i][1]:
            continue  # a warm-up run
        nodes[e["name"]].append(int(e["dur"]))
        op_of[e["name"]] = e["args"].get("op_name", "?")
        kernel_sum[i] += int(e["dur"])
    return {
        "nodes": {n: {"op": op_of[n], "us": d} for n, d in nodes.items()},
        "run_us": [b - a for a, b in runs],
        "kernel_sum_us": kernel_sum,
    }


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["mode"] == "time":
        return _time(spec)
    if spec["kind"] == "litert":
        return {
            "per_run": litert_op_profile.profile_runs(
                Path(spec["path"]),
                threads=spec["threads"],
                runs=spec["runs"],
                warmup=spec["warmup"],
            )
        }
    return _ort_profile(spec)


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` in a fresh interpreter (one process per file and setting)."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.onnx_scaling", "--worker", json.dumps(spec)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker {spec.get('label')} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- variants ------------------------------------------------------------------------------

VARIANTS = {
    "litert": "litert-torch + ai-edge-quantizer int8",
    "default": "default int8 file, ORT defaults (spinning on)",
    "mha": "QKV one quantized MatMul (N=3H) + fp32 MultiHeadAttention",
    "nospin": "default file, session.intra_op.allow_spinning=0",
    "dbb4": "default file, session.dynamic_block_base=4",
    "extended": "default file, ORT_ENABLE_EXTENDED",
    "basic": "default file, ORT_ENABLE_BASIC",
    "pin": "default file, caller on CPU 0, worker pinned to CPU 1",
    "ftz": "default file, session.set_denormal_as_zero=1",
    "devalloc": "default file, session.use_device_allocator_for_initializers=1",
    "capi": "litert-torch int8 through the LiteRT C API session of litert_op_profile",
    "litert@1": "litert-torch int8, 1 thread",
    "default@1": "default int8 file, 1 thread",
    "mha@1": "mha form, 1 thread",
}
DEFAULT_VARIANTS = "litert,default,mha,nospin,dbb4,extended,pin,ftz,litert@1,default@1,mha@1"


def variant_spec(key: str, files: dict[str, Path]) -> dict[str, Any]:
    form, _, t = key.partition("@")
    threads = int(t) if t else 2
    spec: dict[str, Any] = {"label": key, "threads": threads, "kind": "ort", "config": {}}
    if form in ("litert", "capi"):
        kind = "litert" if form == "litert" else "litert-capi"
        return {**spec, "kind": kind, "path": str(files["litert"])}
    spec["path"] = str(files["mha" if form == "mha" else "default"])
    settings: dict[str, dict[str, Any]] = {
        "nospin": {"config": {"session.intra_op.allow_spinning": "0"}},
        "dbb4": {"config": {"session.dynamic_block_base": "4"}},
        "extended": {"opt_level": "ORT_ENABLE_EXTENDED"},
        "basic": {"opt_level": "ORT_ENABLE_BASIC"},
        "pin": {"config": {"session.intra_op_thread_affinities": "2"}, "pin_main": 0},
        "ftz": {"config": {"session.set_denormal_as_zero": "1"}},
        "devalloc": {"config": {"session.use_device_allocator_for_initializers": "1"}},
    }
    return {**spec, **settings.get(form, {})}


def model_files(name: str, work: Path, forms: Sequence[str]) -> tuple[str, dict[str, Path]]:
    label, ckpt = next(iter(smp.checkpoints(work, [name]).items()))
    return label, osp.build(ckpt, work / re.sub(r"\W+", "-", label).strip("-"), forms)


# --- phases --------------------------------------------------------------------------------


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def profile_phase(files: dict[str, Path], a: argparse.Namespace, runs: int) -> dict[str, Any]:
    visits = [("ort", 1), ("ort", 2), ("litert", 1)]
    got: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    loads = []
    for r in range(a.rounds):
        loads.append(_load())
        for kind, threads in visits[r % 3 :] + visits[: r % 3]:
            path = files["default" if kind == "ort" else "litert"]
            spec = {"mode": "profile", "kind": kind, "path": str(path), "threads": threads}
            spec.update(runs=runs, warmup=3, label=f"{kind}@{threads}")
            log(f"round {r + 1}: profile {kind} @{threads}")
            got[f"{kind}@{threads}"].append(run_worker(spec))
    out: dict[str, Any] = {"load_before_round": loads, "after": _load()}
    for t in (1, 2):
        visits_ = got[f"ort@{t}"]
        if not visits_:
            continue
        per_node: dict[str, list[int]] = collections.defaultdict(list)
        op_of: dict[str, str] = {}
        for v in visits_:
            for n, d in v["nodes"].items():
                per_node[n] += d["us"]
                op_of[n] = d["op"]
        by_op: dict[str, float] = collections.defaultdict(float)
        count: collections.Counter[str] = collections.Counter()
        for n, durs in per_node.items():
            by_op[op_of[n]] += med(durs)
            count[op_of[n]] += 1
        run_us = [x for v in visits_ for x in v["run_us"]]
        ksum = [x for v in visits_ for x in v["kernel_sum_us"]]
        gaps = [
            r - k for v in visits_ for r, k in zip(v["run_us"], v["kernel_sum_us"], strict=True)
        ]
        out[f"ort@{t}"] = {
            "by_op": {op: {"us": round(us, 1), "nodes": count[op]} for op, us in by_op.items()},
            "run_us_p50": med(run_us),
            "run_us_min": min(run_us),
            "kernel_sum_us_p50": med(ksum),
            "gap_us_p50": med(gaps),
            "runs": len(run_us),
        }
        if not got[f"litert@{t}"]:
            continue
        lit = litert_op_profile.summary([x for v in got[f"litert@{t}"] for x in v["per_run"]])
        out[f"litert@{t}"] = {
            "by_op": {r["op"]: {"us": r["us"], "nodes": r["per_inference"]} for r in lit["by_op"]},
            "run_us_p50": lit["invoke_us"],
            "kernel_sum_us_p50": lit["attributed_us"],
            "gap_us_p50": lit["unattributed_us"],
            "runs": lit["runs"],
        }
    return out


def _paired(a: list[float], b: list[float]) -> float | None:
    pairs = [x / y for x, y in zip(a, b, strict=True) if y > 0]
    return float(med(pairs)) if pairs else None


def time_phase(files: dict[str, Path], a: argparse.Namespace, runs: int) -> dict[str, Any]:
    keys = [k for k in a.variants.split(",") if k]
    samples: dict[str, list[list[float]]] = {k: [] for k in keys}
    loads = []
    for r in range(a.rounds):
        loads.append(_load())
        order = keys[r % len(keys) :] + keys[: r % len(keys)]
        for k in order:
            spec = {**variant_spec(k, files), "mode": "time", "runs": runs, "warmup": a.warmup}
            log(f"round {r + 1}/{a.rounds}: {k} (load {os.getloadavg()[0]:.2f})")
            samples[k].append(run_worker(spec)["ms"])
    rows: dict[str, Any] = {}
    for k, visits in samples.items():
        flat = [x for v in visits for x in v]
        rows[k] = {
            "what": VARIANTS[k.split("@")[0]] + ("" if "@" not in k else f" @{k.split('@')[1]}"),
            "p50_ms": med(flat),
            "min_ms": min(flat),
            "visit_p50_ms": [med(v) for v in visits],
            "visit_min_ms": [min(v) for v in visits],
        }
    for k, row in rows.items():
        threads = k.split("@")[1] if "@" in k else ""
        for ref in ("default", "litert"):
            rk = f"{ref}@{threads}" if threads else ref
            if rk in rows:
                for stat in ("p50", "min"):
                    row[f"vs_{ref}_{stat}"] = _paired(
                        row[f"visit_{stat}_ms"], rows[rk][f"visit_{stat}_ms"]
                    )
    return {"load_before_round": loads, "after": _load(), "runs": runs, "rows": rows}


# --- report --------------------------------------------------------------------------------


def _f(v: float | None, digits: int = 2) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def profile_lines(p: dict[str, Any]) -> list[str]:
    lines = [f"Load average before each round {p['load_before_round']}, after {p['after']}.", ""]
    one, two = p["ort@1"], p["ort@2"]
    k1, k2 = one["kernel_sum_us_p50"], two["kernel_sum_us_p50"]
    lines += [
        "**ONNX Runtime, default int8 file** (per op type: sum over nodes of each node's "
        "median kernel time, us)",
        "",
        "| op | nodes | 1 thread | 2 threads | 1t / 2t | share @1 | share @2 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for op in sorted(one["by_op"], key=lambda o: -one["by_op"][o]["us"]):
        u1 = one["by_op"][op]["us"]
        u2 = two["by_op"].get(op, {}).get("us")
        if u1 < 0.002 * k1:
            continue
        lines.append(
            f"| {op} | {one['by_op'][op]['nodes']} | {u1:.0f} | {_f(u2, 0)} | "
            f"{_f(u1 / u2 if u2 else None)} | {u1 / k1:.1%} | "
            f"{_f(u2 / k2 * 100 if u2 else None, 1)}% |"
        )
    lines += [
        f"| **kernels, summed per run (p50)** | | {k1:.0f} | {k2:.0f} | {k1 / k2:.2f} | | |",
        f"| **whole run (p50)** | | {one['run_us_p50']:.0f} | {two['run_us_p50']:.0f} | "
        f"{one['run_us_p50'] / two['run_us_p50']:.2f} | | |",
        f"| **run minus kernels (p50)** | | {one['gap_us_p50']:.0f} | {two['gap_us_p50']:.0f} "
        "| | | |",
        "",
    ]
    lit = p.get("litert@1")
    if lit:
        lines += [
            "**LiteRT, litert-torch int8, 1 thread** (median per op type over runs, us; the "
            "LiteRT C API's thread option does not reach XNNPACK in ai-edge-litert 2.3.0, so "
            "its op profile is single-threaded: the 2-thread figures are timings)",
            "",
            "| op | per run | us | share |",
            "|---|---:|---:|---:|",
        ]
        for op, r in sorted(lit["by_op"].items(), key=lambda kv: -kv[1]["us"]):
            if r["us"] >= 0.002 * lit["run_us_p50"]:
                lines.append(
                    f"| {op} | {r['nodes']} | {r['us']:.0f} | {r['us'] / lit['run_us_p50']:.1%} |"
                )
        lines += [
            f"| **ops, summed** | | {lit['kernel_sum_us_p50']:.0f} | |",
            f"| **Invoke (p50)** | | {lit['run_us_p50']:.0f} | |",
            "",
        ]
    return lines


def time_lines(t: dict[str, Any]) -> list[str]:
    lines = [
        f"{t['runs']} timed runs per visit; load average before each round "
        f"{t['load_before_round']}, after {t['after']}.",
        "",
        "| variant | what | p50 ms | min ms | paired × default (p50 / min) | "
        "rounds ≥5 % faster than default (p50 / min) | paired × litert-torch (p50 / min) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    rows = t["rows"]
    for k, r in rows.items():
        threads = k.split("@")[1] if "@" in k else ""
        ref = rows.get(f"default@{threads}" if threads else "default")
        wins = "—"
        if ref is not None and ref is not r:
            n = len(r["visit_p50_ms"])
            w = [
                sum(
                    x <= 0.95 * y
                    for x, y in zip(r[f"visit_{s}_ms"], ref[f"visit_{s}_ms"], strict=True)
                )
                for s in ("p50", "min")
            ]
            wins = f"{w[0]}/{n} / {w[1]}/{n}"
        lines.append(
            f"| {k} | {r['what']} | {r['p50_ms']:.2f} | {r['min_ms']:.2f} | "
            f"{_f(r.get('vs_default_p50'))} / {_f(r.get('vs_default_min'))} | {wins} | "
            f"{_f(r.get('vs_litert_p50'))} / {_f(r.get('vs_litert_min'))} |"
        )
    return [*lines, ""]


def markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    m = s["machine"]
    lines = [
        f"# ONNX Runtime thread scaling ({s['phase']})",
        "",
        f"`python -m benchmarks.onnx_scaling --phase {s['phase']}` (batch 1, 128 tokens; "
        f"{s['rounds']} rounds, every file and setting in its own process per round). "
        f"{m['cpu']}, {m['cores']} cores, kernel family {m['cpu_flag']}; onnxruntime "
        f"{s.get('onnxruntime', '?')}. Shared machine: only ratios within a table compare. "
        "Module docstring: what each variant is.",
        "",
    ]
    for entry in report["models"]:
        lines += [f"## {entry['model']}", ""]
        if "profile" in entry:
            lines += profile_lines(entry["profile"])
        if "time" in entry:
            lines += time_lines(entry["time"])
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--phase", choices=("profile", "time"), default="time")
    p.add_argument("--models", default="base,h256")
    p.add_argument("--variants", default=DEFAULT_VARIANTS, help=f"of {','.join(VARIANTS)}")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--runs", type=int, default=200, help="runs per visit, small models")
    p.add_argument("--base-runs", type=int, default=30, help="runs per visit, albert-base")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "onnx_speed")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--name", default="", help="output file suffix")
    p.add_argument("--render", action="store_true")
    a = p.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(json.loads(a.worker))))
        return 0
    stem = f"onnx_scaling_{a.phase}" + (f"-{a.name}" if a.name else "")
    path = a.out / f"{stem}.json"
    if a.render:
        path.with_suffix(".md").write_text(markdown(json.loads(path.read_text())))
        return 0
    import onnxruntime

    keys = [k for k in a.variants.split(",") if k]
    bad = [k for k in keys if k.split("@")[0] not in VARIANTS]
    if bad:
        p.error(f"unknown --variants entry {bad[0]!r}")
    forms = ["litert", "default"] + (["mha"] if any(k.startswith("mha") for k in keys) else [])
    settings = {
        **{k: v for k, v in vars(a).items() if k not in ("work", "out", "worker")},
        "machine": smp.machine(),
        "onnxruntime": onnxruntime.__version__,
    }
    report: dict[str, Any] = {"settings": settings, "models": []}
    for name in [n for n in a.models.split(",") if n]:
        label, files = model_files(
            name, a.work, forms if a.phase == "time" else ["litert", "default"]
        )
        runs = a.base_runs if name == "base" else a.runs
        entry: dict[str, Any] = {"model": label}
        if a.phase == "profile":
            entry["profile"] = profile_phase(files, a, runs)
        else:
            entry["time"] = time_phase(files, a, runs)
        report["models"].append(entry)
        a.out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=1) + "\n")
        path.with_suffix(".md").write_text(markdown(report))
        log(f"{label}: done")
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
