#!/usr/bin/env python
"""Where the bytes of a TFLite artifact go, per tensor, at default flags (issue 17 item 1).

For every TFLite precision this converts through the public ``albert_edge.convert`` API
and reports, from :func:`albert_edge.tflite.inspect.byte_accounting` and
:func:`albert_edge.facts.tflite_facts` (the same functions ``inspect`` and the manifest
call): size ÷ floor, the bytes of every distinct constant buffer (dtype, shape, readers,
whether it is kept wider than the precision), the quantization tables, the metadata and
the graph (ops, tensors, signatures: the remainder).

Models: the trained SST-2 tiny model (``albert_edge/models/sst2-albert-tiny``) at default
flags (one signature, seq 128) and with the benchmark's three signatures (32, 128, 512,
as ``benchmarks/precisions.py`` builds them), with SST-2 dev accuracy (872 sentences,
LiteRT XNNPACK, as ``precisions.py`` measures it); and with ``--base`` an albert-base
shaped random checkpoint (sizes only).

``--label`` names the run (``before`` / ``after`` a change); runs accumulate in
``tflite_bytes.json`` and the Markdown shows them side by side. Run:
``python -m benchmarks.studies.tflite_bytes --label after [--base]``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SHARED = Path(os.environ.get("ALBERT_EDGE_SHARED", ROOT.parent / "shared"))
SPIECE = SHARED / "data" / "albert" / "30k-clean.model"
DEV = SHARED / "data" / "sst2" / "dev.tsv"
TRAIN = SHARED / "data" / "sst2" / "train.tsv"
TRAINED = ROOT / "albert_edge" / "models" / "sst2-albert-tiny"
PRECISIONS = ("fp32", "fp16", "int8-dynamic", "int8-full")
BARS = {"fp32": 1.02, "fp16": 1.02, "int8-dynamic": 1.05, "int8-full": 1.05}
TOP = 12  # buffer rows kept per artifact in the JSON (the rest summed)


def measure(ckpt: Path, work: Path, precision: str, seq_lens: tuple[int, ...]) -> dict[str, Any]:
    from albert_edge.convert import convert
    from albert_edge.facts import tflite_facts
    from albert_edge.options import ConvertOptions
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.inspect import analyze_model, byte_accounting

    out = work / f"{ckpt.name}-{precision}-{'_'.join(map(str, seq_lens)) or 'default'}"
    convert(
        ckpt,
        out,
        ConvertOptions(
            target="tflite",
            precision=precision,
            calibration=TRAIN if precision == "int8-full" else None,
            num_calibration=128,
            seq_lens=seq_lens,
            verify=False,
            overwrite=True,
        ),
    )
    path = out / "model.tflite"
    data = path.read_bytes()
    model = fb.read_model(data)
    report = analyze_model(model, len(data), data=data)
    facts = tflite_facts(report, path)
    acc = byte_accounting(model, len(data), precision, report["associated_files_bytes"])
    rows = acc.pop("buffers")
    acc["buffers_top"] = rows[:TOP]
    acc["buffers_rest"] = {"count": len(rows[TOP:]), "bytes": sum(r["bytes"] for r in rows[TOP:])}
    acc["kept_wide"] = [
        {k: r[k] for k in ("name", "dtype", "shape", "bytes", "readers")}
        for r in rows
        if r["kept_wide"]
    ]
    return {
        "precision": precision,
        "seq_lens": list(seq_lens) or "default (128)",
        "path": str(path),
        "floor_bytes": facts["floor_bytes"],
        "ratio_to_floor": facts["ratio_to_floor"],
        "bar": BARS[precision],
        "accounting": acc,
    }


def sst2_accuracy(path: str, threads: int) -> float | None:
    from albert_edge.bench import accuracy

    res = accuracy(Path(path), "litert-xnnpack", DEV, seq_len=128, threads=threads)
    return round(100 * float(res["accuracy"]), 2) if res.get("status") == "ok" else None


def cpu_flags() -> str:
    """The x86 SIMD flags that decide the int8 kernels (avx512_vnni, avx2), if listed."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split("flags", 2)[1].split("\n", 1)[0]
    except (OSError, IndexError):
        return ""
    return ", ".join(f for f in ("avx512_vnni", "avx2") if f in flags.split())


def base_checkpoint(work: Path) -> Path:
    from albert_edge.configs import make_config, make_random_checkpoint

    return make_random_checkpoint(
        work / "albert-base-random",
        make_config("albert-base"),
        head="sequence-classification",
        spiece_model=SPIECE,
    )


