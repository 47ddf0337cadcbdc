#!/usr/bin/env python
"""Where a small ALBERT's time goes, per runtime, beside litert-torch's and optimum's files
of the same checkpoint; and, with ``--time``, the full-depth latencies side by side.

Models (``--models``): the embedded trained SST-2 model (H 128, 4 layers, 1 group), a
6-layer, 2-group ALBERT with H 256, E 64, 4 heads, FFN 512, 128 positions, and (``base``)
albert-base-v2's shape; the last two with random weights, seed 0 (latency and graph
structure only). For each, the artifacts a user compares:

- albert-edge TFLite int8-dynamic, default flags (signatures 16/32/64/128), and the same
  with ``--seq-lens 128`` (the one-signature file the defaults used to write);
- albert-edge ONNX int8-dynamic, default flags;
- litert-torch + ai-edge-quantizer ``dynamic_wi8_afp32`` (``peers.build_litert_torch``,
  one static seq-128 signature: the mobile peer);
- optimum ``onnxruntime quantize --avx512_vnni`` (``peers.build_optimum``).

Profiles (seq 128, batch 1, ``--threads``):

- ONNX Runtime: ``SessionOptions.enable_profiling``; every ``Node`` event of the optimized
  graph, summed by op type per inference (mean over ``--runs``), with the node count:
  how many ops the runtime executes and which take the time, including the
  DynamicQuantizeLinear steps.
- LiteRT, per op: TFLite's op profiler through the LiteRT C API
  (:mod:`benchmarks.litert_op_profile`, median over ``--runs`` inferences in ``--rounds``
  blocks alternating between the files): every op the
  interpreter runs itself (outside XNNPACK) and every XNNPACK operator, by type, and
  each XNNPACK partition's summed time; the interpreter's whole ``Invoke`` beside, and
  what no op event covers (XNNPACK reports whole microseconds, so its ~0.5 us ops read
  0: the remainder holds them and the delegate's dispatch).
- LiteRT, partitions: the XNNPACK partition report of signature subgraph 0 (the seq-128
  one) from the Python interpreter: ops, partitions (DELEGATE nodes in the execution
  plan), and which ops stay outside XNNPACK. Which ops are outside is read from an
  interpreter built with ``experimental_disable_delegate_node_fusion`` (one DELEGATE
  node per delegated op, so each op's outputs tell whether XNNPACK took it).

``--time``: W1 (seq 128, batch 1) through :func:`albert_edge.bench.bench` with
``--rounds`` interleaved passes, each artifact in its own process. Beside the pooled p50
and min, the ratio to litert-torch is also taken **round by round** (each artifact's visit
p50 and visit minimum over litert-torch's in the same round, seconds apart): the VM's
fast and slow states last minutes, so a round's artifacts share one state, and the median
of those paired ratios, with how many rounds meet 0.9, is what the bar is read from when
pooled figures straddle a state switch. W2 (``--w2`` SST-2 dev
sentences, each at its own length; TFLite pads to its smallest signature that fits)
through :func:`benchmarks.precisions.w2_latencies`, block by block in turn. The load
average and the CPU's kernel family are recorded beside the figures.

``--baseline-work DIR``: the default TFLite file another tree built into its ``--work``
(e.g. ``git worktree add`` of the commit before a change, then this module there) joins
each model's profile and timing as the baseline build: before and after, side by side.

Outputs (``--out``, default ``benchmarks/results``): ``small_model_profile.json`` and
``.md``. Run: ``python -m benchmarks.small_model_profile [--time] [--threads 2]
[--models embedded,h256,base]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks import litert_op_profile, peers, precisions  # noqa: E402
from benchmarks.script_report import built, portable, reusable  # noqa: E402

SPIECE = precisions.SPIECE
TRAINED = precisions.TRAINED
H256 = dict(
    hidden_size=256,
    embedding_size=64,
    num_hidden_layers=6,
    num_hidden_groups=2,
    num_attention_heads=4,
    intermediate_size=512,
    max_position_embeddings=128,
)
TFLITE = "albert-edge tflite int8-dynamic"
TFLITE_128 = "albert-edge tflite int8-dynamic --seq-lens 128"
ONNX = "albert-edge onnx int8-dynamic"
LITERT = "litert-torch + ai-edge-quantizer int8 (static 128)"
OPTIMUM = "optimum quantize avx512_vnni"
BASELINE = "albert-edge tflite int8-dynamic, baseline build"
BASELINE_DIR = "albert-edge-tflite-int8-dynamic"  # the default file's directory in --work
PADDED = "@128 (W2 sentences padded to 128)"
BACKEND = {".tflite": "litert-xnnpack", ".onnx": "ort-cpu"}


def log(msg: str) -> None:
    print(f"small_model_profile: {msg}", file=sys.stderr, flush=True)


MODELS = {
    "embedded": "embedded (trained)",
    "h256": "H256 E64 6L 2G (random)",
    "base": "albert-base shape (random)",
}


def checkpoints(work: Path, names: Sequence[str] = ("embedded", "h256")) -> dict[str, Path]:
    from albert_edge.configs import make_config, make_random_checkpoint

    out: dict[str, Path] = {}
    for name in names:
        if name == "embedded":
            out[MODELS[name]] = TRAINED
            continue
        ckpt = work / {"h256": "h256-6L2G", "base": "albert-base"}[name] / "ckpt"
        if not (ckpt / "config.json").is_file():
            cfg = make_config("tiny", **H256) if name == "h256" else make_config("albert-base")
            make_random_checkpoint(ckpt, cfg, spiece_model=SPIECE, seed=0)
        out[MODELS[name]] = ckpt
    return out


def _albert_edge(ckpt: Path, work: Path, target: str, seq_lens: tuple[int, ...]) -> Path:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    tag = "-s" + "-".join(map(str, seq_lens)) if seq_lens else ""
    out = work / f"albert-edge-{target}-int8-dynamic{tag}"
    if (out / "manifest.json").is_file() and reusable(out):
        return out
    opts = ConvertOptions(
        target=target, precision="int8-dynamic", seq_lens=seq_lens, overwrite=True
    )
    convert(ckpt, out, opts)  # verified (verify's grid: every signature bucket)
    return built(out)


ARTIFACTS = {"tflite": TFLITE, "tflite128": TFLITE_128, "onnx": ONNX, "litert": LITERT}
ARTIFACTS["optimum"] = OPTIMUM


def artifacts(ckpt: Path, work: Path, keys: Sequence[str] = tuple(ARTIFACTS)) -> dict[str, Path]:
    """Label -> the model file each runtime opens (built once under ``work``)."""
    from albert_edge.runtime import model_file

    build = {
        "tflite": lambda: model_file(_albert_edge(ckpt, work, "tflite", ())),
        "tflite128": lambda: model_file(_albert_edge(ckpt, work, "tflite", (128,))),
        "onnx": lambda: model_file(_albert_edge(ckpt, work, "onnx", ())),
        "litert": lambda: peers.build_litert_torch(ckpt, work, (128,)),
        "optimum": lambda: peers.build_optimum(ckpt, work, "int8"),
    }
    return {ARTIFACTS[k]: Path(build[k]()) for k in ARTIFACTS if k in keys}


def _feeds(inputs: Any, seq: int) -> dict[str, Any]:
    import numpy as np

    ids = np.random.default_rng(0).integers(5, 1000, (1, seq))
    values = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    dtype = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}
    return {
        i.name: values.get(i.name, np.zeros_like(ids)).astype(dtype.get(i.type, np.int64))
        for i in inputs
    }


def ort_profile(path: Path, threads: int, runs: int, seq: int = 128) -> dict[str, Any]:
    """Per op type: mean microseconds per inference and node count (ORT's profiler)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    opts.enable_profiling = True
    opts.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "ort")
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    feeds = _feeds(sess.get_inputs(), seq)
    for _ in range(10):
        sess.run(None, feeds)
    t0 = time.perf_counter()
    for _ in range(runs):
        sess.run(None, feeds)
    wall_ms = (time.perf_counter() - t0) * 1e3 / (runs + 10)
    trace = json.loads(Path(sess.end_profiling()).read_text())
    nodes = [e for e in trace if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    per_op: Counter[str] = Counter()
    names: dict[str, set[str]] = {}
    for e in nodes:
        op = e["args"].get("op_name", "?")
        per_op[op] += int(e["dur"])
        names.setdefault(op, set()).add(e["name"])
    calls = runs + 10
    total = sum(per_op.values()) / calls
    rows = [
        {"op": op, "nodes": len(names[op]), "us": round(us / calls, 1), "share": us / calls / total}
        for op, us in sorted(per_op.items(), key=lambda kv: -kv[1])
    ]
    return {
        "nodes": sum(r["nodes"] for r in rows),
        "kernel_us": round(total, 1),
        "wall_ms_with_profiler": round(wall_ms, 3),
        "by_op": rows,
    }


def litert_partitions(path: Path, threads: int) -> dict[str, Any]:
    """XNNPACK's partitions of subgraph 0 and the ops it leaves to TFLite's kernels."""
    from ai_edge_litert.interpreter import Interpreter

    report: dict[str, Any] = {}
    for single in (False, True):
        interp = Interpreter(
            str(path), num_threads=threads, experimental_disable_delegate_node_fusion=single
        )
        interp.allocate_tensors()
        w = interp._interpreter  # the node table (original nodes, then DELEGATE nodes)
        names = [w.NodeName(k) for k in range(w.NumNodes())]
        delegates = [k for k, n in enumerate(names) if n == "DELEGATE"]
        ops = [k for k, n in enumerate(names) if n != "DELEGATE"]
        if not single:
            report.update(
                ops=len(ops), partitions=len(delegates), by_op=Counter(names[k] for k in ops)
            )
            continue
        producer = {int(t): k for k in ops for t in w.NodeOutputs(k)}
        taken = {
            producer[int(t)] for d in delegates for t in w.NodeOutputs(d) if int(t) in producer
        }
        outside = [k for k in ops if k not in taken]
        report.update(
            delegated=len(taken),
            outside=dict(Counter(names[k] for k in outside)),
            outside_nodes=[f"#{k} {names[k]}" for k in outside],
        )
    report["by_op"] = dict(report["by_op"].most_common())
    return report


def profile_model(label: str, arts: dict[str, Path], a: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"model": label, "artifacts": {}}
    tflite = {n: p for n, p in arts.items() if p.suffix == ".tflite"}
    ops = litert_op_profile.interleaved(tflite, threads=a.threads, runs=a.runs, rounds=a.rounds)
    for name, path in arts.items():
        row: dict[str, Any] = {"file": str(path), "bytes": path.stat().st_size}
        if path.suffix == ".onnx":
            row["ort"] = ort_profile(path, a.threads, a.runs)
        else:
            row["litert"] = litert_partitions(path, a.threads)
            row["litert_ops"] = ops[name]
        out["artifacts"][name] = row
        log(f"{label}: profiled {name}")
    return out


def machine() -> dict[str, Any]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    # the kernel family the int8 kernels pick: avx512_vnni where present, else avx2
    flags = re.search(r"avx512_vnni", text) or re.search(r"avx2", text)
    model = re.search(r"model name\s*:\s*(.*)", text)
    return {
        "cpu": model.group(1) if model else platform.processor(),
        "cpu_flag": flags.group(0) if flags else None,
        "cores": os.cpu_count(),
        "loadavg": [round(v, 2) for v in os.getloadavg()],
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def time_model(
    label: str, arts: dict[str, Path], ckpt: Path, a: argparse.Namespace
) -> dict[str, Any]:
    """W1 at 128 (interleaved rounds) and W2 (block by block) of every artifact."""
    import numpy as np

    from albert_edge.bench import bench, evidence, resolve_target

    before = machine()
    # W2, and beside it each albert-edge TFLite file on the same sentences padded to 128
    # (a W1 in the same harness, block by block with the W2s: the W2 ÷ W1 bar compares
    # two figures taken in the same machine state, which the separate W1 timing is not)
    padded = {f"{n} {PADDED}": p for n, p in arts.items() if n in (TFLITE, BASELINE)}
    w2 = (
        precisions.w2_latencies(
            [*arts.items(), *padded.items()],
            a.w2,
            a.threads,
            a.w2_rounds or a.rounds,
            pad=dict.fromkeys(padded, 128),
        )
        if a.w2
        else {}
    )
    targets = [resolve_target(p).with_(name=n) for n, p in arts.items()]
    rep = bench(
        targets,
        backends=sorted(set(BACKEND.values())),
        seq_lens=(128,),
        threads=(a.threads,),
        runs=a.w1_runs,
        warmup=5,
        rounds=a.rounds,
        roofline=False,
        progress=True,
        keep_samples=True,
    )
    rows = {}
    for r in rep["results"]:
        if r["status"] != "ok" or r["backend"] != BACKEND[Path(arts[r["artifact"]]).suffix]:
            continue
        lat = r["latency_ms"]
        rows[r["artifact"]] = {"w1_p50_ms": lat["p50"], "w1_min_ms": lat["min"]}
        if r.get("samples_ms") and a.rounds > 1:
            visits = evidence.split_visits(r["samples_ms"], a.rounds)
            timed = {"rounds_ms": {"128": visits}}
            rows[r["artifact"]]["w1_rounds"] = {
                "p50_ms": [float(np.median(v)) for v in visits],
                "min_ms": evidence.visit_minima(timed, ["128"], a.rounds).tolist(),
            }
    for name, ms in w2.items():
        own = name.removesuffix(f" {PADDED}")
        rows.setdefault(own, {})["w1_harness_ms" if own != name else "w2_median_ms"] = ms
    return {"model": label, "before": before, "after": machine(), "rows": rows}


def op_table(rows: list[dict[str, Any]], top: int = 10, digits: int = 1) -> list[str]:
    """A Markdown table of per-op-type rows (``op``, ``nodes``, ``us``, ``share``): the
    ``top`` types, then one line for the rest."""
    lines = ["| op type | nodes | us / inference | share |", "|---|---:|---:|---:|"]
    lines += [
        f"| {r['op']} | {r['nodes']} | {r['us']:.{digits}f} | {100 * r['share']:.1f} % |"
        for r in rows[:top]
    ]
    rest = rows[top:]
    if rest:
        us = sum(r["us"] for r in rest)
        lines.append(
            f"| {len(rest)} other types | {sum(r['nodes'] for r in rest)} | {us:.{digits}f} | |"
        )
    return [*lines, ""]


def _ort_table(name: str, prof: dict[str, Any], top: int = 10) -> list[str]:
    return [
        f"**{name}** (ONNX Runtime): {prof['nodes']} nodes, {prof['kernel_us']} us of kernels "
        f"per inference ({prof['wall_ms_with_profiler']} ms wall with the profiler on)",
        "",
        *op_table(prof["by_op"], top),
    ]


def _litert_lines(name: str, rep: dict[str, Any]) -> list[str]:
    outside = ", ".join(f"{k} x{v}" for k, v in rep["outside"].items()) or "none"
    ops = ", ".join(f"{k} {v}" for k, v in list(rep["by_op"].items())[:8])
    return [
        f"- **{name}** (LiteRT, subgraph 0): {rep['ops']} ops, {rep['delegated']} taken by "
        f"XNNPACK in **{rep['partitions']} partition(s)**; outside XNNPACK: {outside}. "
        f"Most frequent ops: {ops}.",
    ]


def litert_ops_table(name: str, prof: dict[str, Any], top: int = 10) -> list[str]:
    parts = "; ".join(
        f"#{p['index']}: {p['ops']} ops, {p['us']:.0f} us" for p in prof["partitions"]
    )
    lines = [
        f"**{name}** (LiteRT op profiler, median of {prof['runs']} runs): Invoke "
        f"{prof['invoke_us']:.0f} us = XNNPACK ops {prof['xnnpack_us']:.0f} + TFLite kernels "
        f"outside XNNPACK {prof['outside_xnnpack_us']:.0f} + unattributed "
        f"{prof['unattributed_us']:.0f}. Partitions: {parts}.",
        "",
        "| op (where it runs) | per inference | us / inference | share of Invoke |",
        "|---|---:|---:|---:|",
    ]
    rows = prof["by_op"]
    lines += [
        f"| {r['op']} | {r['per_inference']} | {r['us']:.1f} | "
        f"{100 * r['us'] / prof['invoke_us']:.1f} % |"
        for r in rows[:top]
    ]
    rest = rows[top:]
    if rest:
        us = sum(r["us"] for r in rest)
        n = sum(r["per_inference"] for r in rest)
        lines.append(f"| {len(rest)} other types | {n} | {us:.1f} | |")
    return [*lines, ""]


def _ms(v: float | None) -> str:
    return f"{v:.3f}" if v else "—"


def paired_ratios(rows: dict[str, Any], name: str, stat: str) -> list[float]:
    """``name``'s visit statistic (``p50_ms`` or ``min_ms``) over litert-torch's, round by
    round (both visits of a round seconds apart, in one state of the VM)."""
    own = rows.get(name, {}).get("w1_rounds", {}).get(stat) or []
    peer = rows.get(LITERT, {}).get("w1_rounds", {}).get(stat) or []
    return [a / b for a, b in zip(own, peer, strict=False) if b > 0]


def paired_lines(rows: dict[str, Any], bar: float = 0.9) -> list[str]:
    """The bar read round by round: median paired ratio, its range, rounds that meet it."""
    import numpy as np

    out = []
    for name in (TFLITE, BASELINE, ONNX):
        parts = []
        for stat, label in (("p50_ms", "visit p50"), ("min_ms", "visit min")):
            r = paired_ratios(rows, name, stat)
            if r:
                met = sum(x <= bar for x in r)
                parts.append(
                    f"{label} {float(np.median(r)):.2f} (range {min(r):.2f}-{max(r):.2f}; "
                    f"<= {bar} in {met} of {len(r)} rounds)"
                )
        if parts:
            out.append(
                f"- Paired, round by round, {name} ÷ litert-torch: median " + "; ".join(parts) + "."
            )
    return out


def _timing_lines(t: dict[str, Any]) -> list[str]:
    rows = t["rows"]
    peer = rows.get(LITERT, {}).get("w1_p50_ms")
    peer_min = rows.get(LITERT, {}).get("w1_min_ms")
    own = rows.get(TFLITE, {}).get("w1_p50_ms")
    m0, m1 = t["before"], t["after"]
    lines = [
        f"Timed {m0['when']}-{m1['when']}, {m0['cpu']} ({m0['cores']} cores, kernel family "
        f"{m0['cpu_flag']}), load average {m0['loadavg']} before, {m1['loadavg']} after.",
        "",
        "| artifact | W1 p50 ms (seq 128) | W1 min ms | × litert-torch (p50) | "
        "× litert-torch (min) | W2 median ms | W2 ÷ own W1 p50 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        w1, w2 = r.get("w1_p50_ms"), r.get("w2_median_ms")
        w1_min = r.get("w1_min_ms")
        ratio = f"{w1 / peer:.2f}" if w1 and peer else "—"
        ratio_min = f"{w1_min / peer_min:.2f}" if w1_min and peer_min else "—"
        own_ratio = f"{w2 / w1:.2f}" if w1 and w2 else "—"
        lines.append(
            f"| {name} | {_ms(w1)} | {_ms(w1_min)} | {ratio} | {ratio_min} | {_ms(w2)} | "
            f"{own_ratio} |"
        )
    if own and peer and peer_min:
        w2 = rows.get(TFLITE, {}).get("w2_median_ms")
        lines.append("")
        for name in (TFLITE, BASELINE, ONNX):
            r = rows.get(name, {})
            if r.get("w1_p50_ms") and r.get("w1_min_ms"):
                p50, low = r["w1_p50_ms"] / peer, r["w1_min_ms"] / peer_min
                verdict = (
                    "met by both"
                    if max(p50, low) <= 0.9
                    else "met by min only"
                    if low <= 0.9
                    else "met by p50 only"
                    if p50 <= 0.9
                    else "not met"
                )
                lines.append(
                    f"- Bar W1 <= 0.9x litert-torch, {name}: {p50:.2f} by p50, {low:.2f} by "
                    f"min ({verdict})."
                )
        if w2:
            lines.append(
                f"- Bar W2 <= 0.5x own W1, {TFLITE}: {w2 / own:.2f} "
                f"({'met' if w2 / own <= 0.5 else 'not met'})."
            )
        lines += paired_lines(rows)
        same = rows.get(TFLITE, {}).get("w1_harness_ms")
        if w2 and same:
            lines.append(
                f"- The same bar with W1 timed in the W2 harness (the W2 sentences padded to "
                f"128, block by block with the W2s): W2 {w2:.3f} ÷ {same:.3f} ms = "
                f"{w2 / same:.2f} ({'met' if w2 / same <= 0.5 else 'not met'})."
            )
    return [*lines, ""]


def markdown(rep: dict[str, Any]) -> str:
    s = rep["settings"]
    m = s["machine"]
    lines = [
        "# Small models: where the time goes",
        "",
        f"`python -m benchmarks.small_model_profile{' --time' if s['time'] else ''}` "
        f"({s['threads']} threads, batch 1, seq 128; ORT profile over {s['runs']} runs). "
        f"{m['cpu']}, kernel family {m['cpu_flag']}, load average {m['loadavg']} at start. "
        "Module docstring: what each figure is and what is not measured. ORT's microseconds "
        "are taken with its profiler on (it writes one event per node and run), so their "
        "sum is far above the W1 latency: read the shares and node counts. W1 p50 on a "
        "loaded VM swings with its slow state; min is printed beside it, and only rows of "
        "one table were measured side by side.",
        "",
    ]
    for entry in rep["models"]:
        lines += [f"## {entry['model']}", ""]
        for name, art in entry["artifacts"].items():
            if "litert" in art:
                lines += _litert_lines(name, art["litert"])
        lines.append("")
        for name, art in entry["artifacts"].items():
            if "litert_ops" in art:
                lines += litert_ops_table(name, art["litert_ops"])
        for name, art in entry["artifacts"].items():
            if "ort" in art:
                lines += _ort_table(name, art["ort"])
        if "timing" in entry:
            lines += _timing_lines(entry["timing"])
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "small_profile")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=200, help="profiled ORT runs")
    p.add_argument("--time", action="store_true", help="also W1/W2 latencies side by side")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--w1-runs", type=int, default=400)
    p.add_argument(
        "--w2-rounds",
        type=int,
        help="passes over the W2 sentences (default: --rounds; many W1 rounds, each a "
        "short block, spread the VM's slow phases over the files)",
    )
    p.add_argument("--w2", type=int, default=300, help="SST-2 dev sentences (0: no W2)")
    p.add_argument("--no-profile", action="store_true", help="timings only (with --time)")
    p.add_argument("--render", action="store_true", help="re-render the .md from the .json")
    p.add_argument(
        "--models", default="embedded,h256", help=f"comma-separated, of {','.join(MODELS)}"
    )
    p.add_argument("--name", default="small_model_profile", help="output file stem")
    p.add_argument(
        "--baseline-work",
        type=Path,
        help="another tree's --work directory: its default TFLite file of each model is "
        "profiled and timed beside this tree's, as the baseline build",
    )
    p.add_argument(
        "--artifacts",
        default=",".join(ARTIFACTS),
        help=f"comma-separated, of {','.join(ARTIFACTS)}",
    )
    a = p.parse_args(argv)
    names = [m.strip() for m in a.models.split(",") if m.strip()]
    keys = [k.strip() for k in a.artifacts.split(",") if k.strip()]
    if [k for k in keys if k not in ARTIFACTS]:
        p.error(f"--artifacts: choose from {', '.join(ARTIFACTS)}")
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        p.error(f"--models: unknown {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    path = a.out / f"{a.name}.json"
    if a.render:
        path.with_suffix(".md").write_text(markdown(json.loads(path.read_text())))
        return 0
    report: dict[str, Any] = {"settings": {**vars(a), "machine": machine()}, "models": []}
    for label, ckpt in checkpoints(a.work, names).items():
        slug = re.sub(r"\W+", "-", label).strip("-")
        arts = artifacts(ckpt, a.work / slug, keys)
        base = a.baseline_work and a.baseline_work / slug / f"{BASELINE_DIR}/model.tflite"
        if base and base.is_file():
            arts = {BASELINE: base, **arts}
        entry = {"model": label, "artifacts": {}} if a.no_profile else profile_model(label, arts, a)
        if a.time:
            entry["timing"] = time_model(label, arts, ckpt, a)
        report["models"].append(entry)
        a.out.mkdir(parents=True, exist_ok=True)  # keep what is measured so far
        text = json.dumps(portable(json.loads(json.dumps(report, default=str))), indent=2)
        path.write_text(text + "\n")
        path.with_suffix(".md").write_text(markdown(json.loads(text)))
    log(f"wrote {path} and {path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
