#!/usr/bin/env python
"""What ONNX Runtime's non-GEMM ops cost at a small model's shape, in each form a graph
could write them: the LayerNorm + residual and the GELU of an H256 ALBERT layer, alone.

Why: on the held-out H256 E64 model (``python -m benchmarks.onnx_scaling --checkpoint
DIR --split-attention``, docs/onnx-speed.md "The H256 model, op by op") ORT's int8 GEMMs
run at XNNPACK's speed at one thread, and what it spends beyond LiteRT is in
LayerNormalization, FastGelu, the standalone DynamicQuantizeLinear and the embedding,
none of which gains from a second thread. Whether another form of the same op is
cheaper is a graph-level question this script answers op by op, without a model:

- ``sumln``: ``Sum(x, r)`` + ``LayerNormalization`` (albert-edge's residual form);
  ``addln``: the same with ``Add`` (run at ``ORT_ENABLE_BASIC``, so ORT does not fuse
  it back); ``skipln``: the contrib ``SkipLayerNormalization``; ``ln``: the
  ``LayerNormalization`` alone.
- ``fastgelu``: contrib ``FastGelu`` with its bias input (the form ORT's fusion leaves
  in albert-edge's int8 graph); ``fastgelu-nobias``: without it (the bias then folds into
  the GEMM before it); ``gelu-tanh``: ONNX ``Gelu`` (opset 20, ``approximate="tanh"``, the
  same function); ``gelu-erf``: contrib ``Gelu`` (erf: another function, for scale);
  ``biasgelu``: contrib ``BiasGelu`` (erf, with bias).

Each graph chains ``--layers`` copies (12 LayerNorms, 6 GELUs: the H256 6-layer model's
counts) on ``[1, 128, H]`` (``[1, 128, FFN]`` for the GELUs), fp32, random inputs.
Every form is one session in this process, timed in ``--rounds`` interleaved blocks of
``--runs`` at 1 and at 2 intra-op threads; per form its min and p50 over all runs and
per round. The load average is recorded before each round. Run: ``python -m
benchmarks.onnx_h256_profile [--hidden 256 --ffn 512]``; writes
``benchmarks/results/onnx_h256_ops[-NAME].{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

FORMS = {
    "sumln": "Sum(x, r) + LayerNormalization (albert-edge's residual form)",
    "addln": "Add(x, r) + LayerNormalization (ORT_ENABLE_BASIC: not fused back)",
    "skipln": "contrib SkipLayerNormalization",
    "ln": "LayerNormalization alone",
    "fastgelu": "contrib FastGelu(x, bias) (the int8 graph's form)",
    "fastgelu-nobias": "contrib FastGelu(x) (bias folded into the GEMM before it)",
    "gelu-tanh": 'ONNX Gelu, opset 20, approximate="tanh" (the same function)',
    "gelu-erf": "contrib Gelu (erf: another function)",
    "biasgelu": "contrib BiasGelu(x, bias) (erf)",
}
NORM_FORMS = ("sumln", "addln", "skipln", "ln")
MS = "com.microsoft"


def log(msg: str) -> None:
    print(f"onnx_h256_profile: {msg}", file=sys.stderr, flush=True)


def build(form: str, hidden: int, ffn: int, layers: int) -> tuple[Any, dict[str, Any]]:
    """(ONNX ModelProto, feeds) of ``layers`` chained copies of ``form``'s op(s)."""
    import numpy as np
    import onnx
    from onnx import TensorProto
    from onnx import helper as h

    if form not in FORMS:
        raise ValueError(f"unknown form {form!r}: one of {', '.join(FORMS)}")
    rng = np.random.default_rng(0)
    width = hidden if form in NORM_FORMS else ffn
    shape = [1, 128, width]

    def init(name: str, values: Any) -> Any:
        return onnx.numpy_helper.from_array(values.astype(np.float32), name)

    inits = [
        init("gamma", rng.normal(1, 0.1, hidden)),
        init("beta", rng.normal(0, 0.1, hidden)),
        init("bias", rng.normal(0, 0.1, ffn)),
    ]
    inputs = ["x", "r"] if form in ("sumln", "addln", "skipln") else ["x"]
    nodes = []
    x = "x"
    for i in range(layers):
        y = "y" if i == layers - 1 else f"t{i}"
        if form in ("sumln", "addln"):
            nodes.append(h.make_node("Sum" if form == "sumln" else "Add", [x, "r"], [f"s{i}"]))
            nodes.append(
                h.make_node(
                    "LayerNormalization", [f"s{i}", "gamma", "beta"], [y], axis=-1, epsilon=1e-12
                )
            )
        elif form == "skipln":
            nodes.append(
                h.make_node(
                    "SkipLayerNormalization",
                    [x, "r", "gamma", "beta"],
                    [y],
                    domain=MS,
                    epsilon=1e-12,
                )
            )
        elif form == "ln":
            nodes.append(
                h.make_node("LayerNormalization", [x, "gamma", "beta"], [y], axis=-1, epsilon=1e-12)
            )
        elif form == "fastgelu":
            nodes.append(h.make_node("FastGelu", [x, "bias"], [y], domain=MS))
        elif form == "fastgelu-nobias":
            nodes.append(h.make_node("FastGelu", [x], [y], domain=MS))
        elif form == "gelu-tanh":
            nodes.append(h.make_node("Gelu", [x], [y], approximate="tanh"))
        elif form == "gelu-erf":
            nodes.append(h.make_node("Gelu", [x], [y], domain=MS))
        else:
            nodes.append(h.make_node("BiasGelu", [x, "bias"], [y], domain=MS))
        x = y
    graph = h.make_graph(
        nodes,
        form,
        [h.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in inputs],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        inits,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 20), h.make_opsetid(MS, 1)])
    model.ir_version = 9
    feeds = {n: rng.normal(0, 1, shape).astype(np.float32) for n in inputs}
    return model, feeds


