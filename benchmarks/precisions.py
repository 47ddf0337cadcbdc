#!/usr/bin/env python
"""Every precision × target at DEFAULT flags, side by side in one run (issue 17).

For the trained SST-2 model (``albert_edge/models/sst2-albert-tiny``) and, with
``--base``, albert-base (random init, the published v2 shape; latency and size only),
this builds every albert-edge artifact with default flags through the public
``albert_edge.convert`` API — ONNX fp32/fp16/int8-dynamic/int8-static/int4, TFLite
fp32/fp16/int8-dynamic/int8-full — plus optimum's fp32 export and its
``onnxruntime quantize --avx512_vnni`` int8 (the peer, built as ``benchmarks/peers.py``
does) and the mobile peer ``LITERT_PEER`` (litert-torch fp32 conversion, one static
seq-128 signature, quantized by ai-edge-quantizer's ``dynamic_wi8_afp32`` recipe:
``peers.build_litert_torch``), and measures in one run:

- size ÷ floor (floor = unique parameters of the checkpoint × bytes per parameter at
  the precision, as ``albert-edge inspect`` computes it);
- W1: p50 at batch 1, sequence 128, and p50 at every ``--seq-lens`` (8 … 512), via
  :func:`albert_edge.bench.bench` (``--rounds`` interleaved passes), with the
  roofline fraction (``albert_edge/bench/roofline.py``: the time the weight GEMMs take
  at the best measured rate of each exact shape, torch, ORT and XNNPACK kernels, ÷ the
  latency; W2's at the median sentence length);
- W2: median latency over ``--w2`` real SST-2 dev sentences each at its own token
  length (no padding; TFLite pads to its smallest signature that fits), every artifact
  in its own resident process, timed in turn block by block (:func:`w2_latencies`
  says why);
- SST-2 dev accuracy (872 sentences) of each artifact and of the checkpoint.

TFLite artifacts are converted with ``--seq-lens 32,128,512`` so that the sequence
sweep and W2 can run them. Signatures share every weight buffer, but each adds its own
graph tables (ops, tensors) and the 512 bucket stores all 512 position rows: the sizes
are above those of the default single-signature file (``benchmarks/tflite_bytes.py``
accounts for both, per tensor).

Outputs (``--out``, default ``benchmarks/results``): ``precisions.json`` (an
albert-edge-bench/1 report; each result row also carries ``w2_median_ms``,
``accuracy``, ``model``), ``precisions.md`` and ``precisions.png``. Run:
``python -m benchmarks.precisions [--base] [--threads 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from albert_edge.bench import (
    accuracy,
    bench,
    resolve_target,
    validate_report,
    write_outputs,
)
from albert_edge.bench.report import machine_line
from benchmarks._setup import DEV, ROOT, SPIECE, TRAIN, TRAINED
from benchmarks.script_report import built, portable, reusable

# int4-nbits: --precision int4 --int4-kernel nbits (MatMulNBits), beside the default int4
ONNX = ("fp32", "fp16", "int8-dynamic", "int8-static", "int4", "int4-nbits")
TFLITE = ("fp32", "fp16", "int8-dynamic", "int8-full")
BACKEND = {"onnx": "ort-cpu", "tflite": "litert-xnnpack"}
TFLITE_BUCKETS = (32, 128, 512)
# The mobile peer (peers.build_litert_torch): litert-torch's fp32 conversion, one
# static-128 signature, quantized by ai-edge-quantizer's dynamic_wi8_afp32 recipe.
LITERT_PEER = "litert-torch + ai-edge-quantizer int8 (static 128)"


def build(ckpt: Path, work: Path, target: str, precision: str) -> Path:
    """One albert-edge artifact with default flags (calibration where the precision needs it)."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = work / f"albert-edge-{target}-{precision}"
    if (out / "manifest.json").is_file() and reusable(out):
        return out
    static = precision in ("int8-static", "int8-full")
    nbits = precision == "int4-nbits"
    convert(
        ckpt,
        out,
        ConvertOptions(
            target=target,
            precision="int4" if nbits else precision,
            int4_kernel="nbits" if nbits else "int8",
            calibration=TRAIN if static else None,
            seq_lens=TFLITE_BUCKETS if target == "tflite" else (),
            verify=False,  # accuracy is measured below on all of SST-2 dev
            overwrite=True,
        ),
    )
    return built(out)