def markdown(report: dict[str, Any]) -> str:
    from albert_edge.bench.report import machine_line

    lines = [
        "# TFLite bytes per tensor, every precision at default flags (issue 17 item 1)",
        "",
        f"Machine: {machine_line(report)}; CPU flags: {report.get('cpu_flags') or '?'}. "
        "Built by `benchmarks/tflite_bytes.py`.",
        "",
        "size ÷ floor: file bytes ÷ (unique checkpoint parameters × bytes per parameter at "
        "the precision), `albert_edge.facts`. Columns: constant bytes (each distinct buffer "
        "once), kept wide (float constants > 1 KiB stored wider than the precision), "
        "quantization tables (float32 scales + int64 zero points, each distinct table once), "
        "graph (ops, tensors, names, signatures, alignment: the rest). acc: SST-2 dev "
        "(872), LiteRT XNNPACK.",
        "",
    ]
    for label, run in report["runs"].items():
        lines += [f"## {label}", "", run.get("note", ""), ""]
        lines += [
            "| model | signatures | precision | bytes | size ÷ floor | bar | constants | "
            "kept wide | quant tables | graph | acc % |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in run["rows"]:
            a = r["accounting"]
            ok = "✓" if r["ratio_to_floor"] <= r["bar"] else "✗"
            lines.append(
                f"| {r['model']} | {r['seq_lens']} | {r['precision']} | {a['file_bytes']:,} | "
                f"{r['ratio_to_floor']:.4f} {ok} | {r['bar']} | {a['constant_bytes']:,} | "
                f"{a['kept_wide_bytes']:,} | {a['quantization_table_bytes']:,} "
                f"({a['quantization_tables']}) | {a['graph_bytes']:,} | "
                f"{r.get('accuracy', '—') if r.get('accuracy') is not None else '—'} |"
            )
        lines.append("")
        for r in run["rows"]:
            if not r["accounting"]["kept_wide"] and r["model"] != "sst2-albert-tiny":
                continue
            a = r["accounting"]
            lines += [
                f"### {label}: {r['model']} {r['precision']} {r['seq_lens']} — largest buffers",
                "",
                "| bytes | dtype | shape | readers | tensor | kept wide |",
                "|---|---|---|---|---|---|",
            ]
            for b in a["buffers_top"]:
                lines.append(
                    f"| {b['bytes']:,} | {b['dtype']} | {b['shape']} | {', '.join(b['readers'])} "
                    f"| `{b['name'][:60]}` | {'yes' if b['kept_wide'] else ''} |"
                )
            rest = a["buffers_rest"]
            lines += [f"| {rest['bytes']:,} | | {rest['count']} more buffers | | | |", ""]
    if report.get("why_not"):
        lines += ["## What stays above the floor, and why", ""]
        lines += [f"- {w}" for w in report["why_not"]]
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--label", default="after")
    p.add_argument("--note", default="")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--base", action="store_true", help="also an albert-base shaped random model")
    p.add_argument("--no-trained", action="store_true", help="skip the trained tiny model")
    p.add_argument("--no-accuracy", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--precisions", default=",".join(PRECISIONS))
    a = p.parse_args()

    from albert_edge.bench.schema import machine_info

    a.out.mkdir(parents=True, exist_ok=True)
    jpath = a.out / "tflite_bytes.json"
    report = json.loads(jpath.read_text()) if jpath.is_file() else {"runs": {}}
    report["machine"] = machine_info()
    report["cpu_flags"] = cpu_flags()
    precisions = a.precisions.split(",")
    rows = []
    with tempfile.TemporaryDirectory(prefix="albert-edge-bytes-") as tmp:
        work = Path(tmp)
        plans: list[tuple[Path, tuple[int, ...], bool]] = []
        if not a.no_trained:
            plans += [(TRAINED, (), False), (TRAINED, (32, 128, 512), not a.no_accuracy)]
        if a.base:
            plans.append((base_checkpoint(work), (), False))
        for ckpt, seq_lens, with_acc in plans:
            for precision in precisions:
                row = measure(ckpt, work, precision, seq_lens)
                row["model"] = ckpt.name
                if with_acc:
                    row["accuracy"] = sst2_accuracy(row["path"], a.threads)
                row.pop("path")
                rows.append(row)
                print(
                    f"{ckpt.name} {precision} {seq_lens or 'default'}: "
                    f"{row['ratio_to_floor']:.4f} x floor, acc {row.get('accuracy')}",
                    flush=True,
                )
    run = report["runs"].setdefault(a.label, {"note": a.note, "rows": []})
    keep = {(r["model"], str(r["seq_lens"]), r["precision"]) for r in rows}
    run["rows"] = [
        r for r in run["rows"] if (r["model"], str(r["seq_lens"]), r["precision"]) not in keep
    ] + rows
    jpath.write_text(json.dumps(report, indent=2, default=str) + "\n")
    (a.out / "tflite_bytes.md").write_text(markdown(report))


if __name__ == "__main__":
    main()
