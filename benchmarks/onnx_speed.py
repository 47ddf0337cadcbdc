#!/usr/bin/env python
"""ONNX Runtime at full depth on this CPU class: where the default int8 file loses to
litert-torch, which ORT form and session settings win, side by side.

Models (``--models``, as in :mod:`benchmarks.small_model_profile`): the embedded trained
SST-2 model, a 6-layer 2-group H256 E64 ALBERT and albert-base-v2's shape (the last two
random, seed 0: latency only). Per model, the files compared (``--forms``):

- ``litert``: litert-torch + ai-edge-quantizer ``dynamic_wi8_afp32`` (the peer);
- ``default``: albert-edge's default ONNX int8 (``convert --to onnx --precision
  int8-dynamic``), run as albert-edge runs it: the session settings of
  :data:`albert_edge.onnx.quant.recipes.ORT_SESSION_HINTS` for this CPU class;
- ``spin``: the very same model file, its manifest re-sealed with no hint for this class,
  so ONNX Runtime runs it with its own defaults (intra-op workers spin): the file as a
  client that ignores the hints runs it;
- candidate forms of the same checkpoint, each under the default's session settings:
  ``mha`` (the fused Attention's QKV as a quantized MatMul, attention in fp32
  MultiHeadAttention: the form int8-static and int4-nbits take), ``nbits8`` (every
  MatMul as ``MatMulNBits`` with 8-bit weights, accuracy level 4: int8 compute),
  ``nbits4`` (``--precision int4 --int4-kernel nbits``), ``static`` (int8-static, QDQ
  with calibrated activation scales), ``fp32``.

Measured, all at batch 1:

- ORT per op (``SessionOptions.enable_profiling``, 128 tokens): for each node the median
  of its ``--profile-runs`` kernel times, summed by op type, for ``default`` and
  ``spin``; beside it LiteRT's op profiler on ``litert``
  (:mod:`benchmarks.litert_op_profile`).
- W1 (128 tokens) through :func:`albert_edge.bench.bench`: every file in its own process,
  ``--rounds`` interleaved passes, p50 and min, and each file's ratio to litert-torch
  taken round by round (visit minima, seconds apart) as
  :mod:`benchmarks.small_model_profile` does; at ``--threads`` and, for ``default``,
  ``spin`` and ``litert``, at one thread (where no thread pool is involved: the kernels
  alone).
- W2 (``--w2`` SST-2 dev sentences at their own lengths) for ``default``, ``spin`` and
  ``litert`` (:func:`benchmarks.precisions.w2_latencies`): "today" is ``spin``.

The load average is recorded before and after each model. The machine is shared: only
ratios inside one model's table compare. Run: ``python -m benchmarks.onnx_speed
[--models embedded,h256,base] [--forms ...] [--rounds 6]``; ``--render`` rewrites the
.md from the .json.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks import litert_op_profile, peers, precisions  # noqa: E402
from benchmarks import small_model_profile as smp  # noqa: E402
from benchmarks.script_report import built, portable, reusable, with_files_beside  # noqa: E402

LITERT = smp.LITERT
FORMS = {
    "litert": LITERT,
    "default": "albert-edge onnx int8 (default, runtime hints)",
    "spin": "the same file, ORT session defaults (spinning)",
    "mha": "int8, QKV MatMul + fp32 MultiHeadAttention",
    "nbits8": "MatMulNBits 8-bit, accuracy level 4",
    "nbits4": "int4 --int4-kernel nbits (MatMulNBits 4-bit, acc. 4)",
    "static": "int8-static (QDQ, calibrated activations)",
    "fp32": "albert-edge onnx fp32",
}
ONE_THREAD = ("litert", "default", "spin")
W2_FORMS = ("litert", "default", "spin")


def log(msg: str) -> None:
    print(f"onnx_speed: {msg}", file=sys.stderr, flush=True)


def _convert(ckpt: Path, out: Path, **opts: Any) -> Path:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions
    from albert_edge.runtime import model_file

    if not ((out / "manifest.json").is_file() and reusable(out)):
        convert(ckpt, out, ConvertOptions(target="onnx", overwrite=True, **opts))
        built(out)
    return model_file(out)


def _without_hints(art: Path, out: Path) -> Path:
    """A copy of the artifact ``art`` whose manifest records no session setting for any
    CPU class: the same model bytes, run with ONNX Runtime's defaults."""
    from albert_edge.manifest import read_manifest, write_manifest
    from albert_edge.runtime import model_file

    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(art, out)
    manifest = read_manifest(out)
    quant = dict(manifest.get("quantization") or {})
    quant["runtime_hints"] = {"onnxruntime_session_config": {}, "why": "timing control"}
    manifest["quantization"] = quant
    write_manifest(out, manifest)
    return model_file(out)


