#!/usr/bin/env python
"""Where the int8 graph's time goes, beside the roofline bound (issue 17, item 4).

The roofline bound (``albert_edge/bench/roofline.py``) is the time albert-base's weight
GEMMs take at this machine's best measured rate on each exact shape. The default ONNX
int8-dynamic artifact takes longer; this script says by how much each kind of work
beyond those GEMMs costs, by timing the artifact beside copies with one kind of work
taken out (the outputs of the copies are wrong: they exist to be timed):

- ``-attention core``: every QAttention becomes its QKV product alone
  (MatMulInteger → scale → bias), so Q·Kᵀ, softmax and P·V (fp32 in ORT's QAttention,
  as in every runtime here) are gone but the QKV GEMM is kept;
- ``-GELU``: FastGelu becomes its bias Add;
- ``-LayerNorm``: LayerNormalization becomes Identity;
- ``-residual``: each residual Sum passes its first input through;
- ``GEMMs only``: all four at once: what is left is the weight GEMMs with their
  activation quantization, scaling and dispatch, i.e. what ORT's kernels make of the
  bound itself.

Each cost is full p50 − variant p50 (the parts are timed separately, so they need not
add up exactly). Timed through :func:`albert_edge.bench.bench` (a child process per
file, ``--rounds`` interleaved passes over all files) at W1 (seq 128) and at the median
SST-2 sentence length, on ``--threads`` threads. Outputs ``time_budget.json`` (an
albert-edge-bench/1 report) and ``time_budget.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

from albert_edge.bench import bench, resolve_target  # noqa: E402
from albert_edge.bench.report import machine_line  # noqa: E402
from benchmarks.script_report import p50, render, with_files_beside, write  # noqa: E402

REMOVES = {
    "-attention core": ("attention",),
    "-GELU": ("gelu",),
    "-LayerNorm": ("ln",),
    "-residual": ("residual",),
    "GEMMs only": ("attention", "gelu", "ln", "residual"),
}
SINGLE = [name for name, kinds in REMOVES.items() if len(kinds) == 1]  # one kind out each


def strip(model: Any, removes: Sequence[str]) -> Any:
    """A copy of the int8 graph with the named kinds of work taken out (see the module)."""
    import copy

    from onnx import helper

    m = copy.deepcopy(model)
    opset = max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), default=0)
    split3 = {"num_outputs": 3} if opset >= 18 else {}  # equal thirds either way
    nodes = []
    for n in m.graph.node:
        if "attention" in removes and n.op_type == "QAttention":
            # inputs: X, W, bias, X scale, W scale, mask, X zero point, W zero point
            x, w, b, xs, ws, _mask, xz, wz = (list(n.input) + [""] * 8)[:8]
            t = n.output[0]
            nodes += [
                helper.make_node("MatMulInteger", [x, w, xz, wz], [t + "_i32"]),
                helper.make_node("Cast", [t + "_i32"], [t + "_f"], to=1),
                helper.make_node("Mul", [xs, ws], [t + "_s"]),
                helper.make_node("Mul", [t + "_f", t + "_s"], [t + "_y"]),
                helper.make_node("Add", [t + "_y", b], [t + "_qkv"]),
                helper.make_node("Split", [t + "_qkv"], [t, t + "_k", t + "_v"], axis=-1, **split3),
            ]
            continue
        if "gelu" in removes and n.op_type == "FastGelu":
            nodes.append(helper.make_node("Add", list(n.input[:2]), list(n.output)))
            continue
        if ("ln" in removes and n.op_type == "LayerNormalization") or (
            "residual" in removes and n.op_type == "Sum"
        ):
            nodes.append(helper.make_node("Identity", [n.input[0]], list(n.output)))
            continue
        nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def build_variants(artifact: Path, ckpt: Path, work: Path) -> dict[str, Path]:
    import onnx

    model = onnx.load(artifact)
    out = {"full": artifact}
    for name, removes in REMOVES.items():
        folder = work / name.strip("-").replace(" ", "-")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / artifact.name
        onnx.save(strip(model, removes), path)
        with_files_beside(path, ckpt)
        out[name] = path
    return out


def budget(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per length: the bound, the full p50 and each kind of work's cost (from the rows)."""
    rows = report["results"]
    out = []
    for seq in sorted({r["seq_len"] for r in rows}):
        at = {r["artifact"]: r for r in rows if r["seq_len"] == seq}
        full = at.get("full", {})
        base = p50(full)
        bound = full.get("roofline_bound_ms")
        if base is None or bound is None:
            continue
        costs = {name: base - (p50(at[name]) or base) for name in SINGLE if name in at}
        gemms = p50(at.get("GEMMs only", {}))
        out.append(
            dict(seq_len=seq, bound_ms=bound, full_ms=base, gemms_only_ms=gemms, costs_ms=costs)
        )
    return out


