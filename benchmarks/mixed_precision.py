"""Precision per shared weight on the embedded SST-2 model: bytes, held-out loss, dev.

``python -m benchmarks.mixed_precision [--max-drop 0.5 --rows 1000]``:

1. the units of ``albert_edge/models/sst2-albert-tiny`` (:func:`albert_edge.mixed.prepare`);
2. the search (:func:`albert_edge.mixed.auto_plan`) on ``--rows`` seeded rows of SST-2
   train, with 1 in-process worker and with 2 local worker processes: wall time of each
   and whether the plans are the same;
3. the artifacts through the public API: fp32, ``int8-dynamic``, ``int4`` and the plan
   (``convert`` with the plan) — file bytes, and each scored on the held-out rows
   against the fp32 artifact (paired bootstrap, :mod:`albert_edge.depth.stats`) and on
   SST-2 dev (872 rows; report only, never used to choose);
4. the per-unit sensitivity table.

Caveats, printed with the results: the embedded model was trained from scratch (about
81 % dev, bag-of-words level) and its held-out rows come from SST-2 train, which it was
trained on. Outputs ``benchmarks/results/mixed_precision.{json,md}``; each stage is saved
as it finishes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("USE_TF", "0")

from albert_edge.convert import convert
from albert_edge.data import read_sst2
from albert_edge.mixed import Settings, auto_plan, convert_with_plan, prepare
from albert_edge.mixed.api import held_out_rows, make_setup
from albert_edge.mixed.plan import format_plan
from albert_edge.options import ConvertOptions
from benchmarks.mixed_trained import scored_row

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "sst2"
OUT = ROOT / "benchmarks" / "results"


def log(msg: str) -> None:
    print(f"mixed_precision: {msg}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    info = Path("/proc/cpuinfo").read_text()
    flags = [f for f in ("avx2", "avx512_vnni") if f" {f} " in info or f" {f}\n" in info]
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")),
        platform.processor(),
    )
    import re

    family = re.search(r"avx512_vnni|avx2", info)  # grep -o -m1 'avx512_vnni\|avx2'
    return {
        "cpu": cpu,
        "cpu_flags": flags,
        "kernel_family": family.group(0) if family else None,
        "cores": os.cpu_count(),
        "loadavg": os.getloadavg(),
    }


def save(report: dict[str, Any]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "mixed_precision.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (OUT / "mixed_precision.md").write_text(render(report))


def search_twice(prep: Any, a: argparse.Namespace, report: dict[str, Any]) -> dict[str, Any]:
    settings = Settings(max_drop=a.max_drop[0], min_lower_bound=a.min_lower_bound, rows=a.rows)
    opts = ConvertOptions(verify=False)
    runs = {}
    plans = {}
    for workers in (1, 2):
        log(f"search with {workers} worker(s) …")
        start = time.perf_counter()
        plan, result = auto_plan(
            prep, a.data, settings, opts, workers=workers, engine="local", progress=log
        )
        runs[str(workers)] = {
            "wall_s": round(time.perf_counter() - start, 2),
            "search_s": round(result.seconds, 2),
            "executor": result.executor,
            "loadavg": os.getloadavg(),
        }
        plans[workers] = plan
        report["search"] = runs
        save(report)
    same = [(u["tensor"], u["precision"]) for u in plans[1]["units"]] == [
        (u["tensor"], u["precision"]) for u in plans[2]["units"]
    ] and plans[1]["search"]["loss"] == plans[2]["search"]["loss"]
    report["search"]["same_plan"] = same
    report["plans"] = {str(a.max_drop[0]): plans[1]}
    save(report)
    return plans[1]


def ray_search(a: argparse.Namespace, report: dict[str, Any]) -> None:
    """Part ``ray``: the embedded model's first-budget search on a local Ray (``ray.init()``
    on this machine) with 1 and 2 workers, each beside the in-process plan: the same?"""
    from albert_edge.mixed import ray_available

    if not ray_available():
        report["ray"] = {"skipped": "ray is not installed (pip install 'albert-edge[ray]')"}
        return
    prep = prepare(None, ConvertOptions())
    settings = Settings(max_drop=a.max_drop[0], min_lower_bound=a.min_lower_bound, rows=a.rows)
    base = (report.get("plans") or {}).get(str(a.max_drop[0]))
    out: dict[str, Any] = {"loadavg_before": os.getloadavg(), "command": report["command"]}
    for workers in (1, 2):
        log(f"search on a local Ray with {workers} worker(s) …")
        start = time.perf_counter()
        plan, result = auto_plan(
            prep, a.data, settings, ConvertOptions(verify=False), workers=workers, engine="ray"
        )
        import ray

        # the pool starts a local Ray sized to its workers and leaves it running; a second
        # pool with more workers would find too few CPUs in it: each run starts its own
        ray.shutdown()
        out[str(workers)] = {
            "wall_s": round(time.perf_counter() - start, 2),
            "search_s": round(result.seconds, 2),
            "executor": result.executor,
            "loadavg": os.getloadavg(),
            "same_plan_as_in_process": base is not None
            and [(u["tensor"], u["precision"]) for u in plan["units"]]
            == [(u["tensor"], u["precision"]) for u in base["units"]]
            and plan["search"]["loss"] == base["search"]["loss"],
        }
        report["ray"] = out
        save(report)


def more_plans(prep: Any, a: argparse.Namespace, report: dict[str, Any]) -> None:
    for drop in a.max_drop[1:]:
        log(f"search at --max-drop {drop} …")
        s = Settings(max_drop=drop, min_lower_bound=a.min_lower_bound, rows=a.rows)
        plan, _ = auto_plan(prep, a.data, s, ConvertOptions(verify=False), progress=log)
        report["plans"][str(drop)] = plan
        save(report)


def static_plan(a: argparse.Namespace, cal: Path, report: dict[str, Any]) -> Any:
    """The int8-static recipe with a budget: which units keep their quantizers in float."""
    drop = min(a.max_drop)
    log(f"int8-static search at --max-drop {drop} …")
    opts = ConvertOptions(calibration=cal, verify=False)
    prep = prepare(None, opts, base="int8-static")
    s = Settings(max_drop=drop, min_lower_bound=a.min_lower_bound, rows=a.rows)
    plan, _ = auto_plan(prep, a.data, s, opts, progress=log)
    report["static_plans"] = {str(drop): plan}
    save(report)
    return prep


def artifacts(
    prep: Any, a: argparse.Namespace, report: dict[str, Any], static: Any, cal: Path
) -> None:
    """Every artifact scored on the held-out rows and dev against the fp32 artifact."""
    settings = Settings(max_drop=min(a.max_drop), rows=a.rows)
    held = held_out_rows(a.data, settings)
    dev = read_sst2(a.dev)
    setup_h = make_setup(prep, ConvertOptions(), held)
    setup_d = make_setup(prep, ConvertOptions(), dev)
    rows: dict[str, Any] = {}
    ref: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mixed-bench-") as tmp:
        names = ["fp32", "int8-dynamic", "int4", *(f"auto@{d}" for d in report["plans"])]
        names += ["int8-static", *(f"static@{d}" for d in report["static_plans"])]
        for name in names:
            log(f"build {name} …")
            out = Path(tmp) / name
            if name.startswith("auto@"):
                plan = report["plans"][name.removeprefix("auto@")]
                m = convert_with_plan(prep, out, ConvertOptions(), plan, "benchmark plan")
            elif name.startswith("static@"):
                plan = report["static_plans"][name.removeprefix("static@")]
                opts = ConvertOptions(calibration=cal)
                m = convert_with_plan(static, out, opts, plan, "benchmark plan")
            elif name == "int8-static":
                m = convert(prep.ckpt, out, ConvertOptions(precision=name, calibration=cal))
            else:
                m = convert(prep.ckpt, out, ConvertOptions(precision=name))
            data = (out / m["model_file"]).read_bytes()
            rows[name] = scored_row(setup_h, setup_d, data, m, ref)
            report["artifacts"] = rows
            save(report)


def render(r: dict[str, Any]) -> str:
    from benchmarks.mixed_trained import load_text
    from benchmarks.mixed_trained import render as render_trained

    m = r.get("machine", {})
    lines = [
        "# Precision per shared weight (`--precision auto`, int8-static with fallback)",
        "",
        f"Commands: the embedded model's part `{r.get('embedded_from')}`; the trained "
        f"model's `{(r.get('trained') or {}).get('command', '—')}`; Ray "
        f"`{(r.get('ray') or {}).get('command', '—')}`. "
        "Every model here is trained from scratch by albert-edge (about 80 % SST-2 dev, "
        "bag-of-words level), not a pretrained ALBERT.",
        "",
        *render_trained(r.get("trained") or {}),
        "# The embedded SST-2 model",
        "",
        f"Machine: {m.get('cpu')}, {m.get('cores')} cores, "
        f"CPU flags present: {m.get('cpu_flags')}, "
        f"load average at start {load_text(m.get('loadavg'))}.",
        "",
        "**Caveats.** The embedded model is trained from scratch (about 81 % SST-2 dev, "
        "bag-of-words level), and the held-out rows the plan is chosen on are drawn from "
        "SST-2 train, which this model was trained on: its losses on them understate what a "
        "model meeting those sentences for the first time would lose. Dev (872 rows, about "
        "±1.7 points at 95 %) is reported only, never used to choose.",
        "",
    ]
    if r.get("artifacts"):
        lines += [
            "## Artifacts (ONNX)",
            "",
            "Held-out and dev Δ = accuracy(artifact) − accuracy(fp32 artifact) on the same rows "
            "(paired bootstrap, 95 %), in points; auto@D is the plan searched with "
            "--max-drop D (its floor is the plan's).",
            "",
            "| artifact | file bytes | floor | ratio | integer weight MatMuls | held-out Δ [95 % CI] "
            "| dev acc % | dev Δ [95 % CI] |",
            "|---|---:|---:|---:|---:|---|---:|---|",
        ]
        for name, a in r["artifacts"].items():
            h, d = a["held_out_delta"], a["dev_delta"]
            lines.append(
                f"| {name} | {a['file_bytes']:,} | {a['floor_bytes']:,} | {a['ratio_to_floor']} | "
                f"{a.get('weight_matmuls_integer', '—')} | "
                f"{100 * h['delta']:+.2f} [{100 * h['low']:+.2f}, {100 * h['high']:+.2f}] | "
                f"{100 * a['dev_accuracy']['delta']:.2f} | "
                f"{100 * d['delta']:+.2f} [{100 * d['low']:+.2f}, {100 * d['high']:+.2f}] |"
            )
        lines.append("")
    if r.get("search"):
        s = r["search"]
        lines += ["## Search wall time", ""]
        for w in ("1", "2"):
            if w in s:
                lines.append(
                    f"- {w} worker(s) ({s[w]['executor']['kind']}): {s[w]['wall_s']} s "
                    f"(search {s[w]['search_s']} s; load average after {load_text(s[w]['loadavg'])})"
                )
        if "same_plan" in s:
            lines.append(f"- same plan from both: **{s['same_plan']}**")
        for w, x in sorted((r.get("ray") or {}).items()):
            if isinstance(x, dict) and "wall_s" in x:
                lines.append(
                    f"- Ray, {w} worker(s) (`ray.init()` on this machine, its start included): "
                    f"{x['wall_s']} s (search {x['search_s']} s; load average after "
                    f"{load_text(x['loadavg'])}); same plan as in-process: "
                    f"**{x['same_plan_as_in_process']}**"
                )
        if (r.get("ray") or {}).get("skipped"):
            lines.append(f"- Ray: {r['ray']['skipped']}")
        lines += [
            "",
            "The machine has 2 cores shared with other work; the 2-worker time includes "
            "starting two Python processes (spawn) that import ONNX Runtime and the quantizer.",
            "",
        ]
    for drop, plan in (r.get("plans") or {}).items():
        lines += [f"## The plan at --max-drop {drop} and each unit's sensitivity", ""]
        lines += [format_plan(plan), ""]
    for drop, plan in (r.get("static_plans") or {}).items():
        lines += [
            f"## int8-static with fallback at --max-drop {drop}",
            "",
            "Calibration: the last 128 rows of SST-2 train (unlabelled use; they may overlap "
            "the held-out rows). fp32 = the unit's nodes excluded from quantize_static "
            "(its activation quantizers too).",
            "",
            format_plan(plan),
            "",
        ]
    return "\n".join(lines)


def run_trained(a: argparse.Namespace, report: dict[str, Any]) -> None:
    """Part ``trained`` (and ``latency``): a model trained here whose held-out rows it never
    saw (:mod:`benchmarks.mixed_trained`)."""
    from benchmarks import mixed_trained as mt

    sec: dict[str, Any] = report.setdefault("trained", {})
    sec.update(measured=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), machine=machine())
    sec["command"] = report["command"]

    def save_now() -> None:
        save(report)

    work = a.work
    work.mkdir(parents=True, exist_ok=True)
    sp = mt.split(a, work)
    sec["split"] = {k: v for k, v in sp.items() if k != "files"}
    files = sp["files"]
    sec["training"] = mt.train(a, work, files)
    save_now()
    a.trained_model = work / "model"
    held, cal = Path(files["held"]), Path(files["calibration"])
    prep = prepare(a.trained_model, ConvertOptions())
    sec["targets"] = targets_note(a, prep)
    if "trained" in a.parts:
        mt.plans(a, prep, held, sec, save_now)
        static = mt.static_fallback(a, cal, held, sec, save_now)
        depth = mt.depth_plan(a, files, sec, save_now, work)
    else:
        static = prepare(a.trained_model, ConvertOptions(calibration=cal), base="int8-static")
        depth = mt.depth_plan(a, files, sec, save_now, work) if sec.get("depth") else None
    ctx = {"held": held, "cal": cal, "work": work, "depth": depth}
    paths = mt.artifacts(a, prep, static, ctx, sec, save_now)
    if "latency" in a.parts:
        mt.latency(a, paths, sec, save_now, work)


TFLITE_ROWS = (
    "measured by python -m benchmarks.mixed_precision_tflite "
    "(results/mixed_precision_tflite.md; the model that never saw its held-out rows: "
    "mixed_precision_tflite_trained.md)"
)


def targets_note(a: argparse.Namespace, prep: Any) -> dict[str, Any]:
    """``--targets``: this module measures the ONNX rows; TFLite plans have their own
    benchmark, which this record points to."""
    out: dict[str, Any] = {"onnx": "measured"}
    if "tflite" in a.targets:
        out["tflite"] = TFLITE_ROWS
    return out


def main() -> int:
    global OUT
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-drop", type=float, nargs="+", default=[0.5, 0.25])
    p.add_argument("--min-lower-bound", type=float, default=-1.5)
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--data", type=Path, default=SHARED / "train.tsv")
    p.add_argument("--dev", type=Path, default=SHARED / "dev.tsv")
    p.add_argument(
        "--parts",
        nargs="+",
        choices=("embedded", "ray", "trained", "latency"),
        default=["embedded", "trained", "latency"],
        help="embedded: the shipped model (held-out rows it was trained on); trained: a model "
        "trained here without its held-out rows; latency: W1/W2 of the trained model's "
        "artifacts. Parts not run keep the previous results file's values.",
    )
    p.add_argument(
        "--targets",
        nargs="+",
        choices=("onnx", "tflite"),
        default=["onnx"],
        help="tflite: the record points to benchmarks.mixed_precision_tflite, which measures it",
    )
    p.add_argument("--work", type=Path, default=Path("/tmp/albert-edge-mixed-bench"))
    p.add_argument("--split-seed", type=int, default=34)
    p.add_argument("--held-rows", type=int, default=2500)
    p.add_argument("--depth-rows", type=int, default=2000)
    p.add_argument("--train-rows", type=int, default=24000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--trained-max-drop", type=float, nargs="+", default=[0.5, 0.2])
    p.add_argument("--w1-rounds", type=int, default=6)
    p.add_argument("--w1-runs", type=int, default=60)
    p.add_argument("--w2", type=int, default=200)
    p.add_argument("--w2-rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=OUT, help="results directory")
    p.add_argument(
        "--render", action="store_true", help="rewrite the Markdown from the JSON, measure nothing"
    )
    a = p.parse_args()
    OUT = a.out
    if a.render:
        (OUT / "mixed_precision.md").write_text(
            render(json.loads((OUT / "mixed_precision.json").read_text()))
        )
        return 0
    previous = {}
    if (OUT / "mixed_precision.json").is_file():  # parts not run keep what they measured
        previous = json.loads((OUT / "mixed_precision.json").read_text())
    report: dict[str, Any] = {
        "command": "python -m benchmarks.mixed_precision " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "settings": {
            "max_drop": a.max_drop,
            "min_lower_bound": a.min_lower_bound,
            "rows": a.rows,
            "data": a.data.name,
            "dev": a.dev.name,
        },
    }
    if "embedded" not in a.parts:
        report.update({k: previous[k] for k in EMBEDDED_KEYS if k in previous})
        report["embedded_from"] = previous.get("embedded_from") or previous.get("command")
    else:
        report["embedded_from"] = report["command"]
        run_embedded(a, report)
    if "ray" in a.parts:  # beside the embedded part's in-process plan
        ray_search(a, report)
    if "trained" in a.parts or "latency" in a.parts:
        if "trained" not in a.parts:
            report["trained"] = previous.get("trained", {})
        run_trained(a, report)
    elif "trained" in previous:
        report["trained"] = previous["trained"]
    save(report)
    log(f"wrote {OUT / 'mixed_precision.md'}")
    return 0


EMBEDDED_KEYS = ("search", "plans", "static_plans", "artifacts", "machine", "settings", "ray")


def run_embedded(a: argparse.Namespace, report: dict[str, Any]) -> None:
    """Part ``embedded``: the shipped model, 1 vs 2 workers, plans, int8-static, artifacts."""
    log("prepare the embedded model …")
    prep = prepare(None, ConvertOptions())
    search_twice(prep, a, report)
    more_plans(prep, a, report)
    with tempfile.TemporaryDirectory(prefix="mixed-bench-cal-") as d:
        cal = Path(d) / "calibration.tsv"  # the last 128 rows of train: calibration text
        lines = a.data.read_text().splitlines()
        cal.write_text("\n".join([lines[0], *lines[-128:]]) + "\n")
        static = static_plan(a, cal, report)
        artifacts(prep, a, report, static, cal)


if __name__ == "__main__":
    sys.exit(main())