def _unfused_fp32(fp32: Path) -> Any:
    """The fp32 graph with each fused Attention as MatMul(x, W_qkv) + MultiHeadAttention."""
    import onnx_ir as ir

    from albert_edge.onnx.quant import rewrite
    from albert_edge.onnx.quant.state import QuantState
    from albert_edge.options import ConvertOptions

    model = ir.load(fp32)
    state = QuantState(ConvertOptions(target="onnx", precision="int8-dynamic"), vocab=None)
    rewrite.UnfuseAttentionPass(state)(model)
    return model


def _mha_int8(fp32: Path, out: Path) -> Path:
    """The default recipe (int8-dynamic, its word table and checks) with the attention
    unfused first: QKV a quantized MatMul, the attention itself fp32 MultiHeadAttention."""
    import dataclasses

    import onnx_ir as ir

    from albert_edge.onnx.passes import run_passes
    from albert_edge.onnx.quant.front import build_passes
    from albert_edge.onnx.quant.recipes import recipe
    from albert_edge.onnx.quant.state import QuantState, quiet
    from albert_edge.options import ConvertOptions

    r = dataclasses.replace(recipe("int8-dynamic"), unfuse_attention=True)
    state = QuantState(ConvertOptions(target="onnx", precision="int8-dynamic"), vocab=None)
    with quiet():
        model, _ = run_passes(ir.load(fp32), build_passes(r, state))
    ir.save(model, out)
    return out


def _nbits8(fp32: Path, out: Path) -> Path:
    """Every weight MatMul as ORT's MatMulNBits, 8-bit symmetric blocks of 32, accuracy
    level 4 (int8 activations inside the kernel); the word table stays fp32."""
    import onnx
    import onnx_ir as ir
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    from albert_edge.onnx.quant.state import quiet

    cfg = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=True, accuracy_level=4, bits=8)
    with quiet():
        q = MatMulNBitsQuantizer(ir.to_proto(_unfused_fp32(fp32)), algo_config=cfg)
        q.process()
    onnx.save(q.model.model, out)
    return out


def build(ckpt: Path, work: Path, forms: Sequence[str]) -> dict[str, Path]:
    """Form key -> the model file to time (built once under ``work``)."""
    work.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    default_dir = work / "albert-edge-onnx-int8-dynamic"
    fp32 = _convert(ckpt, work / "albert-edge-onnx-fp32", precision="fp32")
    for key in forms:
        log(f"{ckpt.name}: building {key}")
        if key == "litert":
            files[key] = Path(peers.build_litert_torch(ckpt, work, (128,)))
        elif key == "default":
            files[key] = _convert(ckpt, default_dir, precision="int8-dynamic")
        elif key == "spin":
            _convert(ckpt, default_dir, precision="int8-dynamic")
            files[key] = _without_hints(default_dir, work / "albert-edge-onnx-int8-no-hints")
        elif key in ("mha", "nbits8"):
            (work / key).mkdir(exist_ok=True)
            make = _mha_int8 if key == "mha" else _nbits8
            files[key] = make(fp32, work / key / "model.onnx")
            with_files_beside(files[key], ckpt)  # bench feeds tokenized text
        elif key == "nbits4":
            files[key] = _convert(
                ckpt, work / "albert-edge-onnx-int4-nbits", precision="int4", int4_kernel="nbits"
            )
        elif key == "static":
            files[key] = _convert(
                ckpt,
                work / "albert-edge-onnx-int8-static",
                precision="int8-static",
                calibration=precisions.TRAIN,
                num_calibration=128,
            )
        elif key == "fp32":
            files[key] = fp32
    return files


