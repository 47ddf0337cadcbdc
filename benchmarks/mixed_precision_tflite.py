"""Precision per shared weight for TFLite (LiteRT) on the embedded SST-2 model.

``python -m benchmarks.mixed_precision_tflite [--max-drop 0.5 0.15 --rows 1000]``:

1. the units of the float flatbuffer (:func:`albert_edge.mixed.prepare` with
   ``--to tflite``) and the search (:func:`albert_edge.mixed.auto_plan`) at each
   ``--max-drop`` on ``--rows`` seeded rows of SST-2 train, in LiteRT;
2. ``int8-full`` with fallback at the smallest budget (which units' FULLY_CONNECTED ops
   stay float) and its share of compute ops on integers;
3. the artifacts through the public API: fp32, ``int8-dynamic``, every unit at int4 (a
   written plan: TFLite has no uniform int4 recipe), each searched plan, ``int8-full``
   and its fallback plan — file bytes against their floors, each scored in LiteRT on the
   held-out rows against the fp32 artifact (paired bootstrap,
   :mod:`albert_edge.depth.stats`) and on SST-2 dev (872 rows; report only).

Caveats, printed with the results: the embedded model was trained from scratch (about
81 % dev, bag-of-words level) and its held-out rows come from SST-2 train, which it was
trained on. ``--checkpoint DIR --data HELD.tsv --held-out-unseen --name STEM`` runs the same
on another checkpoint, e.g. the one ``benchmarks.mixed_precision --parts trained`` trains
without its held-out rows. Outputs ``benchmarks/results/mixed_precision_tflite.{json,md}``; each stage
is saved as it finishes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("USE_TF", "0")

from albert_edge.convert import convert
from albert_edge.data import read_sst2
from albert_edge.errors import NoPlanError
from albert_edge.facts import integer_op_share
from albert_edge.mixed import Settings, auto_plan, convert_with_plan, prepare, written_plan
from albert_edge.mixed.api import held_out_rows, make_setup
from albert_edge.mixed.plan import format_plan
from albert_edge.options import ConvertOptions
from albert_edge.tflite.inspect import inspect_tflite
from benchmarks.mixed_precision import machine
from benchmarks.mixed_trained import scored_row

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "sst2"
OUT = ROOT / "benchmarks" / "results"
NAME = "mixed_precision_tflite"


def log(msg: str) -> None:
    print(f"{NAME}: {msg}", file=sys.stderr, flush=True)


def save(report: dict[str, Any]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    name = report.get("name", NAME)
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (OUT / f"{name}.md").write_text(render(report))


def tflite(**kw: Any) -> ConvertOptions:
    return ConvertOptions(target="tflite", **kw)


def searches(a: argparse.Namespace, cal: Path, report: dict[str, Any]) -> tuple[Any, Any]:
    """The weight plans at each budget, then int8-full with fallback at the smallest."""
    prep = prepare(a.checkpoint, tflite(verify=False), base="int8-dynamic")
    report["units"] = [u.to_dict() for u in prep.units]
    report["plans"], report["full_plans"] = {}, {}
    for drop in a.max_drop:
        log(f"search at --max-drop {drop} …")
        s = Settings(max_drop=drop, min_lower_bound=a.min_lower_bound, rows=a.rows)
        start = time.perf_counter()
        plan, _ = auto_plan(prep, a.data, s, tflite(verify=False), progress=log)
        plan["search"]["wall_s"] = round(time.perf_counter() - start, 2)
        report["plans"][str(drop)] = plan
        save(report)
    drop = min(a.max_drop)
    log(f"int8-full search at --max-drop {drop} …")
    opts = tflite(precision="fp32", calibration=cal, num_calibration=a.calibration_rows)
    full = prepare(a.checkpoint, opts, base="int8-full")
    s = Settings(max_drop=drop, min_lower_bound=a.min_lower_bound, rows=a.rows)
    try:
        plan, _ = auto_plan(full, a.data, s, opts, progress=log)
        report["full_plans"][str(drop)] = plan
    except NoPlanError as exc:
        report["full_plans"][str(drop)] = {"no_plan": str(exc)}
    save(report)
    return prep, full


def build(
    name: str,
    prep: Any,
    full: Any,
    out: Path,
    a: argparse.Namespace,
    cal: Path,
    r: Any,
    verify: bool = True,
) -> Any:
    """Artifact ``name`` of the report (``fp32``, ``int8-dynamic``, ``int4``,
    ``int4-tensor``, ``auto@D``, ``int8-full``, ``int8-full@D``) written to ``out``."""
    full_opts = tflite(calibration=cal, num_calibration=a.calibration_rows, verify=verify)
    if name.startswith("auto@"):
        plan = r["plans"][name.removeprefix("auto@")]
        return convert_with_plan(prep, out, tflite(verify=verify), plan, "benchmark plan")
    if name.startswith("int8-full@"):
        plan = r["full_plans"][name.removeprefix("int8-full@")]
        return convert_with_plan(full, out, full_opts, plan, "benchmark plan")
    if name in ("int4", "int4-tensor"):  # the table in blocks along E, or with one scale
        table = {u.tensor: name for u in prep.units if name in u.candidates}
        plan = written_plan(prep.units, prep.identity, tflite(), table, "int4", "int8-dynamic")
        return convert_with_plan(prep, out, tflite(verify=verify), plan, "every unit at int4")
    if name == "int8-full":
        return convert(
            prep.ckpt,
            out,
            tflite(
                precision=name, calibration=cal, num_calibration=a.calibration_rows, verify=verify
            ),
        )
    return convert(prep.ckpt, out, tflite(precision=name, verify=verify))


def artifacts(
    prep: Any, full: Any, a: argparse.Namespace, cal: Path, report: dict[str, Any]
) -> None:
    """Every artifact scored in LiteRT on the held-out rows and dev against fp32's."""
    held = held_out_rows(a.data, Settings(max_drop=min(a.max_drop), rows=a.rows))
    setup_h = make_setup(prep, tflite(), held)
    setup_d = make_setup(prep, tflite(), read_sst2(a.dev))
    rows: dict[str, Any] = {}
    ref: dict[str, Any] = {}
    four = [
        "int4",
        *(["int4-tensor"] if any("int4-tensor" in u.candidates for u in prep.units) else []),
    ]
    names = ["fp32", "int8-dynamic", *four, *(f"auto@{d}" for d in report["plans"])]
    names += ["int8-full"]
    names += [f"int8-full@{d}" for d, p in report["full_plans"].items() if "no_plan" not in p]
    with tempfile.TemporaryDirectory(prefix="mixed-tflite-bench-") as tmp:
        for name in names:
            log(f"build {name} …")
            out = Path(tmp) / name
            m = build(name, prep, full, out, a, cal, report)
            path = out / m["model_file"]
            sizes = m["sizes"]
            rows[name] = {
                **scored_row(setup_h, setup_d, path.read_bytes(), m, ref),
                "model_bytes": sizes["file_bytes"] - sizes.get("associated_files_bytes", 0),
                "floor_precision": sizes["floor_precision"],
                "ratio_without_extra_signatures": sizes.get(
                    "ratio_to_floor_without_extra_signatures"
                ),
                "integer_ops": integer_op_share(inspect_tflite(path)),
                "plan": (m.get("precision_plan") or {}).get("summary"),
            }
            report["artifacts"] = rows
            save(report)


