#!/usr/bin/env python
"""SkipLayerNormalization vs Sum + LayerNormalization: what the ``split_skip_ln`` pass buys.

ORT's fusions (the ``fuse`` pass) produce ``com.microsoft.SkipLayerNormalization``;
albert-edge then splits it into the standard Sum + LayerNormalization
(``albert_edge/onnx/passes/split_skip_ln.py``) because ORT's CPU kernel for the fused
op is several times slower. This script measures that claim on whole models, side by
side in one run: for each precision it builds the default artifact (split) through the
public ``albert_edge.convert`` API, writes the same graph with every split pair fused
back (the inverse onnxscript rule; nothing else differs), and times both through
:func:`albert_edge.bench.bench` at every ``--seq-lens`` and ``--threads``.

Outputs (``--out``, default ``benchmarks/results``): ``skip_layernorm.json`` (an
albert-edge-bench/1 report; rows carry ``graph``: "split" | "fused"),
``skip_layernorm.md``. Run: ``python benchmarks/skip_layernorm.py [--base]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("USE_TF", "0")

from albert_edge.bench import bench, resolve_target, validate_report, write_outputs  # noqa: E402
from albert_edge.bench.report import machine_line  # noqa: E402

TRAINED = ROOT / "albert_edge" / "models" / "sst2-albert-tiny"
PRECISIONS = ("fp32", "int8-dynamic", "int4")


def fuse_back(src: Path, dst: Path) -> int:
    """``src`` with every Sum → LayerNormalization pair fused into SkipLayerNormalization."""
    import onnx_ir as ir

    from albert_edge.onnx.passes.split_skip_ln import rules

    model = ir.load(src)
    n = rules(reverse=True).apply_to_model(model)
    model.opset_imports.setdefault("com.microsoft", 1)
    dst.parent.mkdir(parents=True, exist_ok=True)
    ir.save(model, dst)
    return int(n)


def markdown(report: dict[str, Any]) -> str:
    rows = report["results"]
    lines = [
        "# SkipLayerNormalization vs Sum + LayerNormalization (the split_skip_ln pass)",
        "",
        f"Machine: {machine_line(report)}. Measured by `benchmarks/skip_layernorm.py` in one "
        f"run; {report['created']}. Load average at the end: {report['settings'].get('loadavg')}.",
        "",
        "Same graph twice per precision: `split` is the default artifact, `fused` the same file "
        "with every Sum → LayerNormalization pair fused back into ORT's SkipLayerNormalization. "
        "p50 ms at batch 1; ratio = split ÷ fused (below 1: the split is faster).",
        "",
        "| model | precision | threads | seq | fused p50 ms | split p50 ms | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    key = lambda r: (r["model"], r["precision_label"], r["threads"], r["seq_len"])  # noqa: E731
    pairs: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        pairs.setdefault(key(r), {})[r["graph"]] = r
    for k, pair in pairs.items():
        f, s = (pair.get(g, {}).get("latency_ms", {}).get("p50") for g in ("fused", "split"))
        ratio = f"{s / f:.2f}" if f and s else "—"
        cells = [*map(str, k), f"{f:.2f}" if f else "—", f"{s:.2f}" if s else "—", ratio]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "skip_layernorm")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--seq-lens", default="8,32,128,512")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--base", action="store_true", help="also albert-base (random init)")
    p.add_argument("--render", action="store_true", help="re-render the Markdown from the JSON")
    a = p.parse_args(argv)
    if a.render:
        report = json.loads((a.out / "skip_layernorm.json").read_text())
        (a.out / "skip_layernorm.md").write_text(markdown(report))
        return 0
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    models: list[tuple[str, Path]] = [("sst2-albert-tiny", TRAINED)]
    if a.base:
        from albert_edge.configs import make_random_checkpoint

        base = a.work / "albert-base-ckpt"
        if not (base / "config.json").is_file():
            make_random_checkpoint(base, "albert-base", spiece_model=TRAINED / "spiece.model")
        models.append(("albert-base", base))
    rows: list[dict[str, Any]] = []
    report: dict[str, Any] = {}
    for label, ckpt in models:
        targets = []
        for prec in PRECISIONS:
            out = a.work / label / prec
            if not (out / "manifest.json").is_file():
                opts = ConvertOptions(target="onnx", precision=prec, verify=False, overwrite=True)
                convert(ckpt, out, opts)
            split = resolve_target(out)
            assert split.model_file is not None
            fused_file = a.work / label / f"{prec}-fused" / "model.onnx"
            n = fuse_back(split.model_file, fused_file)
            print(f"skip_layernorm: {label} {prec}: {n} pairs fused back", file=sys.stderr)
            targets += [
                split.with_(name=f"{label} {prec} split"),
                split.with_(name=f"{label} {prec} fused", model_file=fused_file),
            ]
        rep = bench(
            targets,
            backends=["ort-cpu"],
            seq_lens=[int(x) for x in a.seq_lens.split(",")],
            threads=[int(x) for x in a.threads.split(",")],
            runs=a.runs,
            warmup=3,
            roofline=False,
        )
        for r in rep["results"]:
            _, prec, graph = r["artifact"].rsplit(" ", 2)
            r.update(model=label, precision_label=prec, graph=graph)
        rows += rep["results"]
        report = {**rep, "results": rows}
    report["settings"]["loadavg"] = [round(x, 1) for x in os.getloadavg()]
    problems = validate_report(report)
    if problems:
        print("skip_layernorm: schema problems: " + "; ".join(problems[:5]), file=sys.stderr)
    a.out.mkdir(parents=True, exist_ok=True)
    write_outputs(report, json_out=a.out / "skip_layernorm.json")
    (a.out / "skip_layernorm.md").write_text(markdown(report))
    print((a.out / "skip_layernorm.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
