#!/usr/bin/env python
"""SkipLayerNormalization vs Sum + LayerNormalization: what the ``split_skip_ln`` pass buys.

ORT's fusions (the ``fuse`` pass) produce ``com.microsoft.SkipLayerNormalization``;
albert-edge then splits it into the standard Sum + LayerNormalization
(``albert_edge/onnx/passes/split_skip_ln.py``) because ORT's CPU kernel for the fused
op is several times slower, and writes the projection's bias as its own Add
(``Sum(Add(x, bias), skip)``) so that ORT folds it into the quantized MatMul. This script
measures both claims on whole models, side by side in one run: for each precision it
builds the default artifact (``split``) through the public ``albert_edge.convert`` API and
writes two copies of the same graph where nothing else differs: ``fused``, every split
pair fused back (the pass's own rules, reversed), and ``sum3``, the bias moved back into
the Sum (``Sum(x, skip, bias)``, the split's form before 2026-11-23). All three are timed
through :func:`albert_edge.bench.bench` with ``--rounds`` interleaved passes at every
``--seq-lens`` and ``--threads``.

Outputs (``--out``, default ``benchmarks/results``): ``skip_layernorm.json`` (an
albert-edge-bench/1 report; rows carry ``graph``: "split" | "fused" | "sum3"),
``skip_layernorm.md``. Run: ``python -m benchmarks.studies.skip_layernorm [--base]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("USE_TF", "0")


from albert_edge.bench import bench, resolve_target, validate_report, write_outputs  # noqa: E402
from albert_edge.bench.report import machine_line  # noqa: E402
from benchmarks.script_report import built, reusable  # noqa: E402

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


def _bias_then_sum(op: Any, x: Any, bias: Any, skip: Any) -> Any:
    return op.Sum(op.Add(x, bias), skip)


def _sum3(op: Any, x: Any, bias: Any, skip: Any) -> Any:
    return op.Sum(x, skip, bias)


def _bias_is_constant(context: Any, x: Any, bias: Any, skip: Any, **_: Any) -> bool:
    return bias.const_value is not None


def bias_into_sum(src: Path, dst: Path) -> int:
    """``src`` with every residual ``Sum(Add(x, bias), skip)`` written ``Sum(x, skip, bias)``
    (a constant ``bias`` only): the split as it was before the bias got its own Add."""
    import onnx_ir as ir
    from onnxscript.rewriter import pattern

    model = ir.load(src)
    rule = pattern.RewriteRule(_bias_then_sum, _sum3, _bias_is_constant)
    n = pattern.RewriteRuleSet([rule]).apply_to_model(model)
    dst.parent.mkdir(parents=True, exist_ok=True)
    ir.save(model, dst)
    return int(n)


GRAPHS = ("fused", "sum3", "split")


def markdown(report: dict[str, Any]) -> str:
    rows = report["results"]
    lines = [
        "# SkipLayerNormalization vs Sum + LayerNormalization (the split_skip_ln pass)",
        "",
        f"Machine: {machine_line(report)}. Measured by `benchmarks/skip_layernorm.py` in one "
        f"run; {report['created']}. Load average at the end: {report['settings'].get('loadavg')}.",
        "",
        "The same graph three times per precision, nothing else differing: `split` is the "
        "default artifact (`LayerNormalization(Sum(Add(x, bias), skip))`), `fused` the same "
        "file with every pair fused back into ORT's SkipLayerNormalization, `sum3` the split "
        "with the bias inside the Sum (`Sum(x, skip, bias)`, the form before 2026-11-23). "
        f"Timed interleaved ({report['settings'].get('rounds', 1)} round(s): every file loaded "
        "once, visited in turn at each length). p50 ms at batch 1; a ratio below 1: the "
        "default split is faster. The min columns are the same ratios of the fastest run of "
        "each: where p50 and min disagree, the machine's slow state (benchmarks/README.md, "
        '"Stability") landed on the row\'s visits unevenly, and only the min compares.',
        "",
        "| model | precision | threads | seq | fused | sum3 | split | split ÷ fused "
        "| split ÷ sum3 | split ÷ fused (min) | split ÷ sum3 (min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    key = lambda r: (r["model"], r["precision_label"], r["threads"], r["seq_len"])  # noqa: E731
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        groups.setdefault(key(r), {})[r["graph"]] = r
    for k, group in groups.items():
        lat = {g: (group.get(g) or {}).get("latency_ms") or {} for g in GRAPHS}

        def ratio(other: str, stat: str = "p50") -> str:
            a, b = lat["split"].get(stat), lat[other].get(stat)  # noqa: B023
            return f"{a / b:.2f}" if a and b else "—"

        cells = [*map(str, k)]
        cells += [f"{lat[g]['p50']:.2f}" if lat[g].get("p50") else "—" for g in GRAPHS]
        cells += [ratio("fused"), ratio("sum3"), ratio("fused", "min"), ratio("sum3", "min")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "skip_layernorm")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--seq-lens", default="8,32,128,512")
    p.add_argument("--runs", type=int, default=21)
    p.add_argument("--rounds", type=int, default=3, help="interleaved passes (bench rounds)")
    p.add_argument("--base", action="store_true", help="also albert-base (random init)")
    p.add_argument("--render", action="store_true", help="re-render the Markdown from the JSON")
    a = p.parse_args(argv)
    if a.render:
        saved = json.loads((a.out / "skip_layernorm.json").read_text())
        (a.out / "skip_layernorm.md").write_text(markdown(saved))
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
            if not reusable(out):  # built by this source, or built again
                opts = ConvertOptions(target="onnx", precision=prec, verify=False, overwrite=True)
                convert(ckpt, out, opts)
                built(out)
            split = resolve_target(out)
            assert split.model_file is not None
            fused_file = a.work / label / f"{prec}-fused" / "model.onnx"
            n = fuse_back(split.model_file, fused_file)
            sum3_file = a.work / label / f"{prec}-sum3" / "model.onnx"
            m = bias_into_sum(split.model_file, sum3_file)
            print(
                f"skip_layernorm: {label} {prec}: {n} pairs fused back, {m} biases into the Sum",
                file=sys.stderr,
            )
            if not n or not m:  # a copy equal to the split would time nothing
                print(
                    f"skip_layernorm: {split.model_file} has no split residual to rewrite "
                    f"({n} fused back, {m} biases moved); was it built by the split_skip_ln "
                    "pass? Delete benchmarks/_work/skip_layernorm and run again.",
                    file=sys.stderr,
                )
                return 1
            targets += [
                split.with_(name=f"{label} {prec} split"),
                split.with_(name=f"{label} {prec} fused", model_file=fused_file),
                split.with_(name=f"{label} {prec} sum3", model_file=sum3_file),
            ]
        rep = bench(
            targets,
            backends=["ort-cpu"],
            seq_lens=[int(x) for x in a.seq_lens.split(",")],
            threads=[int(x) for x in a.threads.split(",")],
            runs=a.runs,
            warmup=3,
            roofline=False,
            rounds=a.rounds,
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