def session(model: Any, threads: int) -> Any:
    """A CPU session at ``ORT_ENABLE_BASIC`` (no fusion rewrites the form under test)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def measure(a: argparse.Namespace, forms: Sequence[str]) -> dict[str, Any]:
    """Per (form, threads): microseconds of every run, per round."""
    loads: list[list[float]] = []
    rows: dict[str, Any] = {}
    for threads in (1, 2):
        built = {}
        for form in forms:
            layers = a.layers * 2 if form in NORM_FORMS else a.layers
            model, feeds = build(form, a.hidden, a.ffn, layers)
            built[form] = (session(model, threads), feeds, layers)
        for sess, feeds, _ in built.values():
            for _ in range(a.warmup):
                sess.run(None, feeds)
        per_round: dict[str, list[list[float]]] = {f: [] for f in forms}
        for r in range(a.rounds):
            loads.append([round(v, 2) for v in os.getloadavg()])
            order = list(forms[r % len(forms) :]) + list(forms[: r % len(forms)])
            for form in order:
                sess, feeds, _ = built[form]
                us = []
                for _ in range(a.runs):
                    t0 = time.perf_counter()
                    sess.run(None, feeds)
                    us.append((time.perf_counter() - t0) * 1e6)
                per_round[form].append(us)
        for form, rounds in per_round.items():
            flat = [x for v in rounds for x in v]
            rows[f"{form}@{threads}"] = {
                "form": form,
                "threads": threads,
                "nodes": built[form][2] * (2 if form in ("sumln", "addln") else 1),
                "min_us": min(flat),
                "p50_us": statistics.median(flat),
                "round_min_us": [min(v) for v in rounds],
                "round_p50_us": [statistics.median(v) for v in rounds],
            }
    return {
        "load_before_round": loads,
        "after": [round(v, 2) for v in os.getloadavg()],
        "rows": rows,
    }


def markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    lines = [
        "# ONNX Runtime's non-GEMM ops at the H256 shape, form by form",
        "",
        f"`python -m benchmarks.onnx_h256_profile --hidden {s['hidden']} --ffn {s['ffn']} "
        f"--layers {s['layers']}` ({s['rounds']} interleaved rounds of {s['runs']} runs per "
        f"form and thread count, one process, ORT_ENABLE_BASIC; [1, 128, H] fp32). "
        f"{s['machine']}; onnxruntime {s['onnxruntime']}. Load average before each round "
        f"{report['load_before_round']}, after {report['after']}. Module docstring: the forms.",
        "",
        "| form | what | nodes | min us @1 | p50 us @1 | min us @2 | p50 us @2 | per node @1 (min) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    rows = report["rows"]
    for form in s["forms"]:
        one, two = rows[f"{form}@1"], rows[f"{form}@2"]
        lines.append(
            f"| {form} | {FORMS[form]} | {one['nodes']} | {one['min_us']:.0f} | "
            f"{one['p50_us']:.0f} | {two['min_us']:.0f} | {two['p50_us']:.0f} | "
            f"{one['min_us'] / (one['nodes'] // (2 if form in ('sumln', 'addln') else 1)):.1f} |"
        )
    return "\n".join([*lines, ""]) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--ffn", type=int, default=512)
    p.add_argument("--layers", type=int, default=6, help="GELUs; LayerNorms: twice this")
    p.add_argument("--forms", default=",".join(FORMS), help=f"of {','.join(FORMS)}")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--name", default="", help="output file suffix")
    a = p.parse_args(argv)
    forms = [f for f in a.forms.split(",") if f]
    bad = [f for f in forms if f not in FORMS]
    if bad:
        p.error(f"--forms: unknown form {bad[0]!r}; one of {','.join(FORMS)}")
    if min(a.hidden, a.ffn, a.layers, a.rounds, a.runs) < 1:
        p.error("--hidden, --ffn, --layers, --rounds and --runs must be at least 1")
    import onnxruntime

    from benchmarks import small_model_profile as smp

    m = smp.machine()
    settings = {
        **{k: v for k, v in vars(a).items() if k != "out"},
        "forms": forms,
        "machine": f"{m['cpu']}, {m['cores']} cores, kernel family {m['cpu_flag']}",
        "onnxruntime": onnxruntime.__version__,
    }
    report = {"settings": settings, **measure(a, forms)}
    stem = "onnx_h256_ops" + (f"-{a.name}" if a.name else "")
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / f"{stem}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    path.with_suffix(".md").write_text(markdown(report))
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