def latency(a: argparse.Namespace, report: dict[str, Any], cal: Path) -> None:
    """Part ``latency``: fp32, int8-dynamic, the searched plan at the smallest budget,
    every unit at int4 (when the plan differs), ``int8-full`` and ``int8-full`` with its
    fallback plan (when the search found one), built into ``--work`` by :func:`build` and
    timed by :func:`benchmarks.mixed_trained.latency` (W1 ``albert-edge bench --rounds``,
    W2 real SST-2 lengths) in LiteRT with XNNPACK, at each ``--threads``."""
    import shutil

    from benchmarks.mixed_trained import latency as timed

    work = a.work / report["name"]
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    prep = prepare(a.checkpoint, tflite(verify=False), base="int8-dynamic")
    full_opts = tflite(precision="fp32", calibration=cal, num_calibration=a.calibration_rows)
    full = prepare(a.checkpoint, full_opts, base="int8-full")
    drop = min(report["plans"], key=float)
    plan = report["plans"][drop]
    names = ["fp32", "int8-dynamic", f"auto@{drop}"]
    if any(u["precision"] != "int4" for u in plan["units"]):
        names.append("int4")
    names.append("int8-full")
    names += [f"int8-full@{d}" for d, p in report["full_plans"].items() if "no_plan" not in p]
    paths = {}
    for name in names:
        log(f"[latency] build {name} …")
        paths[name] = work / name
        build(name, prep, full, paths[name], a, cal, report, verify=False)
    section = report["latency"] = {"command": report["latency_command"]}
    for t in a.threads:
        timed(a, paths, section, lambda: save(report), work, backend="litert-xnnpack",
              threads=t, key=f"threads_{t}", skip=())  # fmt: skip
    save(report)


