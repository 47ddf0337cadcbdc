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

``--checkpoint DIR`` profiles and times a trained checkpoint of the user's instead of
``--models`` (its files built under ``--work``). ``--split-attention`` (profile) also
profiles the ``mha`` form at one thread, whose fp32 MultiHeadAttention and N = 3H QKV
GEMM split QAttention's time into GEMM and attention; the report then sets ORT's time at
1 and 2 threads beside LiteRT's at 1 by kind of work (:data:`CATEGORIES`: int8 GEMM,
attention, LayerNorm and residual, activation quantization, GELU, embedding, other,
dispatch), from the fastest ``FAST_SHARE`` of ORT's profiled runs (the free-core state
of a shared machine). ``--extra NAME=PATH`` (time) times a local experiment file as
variant ``NAME`` (and ``NAME@1``) under ONNX Runtime's defaults; ``--stem`` names the
output files.

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
    nodes: dict[str, list[int]] = collections.defaultdict(lambda: [0] * len(runs))
    op_of: dict[str, str] = {}
    width: dict[str, int] = {}  # each node's first output's last dimension
    kernel_sum = [0] * len(runs)
    for e in trace:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        i = bisect.bisect_right(starts, e["ts"]) - 1
        if i < 0 or e["ts"] > runs[i][1]:
            continue  # a warm-up run
        nodes[e["name"]][i] += int(e["dur"])  # indexed by run: runs can be picked out
        op_of[e["name"]] = e["args"].get("op_name", "?")
        shape = next(iter((e["args"].get("output_type_shape") or [{}])[0].values()), None)
        if shape:
            width[e["name"]] = int(shape[-1])
        kernel_sum[i] += int(e["dur"])
    return {
        "nodes": {n: {"op": op_of[n], "us": d} for n, d in nodes.items()},
        "width": width,
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
    if form not in VARIANTS and form in files:  # an --extra file, ORT's defaults
        return {**spec, "path": str(files[form])}
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


def model_files(
    name: str, work: Path, forms: Sequence[str], checkpoint: Path | None = None
) -> tuple[str, dict[str, Path]]:
    """The files of model ``name`` (:data:`benchmarks.small_model_profile.MODELS`), or of
    the checkpoint directory ``checkpoint`` (a trained model of the user's) when given."""
    if checkpoint is not None:
        label, ckpt = f"{checkpoint.name} (checkpoint {checkpoint})", checkpoint
    else:
        label, ckpt = next(iter(smp.checkpoints(work, [name]).items()))
    stem = checkpoint.name if checkpoint is not None else label
    return label, osp.build(ckpt, work / re.sub(r"\W+", "-", stem).strip("-"), forms)


# --- where the time goes, by kind of work ------------------------------------------------

# The kinds of work both runtimes do, in the order the report lists them. ORT's
# QAttention holds two of them (its int8 QKV GEMM and its fp32 attention): the profile
# phase splits it with the ``mha`` form's MultiHeadAttention (the same attention, fp32,
# on the QKV GEMM's output) when it profiled that form (``--split-attention``).
CATEGORIES = {
    "gemm": "int8 GEMMs (ORT: DynamicQuantizeMatMul with its input's quantization, "
    "QAttention's QKV GEMM; LiteRT: Fully Connected QDU8)",
    "attention": "attention scores, mask and softmax (ORT: QAttention's attention part; "
    "LiteRT: Batch Matrix Multiply fp32, Softmax, the mask's BROADCAST_TO / SELECT_V2)",
    "layernorm": "LayerNorm and residual adds (ORT: LayerNormalization, Sum; LiteRT: Mean, "
    "Squared Difference, Reciprocal Square Root, Subtract, Add, Multiply)",
    "quantize": "standalone activation quantization (ORT: DynamicQuantizeLinear before "
    "QAttention; LiteRT: Convert / Quantize)",
    "gelu": "GELU (ORT: FastGelu; LiteRT: ApproxGELU / GELU)",
    "embedding": "embedding lookup and sum (Gather, Cast, Mul, Add, Slice, "
    "DequantizeLinear; LiteRT: EMBEDDING_LOOKUP, GATHER, CAST)",
    "other": "layout, shape and pooler ops (Transpose, Reshape, Unsqueeze, Shape, Tanh, ...)",
    "dispatch": "run minus its kernels (per-op dispatch, thread-pool hand-offs; LiteRT: "
    "what no op event covers, with XNNPACK's sub-microsecond ops)",
}

_ORT_CATEGORY = {
    "DynamicQuantizeMatMul": "gemm",
    "MatMulInteger": "gemm",
    "MatMulIntegerToFloat": "gemm",
    "MatMul": "gemm",
    "Gemm": "gemm",
    "MatMulNBits": "gemm",
    "QAttention": "gemm",  # split by attention_split when the mha form was profiled
    "Attention": "attention",
    "MultiHeadAttention": "attention",
    "Softmax": "attention",
    "LayerNormalization": "layernorm",
    "SkipLayerNormalization": "layernorm",
    "SkipSimplifiedLayerNormalization": "layernorm",
    "Sum": "layernorm",
    "DynamicQuantizeLinear": "quantize",
    "QuantizeLinear": "quantize",
    "FastGelu": "gelu",
    "Gelu": "gelu",
    "BiasGelu": "gelu",
    "Gather": "embedding",
    "Cast": "embedding",
    "Mul": "embedding",
    "Add": "embedding",
    "Slice": "embedding",
    "DequantizeLinear": "embedding",
}

_LITERT_CATEGORY = (  # (substring of the profiler's op name, category), first match wins
    ("Fully Connected", "gemm"),
    ("Batch Matrix Multiply", "attention"),
    ("BATCH_MATMUL", "attention"),
    ("Softmax", "attention"),
    ("SOFTMAX", "attention"),
    ("BROADCAST_TO", "attention"),
    ("SELECT_V2", "attention"),
    ("GELU", "gelu"),
    ("Convert", "quantize"),
    ("QUANTIZE", "quantize"),
    ("EMBEDDING_LOOKUP", "embedding"),
    ("GATHER", "embedding"),
    ("CAST", "embedding"),
    ("Mean", "layernorm"),
    ("Squared Difference", "layernorm"),
    ("Reciprocal Square Root", "layernorm"),
    ("Subtract", "layernorm"),
    ("Add", "layernorm"),
    ("Multiply", "layernorm"),
)


def category(op: str, runtime: str) -> str:
    """The kind of work (a :data:`CATEGORIES` key) of op type ``op`` of ``runtime``
    (``"ort"``: an ONNX Runtime op type; ``"litert"``: a LiteRT op profiler name).

    In the albert-edge int8 graph every Mul, Add and Cast ORT runs is the embedding's
    (the biases fold into the GEMMs, the residuals are Sum); in litert-torch's every Add and
    Multiply is counted with the LayerNorm and residual work, where most of them are."""
    if runtime == "ort":
        return _ORT_CATEGORY.get(op, "other")
    return next((cat for key, cat in _LITERT_CATEGORY if key in op), "other")


def attention_split(mha_by_op: dict[str, dict[str, Any]]) -> float | None:
    """The attention's share of QAttention, from the ``mha`` form's profile: its fp32
    MultiHeadAttention's time over that plus its QKV GEMM's (the DynamicQuantizeMatMul
    with N = 3H, found as the MatMul count over the default form's: the difference is the
    QKV GEMMs). ``None`` when the profile has no MultiHeadAttention."""
    mha = mha_by_op.get("MultiHeadAttention", {}).get("us")
    qkv = mha_by_op.get("_qkv_us")
    if not mha or qkv is None:
        return None
    return float(mha / (mha + qkv))


def by_category(side: dict[str, Any], runtime: str, split: float | None) -> dict[str, float]:
    """us per run by :data:`CATEGORIES` key, from a profile entry of :func:`profile_phase`
    (``split``: the attention's share of QAttention, moved from ``gemm``)."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    for op, r in side["by_op"].items():
        if op.startswith("_"):
            continue
        cat = category(op, runtime)
        if op == "QAttention" and split is not None:
            out["attention"] += r["us"] * split
            out["gemm"] += r["us"] * (1 - split)
            continue
        out[cat] += r["us"]
    out["dispatch"] = float(side["gap_us_p50"])
    return out


# --- phases --------------------------------------------------------------------------------


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def profile_phase(files: dict[str, Path], a: argparse.Namespace, runs: int) -> dict[str, Any]:
    visits = [("ort", 1), ("ort", 2), ("litert", 1)]
    if "mha" in files:  # --split-attention: QAttention's attention part, unfused
        visits.append(("mha", 1))
    got: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    loads = []
    for r in range(a.rounds):
        loads.append(_load())
        n = len(visits)
        for kind, threads in visits[r % n :] + visits[: r % n]:
            path = files["litert" if kind == "litert" else kind if kind == "mha" else "default"]
            spec = {"mode": "profile", "kind": "litert" if kind == "litert" else "ort"}
            spec.update(path=str(path), threads=threads)
            spec.update(runs=runs, warmup=3, label=f"{kind}@{threads}")
            log(f"round {r + 1}: profile {kind} @{threads}")
            got[f"{kind}@{threads}"].append(run_worker(spec))
    out: dict[str, Any] = {"load_before_round": loads, "after": _load()}
    for key in ("ort@1", "ort@2", "mha@1"):
        t = int(key[-1])
        visits_ = got[key]
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
        fast = fast_runs(run_us, FAST_SHARE)
        fast_by_op: dict[str, float] = collections.defaultdict(float)
        for n, durs in per_node.items():
            if len(durs) == len(run_us):  # ran in every run: aligned with run_us
                fast_by_op[op_of[n]] += med(durs[i] for i in fast)
        ksum = [x for v in visits_ for x in v["kernel_sum_us"]]
        gaps = [
            r - k for v in visits_ for r, k in zip(v["run_us"], v["kernel_sum_us"], strict=True)
        ]
        out[key] = {
            "by_op": {op: {"us": round(us, 1), "nodes": count[op]} for op, us in by_op.items()},
            "run_us_p50": med(run_us),
            "run_us_min": min(run_us),
            "kernel_sum_us_p50": med(ksum),
            "gap_us_p50": med(gaps),
            "runs": len(run_us),
            "fast": {
                "share": FAST_SHARE,
                "runs": len(fast),
                "by_op": {op: {"us": round(us, 1)} for op, us in fast_by_op.items()},
                "run_us_p50": med(run_us[i] for i in fast),
                "gap_us_p50": med(gaps[i] for i in fast),
            },
        }
        if key == "mha@1":  # its QKV GEMMs: the DynamicQuantizeMatMul nodes beyond ORT's
            width = {n: w for v in visits_ for n, w in v.get("width", {}).items()}
            hidden = collections.Counter(
                width[n] for n in per_node if op_of[n] == "LayerNormalization" and n in width
            ).most_common(1)
            qkv = [
                n
                for n in per_node
                if op_of[n] == "DynamicQuantizeMatMul"
                and hidden
                and width.get(n) == 3 * hidden[0][0]
            ]
            out[key]["by_op"]["_qkv_us"] = round(sum(med(per_node[n]) for n in qkv), 1)
            out[key]["qkv_nodes"] = len(qkv)
        if not got[f"litert@{t}"] or key == "mha@1":
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


# The share of an ORT profile's runs, fastest first, that its "fast" figures come from:
# on a shared machine the second core is free in some runs only, and those are the runs
# that show what the kernels cost when both cores are ONNX Runtime's.
FAST_SHARE = 0.1


def fast_runs(run_us: Sequence[float], share: float) -> list[int]:
    """Indices of the fastest ``share`` of ``run_us`` (at least one run)."""
    n = max(1, round(len(run_us) * share))
    return sorted(sorted(range(len(run_us)), key=lambda i: run_us[i])[:n])


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
            "what": VARIANTS.get(k.split("@")[0], f"--extra {files.get(k.split('@')[0])}")
            + ("" if "@" not in k else f" @{k.split('@')[1]}"),
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
    lines += category_lines(p)
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


def category_lines(p: dict[str, Any]) -> list[str]:
    """ORT at 1 and 2 threads beside LiteRT at 1, by kind of work (:data:`CATEGORIES`)."""
    lit = p.get("litert@1")
    if not lit:
        return []
    mha = p.get("mha@1")
    split = attention_split(mha["by_op"]) if mha else None
    one, two = by_category(p["ort@1"], "ort", split), by_category(p["ort@2"], "ort", split)
    lr = by_category(lit, "litert", None)
    r1, r2, rl = p["ort@1"]["run_us_p50"], p["ort@2"]["run_us_p50"], lit["run_us_p50"]
    f1, f2 = p["ort@1"].get("fast"), p["ort@2"].get("fast")
    if f1 and f2:  # the fastest runs' figures: the free-core state on a shared machine
        one, two = by_category(f1, "ort", split), by_category(f2, "ort", split)
        r1, r2 = f1["run_us_p50"], f2["run_us_p50"]
    how = (
        f"QAttention split by the mha form's profile at 1 thread: attention "
        f"{split:.0%} of it, applied at both thread counts"
        if split is not None
        else "QAttention counted whole as GEMM (no --split-attention)"
    )
    runs = (
        f"ORT: the fastest {f1['share']:.0%} of its profiled runs at each thread count "
        f"({f1['runs']} and {f2['runs']} runs), medians per node over those"
        if f1 and f2
        else "ORT: medians per node over all runs"
    )
    lines = [
        f"**By kind of work, us per run** ({runs}; {how}; ORT's whole run and LiteRT's "
        "Invoke at the foot; the LiteRT column is one thread, its op profile cannot run "
        "two, medians over all its runs)",
        "",
        "| kind | ORT @1 | LiteRT @1 | ORT − LiteRT @1 | ORT @2 | ORT 1t / 2t | share of ORT @2 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for cat in CATEGORIES:
        u1, u2, ul = one[cat], two[cat], lr[cat]
        lines.append(
            f"| {cat} | {u1:.0f} | {ul:.0f} | {u1 - ul:+.0f} | {u2:.0f} | "
            f"{_f(u1 / u2 if u2 > 0 else None)} | {u2 / r2:.1%} |"
        )
    lines += [
        f"| **whole run (p50)** | {r1:.0f} | {rl:.0f} | {r1 - rl:+.0f} | {r2:.0f} | "
        f"{r1 / r2:.2f} | |",
        "",
        "Kinds: " + "; ".join(f"**{k}**: {v}" for k, v in CATEGORIES.items()) + ".",
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


def _flags(s: dict[str, Any]) -> str:
    """The report's non-default flags that name what was run (checkpoint, extras)."""
    out = f" --checkpoint {s['checkpoint']}" if s.get("checkpoint") else ""
    out += "".join(f" --extra {e}" for e in s.get("extra") or [])
    out += " --split-attention" if s.get("split_attention") else ""
    if s.get("checkpoint") or s.get("extra"):
        out += f" --variants {s['variants']}" if s["phase"] == "time" else ""
    return out


def markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    m = s["machine"]
    lines = [
        f"# ONNX Runtime thread scaling ({s['phase']})",
        "",
        f"`python -m benchmarks.onnx_scaling --phase {s['phase']}{_flags(s)}` (batch 1, "
        "128 tokens; "
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
    p.add_argument("--stem", default="onnx_scaling", help="output file stem")
    p.add_argument("--render", action="store_true")
    p.add_argument(
        "--checkpoint",
        type=Path,
        help="a trained checkpoint directory to profile and time instead of --models",
    )
    p.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="time phase: an ONNX file (a local experiment) timed as variant NAME "
        "(and NAME@1 in --variants) under ONNX Runtime's defaults",
    )
    p.add_argument(
        "--split-attention",
        action="store_true",
        help="profile phase: also profile the mha form at 1 thread, to split QAttention's "
        "time into its QKV GEMM and its attention",
    )
    a = p.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(json.loads(a.worker))))
        return 0
    stem = f"{a.stem}_{a.phase}" + (f"-{a.name}" if a.name else "")
    path = a.out / f"{stem}.json"
    if a.render:
        path.with_suffix(".md").write_text(markdown(json.loads(path.read_text())))
        return 0
    import onnxruntime

    extra = dict(e.split("=", 1) for e in a.extra if "=" in e)
    if len(extra) != len(a.extra) or any(k in VARIANTS for k in extra):
        p.error("--extra takes NAME=PATH, NAME not one of the built-in variants")
    missing = [v for v in extra.values() if not Path(v).is_file()]
    if missing:
        p.error(f"--extra {missing[0]}: no such file")
    keys = [k for k in a.variants.split(",") if k]
    bad = [k for k in keys if k.split("@")[0] not in {**VARIANTS, **extra}]
    if bad:
        p.error(f"unknown --variants entry {bad[0]!r}")
    if a.checkpoint is not None and not (a.checkpoint / "config.json").is_file():
        p.error(f"--checkpoint {a.checkpoint}: no config.json there; pass a checkpoint directory")
    forms = ["litert", "default"] + (["mha"] if any(k.startswith("mha") for k in keys) else [])
    profile_forms = ["litert", "default"] + (["mha"] if a.split_attention else [])
    settings = {
        **{k: v for k, v in vars(a).items() if k not in ("work", "out", "worker", "checkpoint")},
        "checkpoint": None if a.checkpoint is None else str(a.checkpoint),
        "machine": smp.machine(),
        "onnxruntime": onnxruntime.__version__,
    }
    report: dict[str, Any] = {"settings": settings, "models": []}
    names = [n for n in a.models.split(",") if n] if a.checkpoint is None else ["checkpoint"]
    for name in names:
        label, files = model_files(
            name, a.work, forms if a.phase == "time" else profile_forms, a.checkpoint
        )
        files.update({k: Path(v) for k, v in extra.items()})
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