def markdown(report: Mapping[str, Any]) -> str:
    s = report["settings"]
    lines = [
        "# Where the ONNX int8 graph's time goes (albert-base, issue 17)",
        "",
        f"Machine: {machine_line(report)}. Threads: {s['threads']}. Measured by "
        f"`benchmarks/studies/time_budget.py` through `bench()` ({s.get('rounds', 1)} interleaved "
        f"round(s): every file loaded once, the files timed in turn at each length, "
        f"{s['policy'].get('runs')} timed runs per row pooled); "
        f"{report['created']}. Load average at the end: {s.get('loadavg')}.",
        "",
        "The default `albert-edge convert --precision int8-dynamic` artifact of albert-base "
        "(random init) beside copies with one kind of work taken out (outputs wrong; timed "
        "only). bound: the weight GEMMs at this machine's best measured per-shape int8 rate "
        "(torch and ONNX Runtime kernels) "
        "(the roofline bound). cost of X: full p50 − p50 without X. GEMMs only: the copy "
        "with all four taken out — the weight GEMMs as ORT runs them (activation "
        "quantization, scaling, dispatch included).",
        "",
        "| seq | bound ms | full p50 ms | roofline | attention core | GELU | LayerNorm | "
        "residual Sum | GEMMs only ms | GEMMs only ÷ bound | ceiling without the four |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in report["budget"]:
        c = b["costs_ms"]
        g = b["gemms_only_ms"]
        lines.append(
            f"| {b['seq_len']} | {b['bound_ms']:.2f} | {b['full_ms']:.2f} | "
            f"{b['bound_ms'] / b['full_ms']:.0%} | "
            + " | ".join(
                f"{c[k]:.2f} ms ({c[k] / b['full_ms']:.0%})" if k in c else "—" for k in SINGLE
            )
            + f" | {g:.2f} | {g / b['bound_ms']:.2f}× | {b['bound_ms'] / g:.0%} |"
            if g
            else ""
        )
    lines += [
        "",
        "ceiling without the four: bound ÷ GEMMs-only p50, the roofline fraction the "
        "artifact would reach if attention core, GELU, LayerNorm and the residual cost "
        "nothing — the most any graph change can buy with ORT's kernels as they are.",
        "",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "time_budget")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=45)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--seq-lens", default="", help="default: 128 and the median SST-2 length")
    p.add_argument("--render", action="store_true", help="re-render the Markdown from the JSON")
    a = p.parse_args(argv)
    if a.render:
        return render(a.out, "time_budget", markdown)
    from albert_edge.configs import make_random_checkpoint
    from albert_edge.data import read_sst2
    from benchmarks import precisions

    ckpt = a.work / "albert-base-ckpt"
    if not (ckpt / "config.json").is_file():
        make_random_checkpoint(ckpt, "albert-base", spiece_model=precisions.SPIECE)
    folder = precisions.build(ckpt, a.work, "onnx", "int8-dynamic")
    artifact = next((folder / "onnx").glob("*.onnx"))
    if a.seq_lens:
        seqs = tuple(int(x) for x in a.seq_lens.split(","))
    else:
        sentences = [s for _, s in read_sst2(precisions.DEV)[:300]]
        seqs = (precisions.w2_median_tokens(sentences), 128)
    files = build_variants(artifact, ckpt, a.work / "variants")
    targets = [resolve_target(path).with_(name=name) for name, path in files.items()]
    print(f"time_budget: timing {len(targets)} files at seq {seqs}", file=sys.stderr)
    report = bench(
        targets,
        backends=["ort-cpu"],
        seq_lens=seqs,
        threads=(a.threads,),
        runs=a.runs,
        warmup=3,
        rounds=a.rounds,
        progress=True,
    )
    import os

    report["settings"]["loadavg"] = [round(x, 1) for x in os.getloadavg()]
    report["budget"] = budget(report)
    report["settings"]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return write(report, a.out, "time_budget", markdown)


if __name__ == "__main__":
    sys.exit(main())