def _pts(d: dict[str, Any]) -> str:
    return f"{100 * d['delta']:+.2f} [{100 * d['low']:+.2f}, {100 * d['high']:+.2f}]"


def render(r: dict[str, Any]) -> str:
    m = r.get("machine", {})
    model = r.get("model") or {}
    unseen = bool(model.get("held_out_never_trained"))
    which = f"checkpoint `{model['checkpoint']}`" if model.get("checkpoint") else "the embedded"
    caveat = (
        "**Caveats.** This model is trained from scratch (about 80 % SST-2 dev, bag-of-words "
        "level) on SST-2 train rows that exclude the held-out rows the plan is chosen on "
        "(by row and by text: `benchmarks.mixed_precision --parts trained` made it and its "
        "held-out file)."
        if unseen
        else "**Caveats.** The embedded model is trained from scratch (about 81 % SST-2 dev, "
        "bag-of-words level), and the held-out rows the plan is chosen on are drawn from "
        "SST-2 train, which this model was trained on: its losses on them understate what a "
        "model meeting those sentences for the first time would lose."
    )
    lines = [
        f"# Precision per shared weight, TFLite / LiteRT ({which} SST-2 model)",
        "",
        f"Command: `{r.get('command')}`. Machine: {m.get('cpu')}, {m.get('cores')} cores, "
        f"CPU flags present: {m.get('cpu_flags')}, load average at start {m.get('loadavg')}.",
        "",
        caveat + " Dev (872 rows, about ±1.7 points at 95 %) is reported only, never used "
        "to choose.",
        "",
    ]
    if r.get("artifacts"):
        lines += [
            "## Artifacts (model.tflite, 4 signatures: 16, 32, 64, 128)",
            "",
            "Δ = accuracy(artifact) − accuracy(fp32 artifact) on the same rows, in LiteRT "
            "(paired bootstrap, 95 %), in points. model bytes = the file without its zip "
            "tail (spiece.model, labels); the floor of a plan is the plan's (no scales, as "
            "every floor: `albert_edge.facts`). ratio, 1 signature = without the recorded "
            "bytes of the short buckets (`sizes.extra_signature_bytes`), the bar's measure. "
            "int4 = every unit at int4 (a written plan), the word table in blocks along E "
            "(E = 64: a float16 scale per row); int4-tensor = the same with the table's one "
            "scale. Integer ops: compute ops on integers / all.",
            "",
            "| artifact | model bytes | floor | ratio | ratio, 1 signature | integer weight "
            "MatMuls | integer ops | held-out Δ [95 % CI] | dev acc % | dev Δ [95 % CI] |",
            "|---|---:|---:|---:|---:|---:|---:|---|---:|---|",
        ]
        for name, a in r["artifacts"].items():
            io = a.get("integer_ops") or {}
            lines.append(
                f"| {name} | {a['model_bytes']:,} | {a['floor_bytes']:,} | "
                f"{a['ratio_to_floor']} | {a.get('ratio_without_extra_signatures')} | "
                f"{a['weight_matmuls_integer']} | {io.get('integer_ops')}/{io.get('compute_ops')}"
                f" | {_pts(a['held_out_delta'])} | {100 * a['dev_accuracy']['delta']:.2f} | "
                f"{_pts(a['dev_delta'])} |"
            )
        lines.append("")
    lat = r.get("latency") or {}
    if lat:
        from benchmarks.mixed_trained import latency_lines

        lines += [
            "## Latency (LiteRT, XNNPACK)",
            "",
            f"Command: `{lat.get('command')}`. Each figure beside the load average of its "
            "part (2 cores shared with other work: min is the steadier figure).",
            "",
        ]
        for rec in lat.values():
            if isinstance(rec, dict):
                lines += [f"### {rec.get('threads')} thread(s)", "", *latency_lines(rec), ""]
    for drop, plan in (r.get("plans") or {}).items():
        lines += [f"## The plan at --max-drop {drop} and each unit's sensitivity", ""]
        lines += [f"Search wall time: {plan['search'].get('wall_s')} s (1 worker).", ""]
        lines += [format_plan(plan), ""]
    for drop, plan in (r.get("full_plans") or {}).items():
        lines += [f"## int8-full with fallback at --max-drop {drop}", ""]
        if "no_plan" in plan:
            lines += [plan["no_plan"], ""]
            continue
        lines += [
            "Calibration: the last rows of SST-2 train (unlabelled use). fp32 = the unit's "
            "FULLY_CONNECTED ops, or for `ops:KIND` every op of that kind, left in float "
            "(no_quantize entries: DEQUANTIZE before, QUANTIZE after). The revert order is "
            "each unit reverted alone from the all-integer plan, most recovered first.",
            "",
            format_plan(plan),
            "",
        ]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-drop", type=float, nargs="+", default=[0.5, 0.15])
    p.add_argument("--min-lower-bound", type=float, default=-1.5)
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--calibration-rows", type=int, default=64)
    p.add_argument("--data", type=Path, default=SHARED / "train.tsv")
    p.add_argument("--dev", type=Path, default=SHARED / "dev.tsv")
    p.add_argument("--checkpoint", type=Path, default=None, help="default: the embedded model")
    p.add_argument(
        "--calibration",
        type=Path,
        default=None,
        help="int8-full calibration rows (default: the last 256 rows of --data)",
    )
    p.add_argument(
        "--held-out-unseen",
        action="store_true",
        help="--data's rows were never trained on by --checkpoint (recorded, printed)",
    )
    p.add_argument("--name", default=NAME, help="results file stem (default: %(default)s)")
    p.add_argument(
        "--parts",
        nargs="+",
        choices=("plans", "latency"),
        default=["plans", "latency"],
        help="plans: searches and artifacts; latency: W1/W2 of fp32, int8-dynamic and the "
        "plan at the smallest budget. A part not run keeps the previous results file's values.",
    )
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--w1-rounds", type=int, default=6)
    p.add_argument("--w1-runs", type=int, default=60)
    p.add_argument("--w2", type=int, default=200)
    p.add_argument("--w2-rounds", type=int, default=2)
    p.add_argument("--work", type=Path, default=Path("/tmp/albert-edge-mixed-tflite-bench"))
    a = p.parse_args()
    command = "python -m benchmarks." + NAME + " " + " ".join(sys.argv[1:])
    previous = OUT / f"{a.name}.json"
    report: dict[str, Any] = (
        json.loads(previous.read_text()) if "plans" not in a.parts and previous.is_file() else {}
    )
    with tempfile.TemporaryDirectory(prefix="mixed-tflite-cal-") as tmp:
        cal = a.calibration
        if cal is None:
            lines = a.data.read_text().splitlines()
            cal = Path(tmp) / "calibration.tsv"
            cal.write_text("\n".join([lines[0], *lines[-256:]]) + "\n")
        if "plans" in a.parts:
            report = {
                "command": command,
                "machine": machine(),
                "name": a.name,
                "model": {
                    "checkpoint": a.checkpoint.name if a.checkpoint else None,
                    "held_out_never_trained": a.held_out_unseen,
                },
            }
            prep, full = searches(a, cal, report)
            artifacts(prep, full, a, cal, report)
            report["machine"]["loadavg_end"] = os.getloadavg()
            save(report)
        if "latency" in a.parts:
            if not report.get("plans"):
                log("latency needs the plans: run --parts plans first")
                return 2
            report["latency_command"] = command
            latency(a, report, cal)
    log(f"wrote {OUT / a.name}.{{json,md}}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