def ort_profile(path: Path, threads: int, runs: int, config: dict[str, str]) -> dict[str, Any]:
    """Per op type: the sum over its nodes of each node's median kernel time (us), and
    the node count, from ORT's profiler at 128 tokens, batch 1."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    for key, value in config.items():
        opts.add_session_config_entry(key, value)
    opts.enable_profiling = True
    opts.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "ort")
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    feeds = smp._feeds(sess.get_inputs(), 128)
    for _ in range(runs):
        sess.run(None, feeds)
    trace_file = Path(sess.end_profiling())
    trace = json.loads(trace_file.read_text())
    shutil.rmtree(trace_file.parent, ignore_errors=True)
    per_node: dict[str, list[int]] = collections.defaultdict(list)
    op_of: dict[str, str] = {}
    for e in trace:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_node[e["name"]].append(int(e["dur"]))
            op_of[e["name"]] = e["args"].get("op_name", "?")
    by_op: dict[str, float] = collections.defaultdict(float)
    nodes: collections.Counter[str] = collections.Counter()
    for name, durs in per_node.items():
        by_op[op_of[name]] += float(statistics.median(durs))
        nodes[op_of[name]] += 1
    total = sum(by_op.values())
    return {
        "session_config": config,
        "runs": runs,
        "kernel_us": round(total, 1),
        "nodes": sum(nodes.values()),
        "by_op": [
            {"op": op, "nodes": nodes[op], "us": round(us, 1), "share": us / total}
            for op, us in sorted(by_op.items(), key=lambda kv: -kv[1])
        ],
    }


def profile(files: dict[str, Path], a: argparse.Namespace, runs: int) -> dict[str, Any]:
    from albert_edge.onnx.runtime import host_session_config

    out: dict[str, Any] = {}
    if "litert" in files:
        ops = litert_op_profile.interleaved(
            {LITERT: files["litert"]}, threads=a.threads, runs=runs, rounds=a.rounds
        )
        out["litert"] = ops[LITERT]
    if "default" in files:
        out["default"] = ort_profile(files["default"], a.threads, runs, host_session_config())
        out["spin"] = ort_profile(files["default"], a.threads, runs, {})
    return out


def time_w1(files: dict[str, Path], a: argparse.Namespace, threads: int) -> dict[str, Any]:
    """W1 at 128 tokens: pooled p50/min and per-round visit minima (albert_edge.bench)."""
    import numpy as np

    from albert_edge.bench import bench, evidence, resolve_target

    targets = [resolve_target(p).with_(name=FORMS[k]) for k, p in files.items()]
    rep = bench(
        targets,
        backends=["litert-xnnpack", "ort-cpu"],
        seq_lens=(128,),
        threads=(threads,),
        runs=a.w1_runs,
        warmup=5,
        rounds=a.rounds,
        roofline=False,
        progress=True,
        keep_samples=True,
    )
    rows: dict[str, Any] = {}
    for r in rep["results"]:
        if r["status"] != "ok":
            continue
        visits = evidence.split_visits(r["samples_ms"], a.rounds)
        rows[r["artifact"]] = {
            "p50_ms": r["latency_ms"]["p50"],
            "min_ms": r["latency_ms"]["min"],
            "visit_min_ms": evidence.visit_minima(
                {"rounds_ms": {"128": visits}}, ["128"], a.rounds
            ).tolist(),
            "visit_p50_ms": [float(np.median(v)) for v in visits],
        }
    peer = rows.get(LITERT)
    for row in rows.values():
        for stat in ("min", "p50"):
            if peer:
                pairs = [
                    x / y
                    for x, y in zip(row[f"visit_{stat}_ms"], peer[f"visit_{stat}_ms"], strict=False)
                    if y > 0
                ]
                row[f"paired_{stat}_ratio"] = float(np.median(pairs)) if pairs else None
    return {"threads": threads, "rows": rows}


def time_model(files: dict[str, Path], a: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"before": smp.machine()}
    out["w1"] = time_w1(files, a, a.threads)
    one = {k: p for k, p in files.items() if k in ONE_THREAD}
    if a.threads != 1 and one:
        out["w1_one_thread"] = time_w1(one, a, 1)
    w2 = [(FORMS[k], p) for k, p in files.items() if k in W2_FORMS]
    if a.w2 and w2:
        out["w2_median_ms"] = precisions.w2_latencies(w2, a.w2, a.threads, a.rounds)
    out["after"] = smp.machine()
    return out


# --- report -------------------------------------------------------------------------------


def _ort_lines(title: str, prof: dict[str, Any], top: int = 9) -> list[str]:
    return [
        f"**{title}** ({prof['nodes']} nodes; per-node medians over {prof['runs']} profiled "
        f"runs, summed: {prof['kernel_us']:.0f} us)",
        "",
        *smp.op_table(prof["by_op"], top, digits=0),
    ]


def _w1_lines(t: dict[str, Any]) -> list[str]:
    lines = [
        f"W1, 128 tokens, {t['threads']} thread(s):",
        "",
        "| file | p50 ms | min ms | × litert-torch (p50) | × litert-torch (min) | "
        "paired × (visit p50) | paired × (visit min) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    peer = t["rows"].get(LITERT, {})
    for name, r in t["rows"].items():

        def ratio(stat: str, r: dict[str, Any] = r) -> str:
            return f"{r[stat] / peer[stat]:.2f}" if peer.get(stat) else "—"

        def paired(stat: str, r: dict[str, Any] = r) -> str:
            v = r.get(f"paired_{stat}_ratio")
            return f"{v:.2f}" if v else "—"

        lines.append(
            f"| {name} | {r['p50_ms']:.3f} | {r['min_ms']:.3f} | {ratio('p50_ms')} | "
            f"{ratio('min_ms')} | {paired('p50')} | {paired('min')} |"
        )
    return [*lines, ""]


def markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    m = s["machine"]
    lines = [
        "# ONNX Runtime at full depth: forms and session settings beside litert-torch",
        "",
        f"`python -m benchmarks.onnx_speed` ({s['threads']} threads, batch 1; "
        f"{s['rounds']} interleaved rounds, each file in its own process). {m['cpu']} "
        f"({m['cores']} cores, kernel family {m['cpu_flag']}). The machine is shared with "
        "other work: only ratios within one table compare; the paired ratios are each "
        "file's visit statistic over litert-torch's in the same round, median over rounds. "
        "Module docstring: what each file is.",
        "",
    ]
    for entry in report["models"]:
        lines += [f"## {entry['model']}", ""]
        prof = entry.get("profile", {})
        if "litert" in prof:
            lines += smp.litert_ops_table(f"{LITERT}", prof["litert"])
        for key, title in (("default", FORMS["default"]), ("spin", FORMS["spin"])):
            if key in prof:
                cfg = prof[key]["session_config"] or "ORT defaults"
                lines += _ort_lines(f"{title}; session config {cfg}", prof[key])
        t = entry.get("timing")
        if t:
            b, e = t["before"]["loadavg"], t["after"]["loadavg"]
            lines += [f"Timed {t['before']['when']}; load average {b} before, {e} after.", ""]
            lines += _w1_lines(t["w1"])
            if "w1_one_thread" in t:
                lines += _w1_lines(t["w1_one_thread"])
            if t.get("w2_median_ms"):
                lines += [
                    f"W2 ({s['w2']} SST-2 dev sentences at their own length), median ms: "
                    + ", ".join(f"{k} {v:.3f}" for k, v in t["w2_median_ms"].items()),
                    "",
                ]
    return "\n".join(lines) + "\n"


def _under(path: Path, work: Path) -> str:
    try:
        return "<work>/" + path.resolve().relative_to(work.resolve()).as_posix()
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "onnx_speed")
    p.add_argument("--models", default="embedded,h256,base")
    p.add_argument("--forms", default=",".join(FORMS), help=f"of {','.join(FORMS)}")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--w1-runs", type=int, default=120, help="timed W1 runs per file (small)")
    p.add_argument("--base-w1-runs", type=int, default=24, help="timed W1 runs, albert-base")
    p.add_argument("--profile-runs", type=int, default=200)
    p.add_argument("--base-profile-runs", type=int, default=24)
    p.add_argument("--w2", type=int, default=200, help="SST-2 dev sentences (0: no W2)")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--name", default="onnx_speed", help="output file stem")
    p.add_argument("--render", action="store_true", help="re-render the .md from the .json")
    a = p.parse_args(argv)
    path = a.out / f"{a.name}.json"
    if a.render:
        path.with_suffix(".md").write_text(markdown(json.loads(path.read_text())))
        return 0
    names = [n for n in a.models.split(",") if n]
    forms = [f for f in a.forms.split(",") if f]
    bad = [n for n in names if n not in smp.MODELS] or [f for f in forms if f not in FORMS]
    if bad:
        p.error(f"unknown --models/--forms entry {bad[0]!r}")
    settings = {**vars(a), "work": "<work>", "machine": smp.machine()}
    report: dict[str, Any] = {"settings": settings, "models": []}
    w1_runs = a.w1_runs
    for label, ckpt in smp.checkpoints(a.work, names).items():
        base = label == smp.MODELS["base"]
        a.w1_runs = a.base_w1_runs if base else w1_runs
        files = build(ckpt, a.work / re.sub(r"\W+", "-", label).strip("-"), forms)
        entry: dict[str, Any] = {  # under --work: the machine's own paths stay out
            "model": label,
            "files": {k: _under(v, a.work) for k, v in files.items()},
        }
        if not a.no_profile:
            entry["profile"] = profile(files, a, a.base_profile_runs if base else a.profile_runs)
        entry["timing"] = time_model(files, a)
        report["models"].append(entry)
        a.out.mkdir(parents=True, exist_ok=True)  # keep what is measured so far
        text = json.dumps(portable(json.loads(json.dumps(report, default=str))), indent=2)
        path.write_text(text + "\n")
        path.with_suffix(".md").write_text(markdown(json.loads(text)))
        log(f"{label}: done")
    log(f"wrote {path} and {path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