def w2_server(path: Path, threads: int, n: int, pad: int = 0) -> None:
    """A resident W2 child: loads ``path``, encodes the first ``n`` SST-2 dev sentences
    (each at its own length, or padded to ``pad`` tokens: W1 on the same sentences, timed
    in the same interleaved harness as W2), warms up, says ``ready``; then for each block ``lo hi`` read
    from stdin runs sentence ``lo`` once untimed and sentences ``lo..hi-1`` timed, back to
    back, and writes their ms on one line. The protocol has its own file
    descriptor: whatever a runtime prints to stdout goes to stderr instead."""
    import numpy as np

    from albert_edge.data import read_sst2
    from albert_edge.runtime import open_runner
    from albert_edge.tokenizer import AlbertTokenizer

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    tok = AlbertTokenizer(SPIECE)
    feeds = []
    for _, s in read_sst2(DEV)[:n]:
        if pad:
            enc = tok.encode(s, max_length=pad, padding="max_length").as_numpy()
        else:
            enc = tok.encode(s, max_length=512, padding="none").as_numpy()
        feeds.append({k: np.ascontiguousarray(v) for k, v in enc.items()})
    r = open_runner(path, threads=threads)
    names = set(r.input_names)
    xs = [{k: v for k, v in f.items() if k in names} for f in feeds]
    for x in xs[:10]:  # warm-up: allocations, kernel selection
        r.run(x)
    proto.write("ready\n")
    for line in sys.stdin:
        if not line.strip() or line.strip() == "quit":
            break
        lo, hi = (int(v) for v in line.split())
        r.run(xs[lo])  # untimed: the block starts warm, as back-to-back runs are
        ms = []
        for x in xs[lo:hi]:
            t0 = time.perf_counter()
            r.run(x)
            ms.append((time.perf_counter() - t0) * 1e3)
        proto.write(" ".join(f"{v:.6f}" for v in ms) + "\n")


def w2_median_tokens(sentences: Sequence[str]) -> int:
    """The median token count of the W2 sentences, as :func:`w2_server` encodes them."""
    from albert_edge.tokenizer import AlbertTokenizer

    tok = AlbertTokenizer(SPIECE)
    lengths = [
        int(tok.encode(s, max_length=512, padding="none").as_numpy()["input_ids"].shape[-1])
        for s in sentences
    ]
    return int(statistics.median_low(lengths))


def w2_roofline(rows: Sequence[dict[str, Any]], w2_len: int) -> None:
    """Each artifact's W2 roofline fraction: the bound at the median sentence's length (its
    row in the sweep) ÷ the W2 median latency. The median sentence takes the median time
    because latency grows with length; its bound is the weight GEMMs at that M."""
    bounds = {
        (r.get("model"), r["artifact"]): r.get("roofline_bound_ms")
        for r in rows
        if r["seq_len"] == w2_len and r.get("batch", 1) == 1
    }
    for r in rows:
        bound = bounds.get((r.get("model"), r["artifact"]))
        w2 = r.get("w2_median_ms")
        r["w2_median_tokens"] = w2_len
        r["w2_roofline_fraction"] = bound / w2 if bound and w2 else None


def w2_latencies(
    targets: Sequence[tuple[str, Path]],
    n: int,
    threads: int,
    rounds: int = 3,
    gap_s: float = 0.005,
    block: int = 50,
    pad: Mapping[str, int] | None = None,
) -> dict[str, float]:
    """Median ms per sentence of each artifact (:func:`w2_pools`' runs)."""
    pools = w2_pools(targets, n, threads, rounds, gap_s, block, pad)
    out = {label: statistics.median(v) for label, v in pools.items()}
    for label, ms in out.items():
        print(f"precisions: W2 {label}: {ms:.2f} ms", file=sys.stderr)
    return out


def w2_pools(
    targets: Sequence[tuple[str, Path]],
    n: int,
    threads: int,
    rounds: int = 3,
    gap_s: float = 0.005,
    block: int = 50,
    pad: Mapping[str, int] | None = None,
) -> dict[str, list[float]]:
    """Every timed run's ms per artifact, each sentence at its own length (or padded,
    ``pad``), the artifacts timed in turn block by
    block: one resident child process per artifact (:func:`w2_server`); each ``block`` of
    sentences goes to every artifact (the order rotating) before the next block, each
    artifact running it back to back after one untimed warm-up call; ``gap_s`` of idle
    time between two artifacts; ``rounds`` passes over the sentences. ``pad`` (label →
    tokens) pads that label's sentences to a fixed length: a W1 timed block by block
    with the W2s, in the same machine state.

    Why interleaved: this 2-core VM has slow phases (measured 2026-11-23: for minutes at a
    time, 2-thread runs go at 1-thread speed, and no steal time shows); timed one artifact
    after another, a phase lands on whichever artifact is running, and the W2 ratio of
    albert-edge int8 to optimum int8 read 0.52 in one run and 0.60 in the next. Block by
    block (a block is ~0.1 s), a phase hits every artifact alike. Why blocks with a
    warm-up, not one sentence each: switching artifacts after every sentence measured
    cold caches and sleeping thread pools (base int8 8.7-11.7 ms vs 7.5 back to back,
    optimum int8 19.7-27.1 vs 15.5, depending on the gap), not the back-to-back latency W2
    is. Why processes and a gap, not one process: every runtime keeps its own thread pool,
    whose threads spin after each run; on 2 cores the previous artifact's spinning threads
    slow the next one (measured: optimum fp32 30 ms and albert-edge fp32 70 ms at W2 in
    one process, while both take 33-39 ms at seq 32). Why a short gap and blocks of 50:
    a harness that leaves the machine idle most of the time measures the VM's idle
    state, not the runtime. With 50 ms gaps and blocks of 10 (a duty cycle of ~15 %) the
    6-layer H256 int8 TFLite file took 1.84-2.06 ms per 128-token run here, twice what
    ``bench`` measures for it back to back (1.00); with 5 ms gaps and blocks of 50 the same
    harness gives 1.00 ms, litert-torch's file 1.21 (``bench``: 1.23), and ONNX Runtime is
    faster too (0.31 against 0.36-0.43 ms at W2), so 5 ms is past its threads' spinning
    (2026-11-27, AMD EPYC, 2 cores, avx512_vnni, two runs of each setting).
    """
    import itertools
    import subprocess
    import tempfile

    logs = Path(tempfile.mkdtemp(prefix="precisions-w2-"))
    procs: dict[str, Any] = {}
    errs: dict[str, Path] = {}
    pools: dict[str, list[float]] = {}
    skipped: set[str] = set()

    def drop(label: str, why: str) -> None:
        tail = (errs[label].read_text(errors="replace").strip().splitlines() or [why])[-1]
        print(f"precisions: W2 skips {label}: {tail[:300]}", file=sys.stderr)
        skipped.add(label)
        procs.pop(label).kill()

    for k, (label, path) in enumerate(targets):
        errs[label] = logs / f"{k}.stderr"
        cmd = [sys.executable, "-m", "benchmarks.precisions", "--w2-server", str(path)]
        cmd += ["--threads", str(threads)]
        if pad and pad.get(label):
            cmd += ["--w2-pad", str(pad[label])]
        with errs[label].open("w") as err:  # the child holds its own copy
            procs[label] = subprocess.Popen(
                [*cmd, "--w2", str(n)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                bufsize=1,
                cwd=ROOT,  # -m benchmarks.precisions: the package is found from the repository
            )
        if procs[label].stdout.readline().strip() != "ready":
            drop(label, "the W2 child did not start")
    labels = [label for label, _ in targets if label in procs]
    try:
        for rnd, i in itertools.product(range(rounds), range(0, n, block)):
            shift = (i // block + rnd) % max(1, len(labels))
            for label in labels[shift:] + labels[:shift]:
                if label in skipped:
                    continue
                proc = procs[label]
                time.sleep(gap_s)
                try:
                    proc.stdin.write(f"{i} {min(n, i + block)}\n")
                    line = proc.stdout.readline()
                except OSError:
                    line = ""
                if not line.strip():
                    drop(label, "the W2 child died")
                    continue
                pools.setdefault(label, []).extend(float(v) for v in line.split())
    finally:
        for proc in procs.values():
            try:
                proc.stdin.write("quit\n")
                proc.stdin.close()
                proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
        import shutil

        shutil.rmtree(logs, ignore_errors=True)
    return {label: v for label, v in pools.items() if label not in skipped}


def markdown(report: dict[str, Any], seq_lens: Sequence[int]) -> str:
    rows = report["results"]
    lines = [
        "# Every precision × target at default flags (issue 17)",
        "",
        f"Machine: {machine_line(report)}. Threads: {report['settings']['threads']}. "
        f"Built and measured by `benchmarks/precisions.py` in one run "
        f"({report['settings'].get('rounds', 1)} interleaved round(s): every artifact loaded "
        "once in its own process and timed in turn with the others at each length, "
        f"{report['settings']['policy'].get('runs')} timed runs per row pooled); "
        f"{report['created']}.",
        "",
        "size ÷ floor: file bytes ÷ (unique checkpoint parameters × bytes per parameter at the "
        "precision). W1: batch 1, seq 128, p50. W2: median over "
        f"{report['settings'].get('w2_sentences')} SST-2 dev sentences at their own length "
        f"({report['settings'].get('w2_rounds', 1)} pass(es); each sentence run by every "
        "artifact in turn, in blocks of 10, a resident process per artifact). roof: the roofline bound ÷ the latency, where the "
        "bound is the time the model's weight GEMMs (embedding projection, Q/K/V/output, "
        "FFN in and out, each as often as it runs) take at this machine's best measured "
        "rate on each exact shape (int8 for int precisions, fp32 otherwise; torch, ORT and "
        "XNNPACK kernels, same threads; the attention core is left out, which only makes the bound "
        "stricter) — at W1, and for W2 at the median sentence's length "
        f"({report['settings'].get('w2_median_tokens', '?')} tokens; latency grows with "
        "length, so the median sentence is the one that takes the median time). "
        "W2 ÷ seq N: W2's median ÷ the sweep's p50 at the median length, the same work "
        "timed two ways: near 1 on albert-base; above 1 on a sub-millisecond model, where a "
        "new input shape every sentence costs what the one-shape sweep does not pay, or "
        "when the machine's slow state hit the W2 pass. "
        "acc: SST-2 dev (872). load / peak RSS: the W1 process's session creation and its "
        "peak resident memory (the Python process with its runtime imported included).",
        "",
        f"Load average (1/5/15 min) when the run ended: {report['settings'].get('loadavg')} "
        "on 2 cores. Above ~2, other processes time-slice the run: p50s are then bimodal and "
        "not comparable across rows; the min column is the uncontended figure.",
        "",
    ]
    for model in dict.fromkeys(r.get("model") for r in rows):
        mine = [r for r in rows if r.get("model") == model]
        lines += [f"## {model}", ""]
        head = ["artifact", "MB", "size ÷ floor", "acc %", "load ms / peak RSS MB"]
        head += ["W1 p50 ms", "W1 min ms", "roof W1"]
        n_w2 = report["settings"].get("w2_median_tokens")
        head += ["W2 med ms", "roof W2", f"W2 ÷ seq {n_w2} p50"]
        head += [f"seq {s} p50 / min" for s in seq_lens if s != 128]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for art in dict.fromkeys(r["artifact"] for r in mine):
            by = {r["seq_len"]: r for r in mine if r["artifact"] == art}
            r0 = next(iter(by.values()))
            w1 = by.get(128, {})

            def p50(r: dict[str, Any], key: str = "p50") -> str:
                lat = r.get("latency_ms") or {}
                return f"{lat[key]:.2f}" if lat.get(key) is not None else "—"

            acc = r0.get("accuracy")
            cells = [
                art,
                f"{r0['file_bytes'] / 1e6:.2f}" if r0.get("file_bytes") else "—",
                f"{r0['ratio_to_floor']:.3f}" if r0.get("ratio_to_floor") else "—",
                f"{100 * acc:.2f}" if isinstance(acc, float) else "—",
                f"{w1['load_ms']:.0f} / {w1['peak_rss_bytes'] / 2**20:.0f}"
                if w1.get("load_ms") and w1.get("peak_rss_bytes")
                else "—",
                p50(w1),
                p50(w1, "min"),
                f"{w1['roofline_fraction']:.0%}" if w1.get("roofline_fraction") else "—",
                f"{r0['w2_median_ms']:.2f}" if r0.get("w2_median_ms") else "—",
                f"{r0['w2_roofline_fraction']:.0%}" if r0.get("w2_roofline_fraction") else "—",
                w2_vs_sweep(r0.get("w2_median_ms"), by.get(n_w2, {})),
            ]
            cells += [
                f"{p50(by.get(s, {}))} / {p50(by.get(s, {}), 'min')}" for s in seq_lens if s != 128
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines += verdicts(mine, seq_lens)
    return "\n".join(lines) + "\n"


def table_lens(report: dict[str, Any]) -> tuple[int, ...]:
    """The lengths the table shows: the run's ``--seq-lens`` (the sweep also timed W2's
    median length, which the table shows only through W2's own columns)."""
    s = report["settings"]
    if s.get("table_seq_lens"):
        return tuple(s["table_seq_lens"])
    return tuple(n for n in s["seq_lens"] if n != s.get("w2_median_tokens"))


def w2_vs_sweep(w2: float | None, row: dict[str, Any]) -> str:
    """W2's median ÷ the sweep's p50 at the median sentence's length: the two time the same
    work (the median sentence takes the median time), one over 300 lengths in blocks, one
    at one length back to back. Near 1 they agree. Well above 1: either the machine's slow
    state hit W2's pass (base int8 read 1.39 once, 1.01 when re-timed), or the model is so
    small that the per-call cost of a new input shape every sentence shows, which the
    sweep, repeating one shape, does not pay (the tiny model: 1.3-2.1 in every pass)."""
    p50 = (row.get("latency_ms") or {}).get("p50")
    return f"{w2 / p50:.2f}" if w2 and p50 else "—"


def verdicts(rows: Sequence[dict[str, Any]], seq_lens: Sequence[int]) -> list[str]:
    """The issue's bars, computed from the rows above (never typed in)."""

    def row(art: str, seq: int) -> dict[str, Any]:
        return next((r for r in rows if r["artifact"] == art and r["seq_len"] == seq), {})

    def p50(art: str, seq: int) -> float | None:
        return (row(art, seq).get("latency_ms") or {}).get("p50")

    def w2(art: str, key: str = "w2_median_ms") -> float | None:
        return next((r.get(key) for r in rows if r["artifact"] == art), None)

    out = ["Bars (issue 17), from the rows above:", ""]
    for ours in ("albert-edge onnx int8-dynamic", "albert-edge tflite int8-dynamic"):
        for peer in ("optimum int8", LITERT_PEER):
            w1a, w1b, w2a, w2b = p50(ours, 128), p50(peer, 128), w2(ours), w2(peer)
            why = next((r.get("reason") for r in rows if r["artifact"] == peer), None)
            miss = f"— ({peer} not measured: {first_sentence(str(why or 'not built'))})"
            r1 = f"{w1a / w1b:.2f}×" if w1a and w1b else "—"
            r2 = f"{w2a / w2b:.2f}×" if w2a and w2b else "—"
            out.append(f"- {ours} ÷ {peer}: W1 {r1}, W2 {r2}" if w1b else f"- {ours}: {miss}")
    for ours in ("albert-edge onnx int8-dynamic", "albert-edge tflite int8-dynamic"):
        w1r, w2r = row(ours, 128).get("roofline_fraction"), w2(ours, "w2_roofline_fraction")
        if w1r and w2r:
            out.append(
                f"- {ours} roofline: W1 {w1r:.0%} (bar 90 %: {'met' if w1r >= 0.9 else 'not met'}), "
                f"W2 {w2r:.0%} (bar 70 %: {'met' if w2r >= 0.7 else 'not met'})"
            )
    peer_w2 = w2(LITERT_PEER)
    for ours in ("albert-edge onnx int8-dynamic", "albert-edge tflite int8-dynamic"):
        n = next((r.get("w2_median_tokens") for r in rows if r["artifact"] == ours), None)
        bound = row(ours, n).get("roofline_bound_ms") if n else None
        if peer_w2 and bound:  # what the 0.2x bar asks of this machine, from the bound
            need = 0.2 * peer_w2
            out.append(
                f"- {ours}: W2 ≤ 0.2× {LITERT_PEER} means ≤ {need:.2f} ms; the weight GEMMs "
                f"alone take {bound:.2f} ms at {n} tokens on this machine, so the bar asks "
                f"for a W2 roofline fraction of {bound / need:.0%} or more"
            )
    for fast, slow in (
        ("albert-edge onnx int8-dynamic", "albert-edge onnx fp32"),
        ("albert-edge onnx int4", "albert-edge onnx fp32"),
        ("albert-edge onnx int4", "albert-edge onnx int8-dynamic"),
    ):
        pairs = {s: (p50(fast, s), p50(slow, s)) for s in seq_lens}
        timed = {s: (a, b) for s, (a, b) in pairs.items() if a is not None and b is not None}
        losses = [str(s) for s, (a, b) in timed.items() if a > b]
        lens = ", ".join(map(str, seq_lens))
        if timed and len(losses) == len(timed):  # never faster: say so, not "except at all"
            out.append(f"- {fast} slower than {slow} at every length ({lens})")
            continue
        where = "except at seq " + ", ".join(losses) if losses else "at every length"
        out.append(f"- {fast} faster than {slow} {where} ({lens})")
    return [*out, ""]


def first_sentence(reason: str) -> str:
    """The first sentence of a failure reason, whole: after the runtime's name when it
    is there (``load failed: UnsupportedError: <path>: ai_edge_litert cannot ...``),
    up to the first ``.`` or ``;`` that ends a sentence outside parentheses (the
    runtime's own message in parentheses keeps its full stops)."""
    start = reason.find("ai_edge_litert")
    text = reason[start:] if start >= 0 else reason
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        elif ch in ".;" and depth == 0 and (i + 1 == len(text) or text[i + 1].isspace()):
            return text[: i + 1] if ch == "." else text[:i]
    return text


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "precisions")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seq-lens", default="8,32,128,512")
    p.add_argument("--w2", type=int, default=300, help="SST-2 dev sentences for W2")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3, help="bench() rounds (1: resumable)")
    p.add_argument(
        "--w2-rounds",
        type=int,
        default=None,
        help="passes over the W2 sentences (default: --rounds; W2 is interleaved block by "
        "block, so a few passes suffice even where the sweep needs many rounds)",
    )
    p.add_argument("--base", action="store_true", help="also albert-base (random init)")
    p.add_argument("--no-peers", action="store_true")
    p.add_argument("--build-only", action="store_true", help="build every artifact, time nothing")
    p.add_argument("--no-tflite", action="store_true")
    p.add_argument("--render", action="store_true", help="re-render precisions.md from the JSON")
    p.add_argument("--w2-server", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--w2-pad", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--w2-only", action="store_true", help="re-time W2 into precisions.json")
    a = p.parse_args(argv)
    if a.w2_server:
        w2_server(a.w2_server, a.threads, a.w2, a.w2_pad)
        return 0
    w2_only: dict[str, dict[str, float]] = {}
    seq_lens = tuple(int(x) for x in a.seq_lens.split(","))
    if a.render:
        report = json.loads((a.out / "precisions.json").read_text())
        (a.out / "precisions.md").write_text(markdown(report, table_lens(report)))
        return 0
    from albert_edge.data import read_sst2

    dev = read_sst2(DEV)
    sentences = [s for _, s in dev[: a.w2]]
    w2_len = w2_median_tokens(sentences)
    w2_rounds = max(1, a.w2_rounds if a.w2_rounds is not None else a.rounds)
    # W2's median sentence length is timed too: its roofline bound is W2's
    sweep = tuple(sorted(set(seq_lens) | {w2_len}))
    models: list[tuple[str, Path, bool]] = [("sst2-albert-tiny (trained)", TRAINED, True)]
    if a.base:
        from albert_edge.configs import make_random_checkpoint

        base = a.work / "albert-base-ckpt"
        if not (base / "config.json").is_file():
            make_random_checkpoint(base, "albert-base", spiece_model=SPIECE)
        models.append(("albert-base (random init)", base, False))

    all_rows: list[dict[str, Any]] = []
    report: dict[str, Any] = {}
    for label, ckpt, score in models:
        work = a.work / ckpt.name
        work.mkdir(parents=True, exist_ok=True)
        arts: list[tuple[str, str, Path]] = []  # (label, format, path)
        plan = [("onnx", p_) for p_ in ONNX]
        if not a.no_tflite:
            plan += [("tflite", p_) for p_ in TFLITE]
        for target, precision in plan:
            t0 = time.time()
            print(f"precisions: [{label}] building {target} {precision}", file=sys.stderr)
            arts.append(
                (f"albert-edge {target} {precision}", target, build(ckpt, work, target, precision))
            )
            print(f"  ... {time.time() - t0:.0f} s", file=sys.stderr)
        if not a.no_peers:
            from benchmarks.peers import Unavailable, build_optimum

            for variant in ("fp32", "int8"):
                try:
                    model = build_optimum(ckpt, work, variant)
                    for name in ("config.json", "spiece.model"):
                        if not (model.parent / name).is_file():
                            (model.parent / name).write_bytes((ckpt / name).read_bytes())
                    arts.append((f"optimum {variant}", "onnx", model))
                except Unavailable as exc:
                    print(f"precisions: optimum {variant}: {exc}", file=sys.stderr)
            try:  # the mobile peer (LITERT_PEER)
                from benchmarks.peers import build_litert_torch

                arts.append((LITERT_PEER, "tflite", build_litert_torch(ckpt, work, (128,))))
            except Exception as exc:  # a peer that cannot build is reported, not fatal
                print(f"precisions: {LITERT_PEER}: {exc}", file=sys.stderr)
        if a.build_only:
            continue
        w2 = w2_latencies([(n, path) for n, _, path in arts], len(sentences), a.threads, w2_rounds)
        if a.w2_only:
            w2_only[label] = w2
            continue
        targets = [resolve_target(path).with_(name=name) for name, _, path in arts]
        rep = bench(
            [t for t in targets if t.format == "onnx"]
            + [t for t in targets if t.format == "tflite"],
            backends=None,
            seq_lens=sweep,
            threads=(a.threads,),
            runs=a.runs,
            warmup=3,
            progress=True,
            # passes over all artifacts in turn: load that comes and goes hits all alike
            rounds=a.rounds,
            rows_path=None if a.rounds > 1 else work / "bench_rows.jsonl",  # resumable
        )
        # only the backend each format is meant for (bench may add GPU/other variants)
        rep["results"] = [
            r for r in rep["results"] if r["backend"] == BACKEND.get(r["format"], r["backend"])
        ]
        accs: dict[str, Any] = {}
        if score:
            for (name, fmt, _path), t in zip(arts, targets, strict=True):
                try:
                    res = accuracy(t, BACKEND[fmt], DEV, seq_len=128, threads=a.threads)
                except Exception as exc:  # a peer this runtime refuses: no accuracy, go on
                    print(f"precisions: accuracy skips {name}: {str(exc)[:300]}", file=sys.stderr)
                    res = {}
                accs[name] = res.get("accuracy")
            accs["checkpoint (PyTorch fp32)"] = accuracy(
                resolve_target(ckpt), "torch-fp32", DEV, seq_len=128, threads=a.threads
            ).get("accuracy")
        for r in rep["results"]:
            r["model"] = label
            r["w2_median_ms"] = w2.get(r["artifact"])
            r["accuracy"] = accs.get(r["artifact"])
        w2_roofline(rep["results"], w2_len)
        all_rows += rep["results"]
        report = {**rep, "results": all_rows}
        report.setdefault("extra", {})[label] = {
            "checkpoint_accuracy": accs.get("checkpoint (PyTorch fp32)")
        }
    if a.build_only:
        return 0
    if a.w2_only:  # re-time W2 into the existing report (sizes, rows, accuracy kept)
        report = json.loads((a.out / "precisions.json").read_text())
        for r in report["results"]:
            if r.get("model") in w2_only:
                r["w2_median_ms"] = w2_only[r["model"]].get(r["artifact"])
        w2_roofline(report["results"], w2_len)
        report["settings"]["w2_rounds"] = w2_rounds
        report["settings"]["w2_created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_outputs(report, json_out=a.out / "precisions.json")
        (a.out / "precisions.md").write_text(markdown(report, table_lens(report)))
        print((a.out / "precisions.md").read_text())
        return 0
    report["settings"]["table_seq_lens"] = list(seq_lens)  # --seq-lens, without W2's length
    report["settings"]["w2_sentences"] = len(sentences)
    report["settings"]["w2_median_tokens"] = w2_len
    report["settings"]["w2_rounds"] = w2_rounds  # w2_latencies' passes, above
    report["settings"]["loadavg"] = [round(x, 1) for x in os.getloadavg()]
    report["settings"]["tflite_signatures"] = list(TFLITE_BUCKETS)
    report = portable(report)  # committed: no path of this machine
    problems = validate_report(report)
    if problems:
        print("precisions: schema problems: " + "; ".join(problems[:5]), file=sys.stderr)
    a.out.mkdir(parents=True, exist_ok=True)
    write_outputs(report, json_out=a.out / "precisions.json", plot_out=a.out / "precisions.png")
    (a.out / "precisions.md").write_text(markdown(report, seq_lens))
    print((a.out / "precisions.md").read_text())
    print(json.dumps(report.get("extra"), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
