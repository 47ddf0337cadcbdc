"""The precision-plan benchmark on a model whose held-out rows were never trained on.

Used by :mod:`benchmarks.mixed_precision` (``--parts trained latency``):

1. **split** (seed ``--split-seed``) of SST-2 train into rows never trained on — the
   held-out rows the plans are chosen on (``--data`` of ``convert --precision auto``) and
   the depth search's own rows — and the training rows (``--train-rows`` of the rest);
2. **train** a small ALBERT from scratch on the training rows only (``albert-edge train``,
   the embedded model's recipe and config, ``--epochs``; minutes on a loaded 2-core CPU);
3. **plans**: auto at each budget of ``--trained-max-drop``; int8-static with a budget
   below its own all-integer loss, so the search must keep some units in float; a depth
   search on its own rows and the auto plan at the depth its rule admits (the path of
   ``convert --depth K --depth-search DIR --precision auto``);
4. **artifacts**: fp32, int8-dynamic, int4 and every plan's, scored on the held-out rows
   against the fp32 artifact (paired bootstrap, :mod:`albert_edge.depth.stats`) and on
   SST-2 dev (report only);
5. **latency**: each plan's artifact beside int8-dynamic and int4 — W1 (batch 1, 128
   tokens) with ``albert-edge bench --rounds`` (each artifact resident in its own process,
   visited in turn; min beside p50) and W2 (SST-2 dev sentences at their own lengths,
   :func:`benchmarks.precisions.w2_latencies`, median), load average beside each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from albert_edge.convert import convert
from albert_edge.data import read_sst2
from albert_edge.depth import (
    FitSettings,
    Rule,
    SplitSettings,
    convert_at_depth,
    load_search,
    pick_depth,
    save_search,
    search_depths,
)
from albert_edge.depth.stats import accuracy_interval, paired_bootstrap
from albert_edge.errors import AlbertEdgeError, NoPlanError
from albert_edge.mixed import Settings, auto_plan, convert_auto, convert_with_plan, prepare
from albert_edge.mixed.api import make_setup
from albert_edge.mixed.evaluate import score
from albert_edge.options import ConvertOptions

Save = Callable[[], None]


def log(msg: str) -> None:
    print(f"mixed_precision: {msg}", file=sys.stderr, flush=True)


def _write_tsv(rows: list[tuple[int, str]], path: Path) -> Path:
    path.write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for y, t in rows))
    return path


def split(a: Any, work: Path) -> dict[str, Any]:
    """Seeded disjoint splits of SST-2 train: held-out (plans), depth search, training."""
    import numpy as np

    rows = read_sst2(a.data)
    order = np.random.default_rng(a.split_seed).permutation(len(rows)).tolist()
    n_h, n_d = a.held_rows, a.depth_rows
    # SST-2 train repeats some sentences: no training row may share a held-out or depth
    # row's text, so "never trained on" holds for the text, not only the row
    kept = {rows[i][1] for i in order[: n_h + n_d]}
    rest = [i for i in order[n_h + n_d :] if rows[i][1] not in kept]
    parts = {"held": order[:n_h], "depth": order[n_h : n_h + n_d], "train": rest[: a.train_rows]}
    files = {
        k: _write_tsv([rows[i] for i in sorted(v)], work / f"{k}.tsv") for k, v in parts.items()
    }
    cal = _write_tsv([rows[i] for i in sorted(parts["train"])[:128]], work / "calibration.tsv")
    assert not kept & {rows[i][1] for i in parts["train"]}
    return {
        "files": {**{k: str(v) for k, v in files.items()}, "calibration": str(cal)},
        "rows": {k: len(v) for k, v in parts.items()},
        "seed": a.split_seed,
        "disjoint": "by row and by text (no training sentence is a held-out or depth one)",
    }


def train(a: Any, work: Path, files: dict[str, str]) -> dict[str, Any]:
    """``albert-edge train`` from scratch on the training rows (kept in ``work/model``;
    a finished one with the same command is reused)."""
    out = work / "model"
    cmd = [sys.executable, "-m", "albert_edge.cli", "train", "--train", files["train"]]
    cmd += ["--dev", str(a.dev), "-o", str(out), "--epochs", str(a.epochs), "--seed", "13", "-q"]
    record = out / "training.json"
    facts_file = work / "training_facts.json"
    import hashlib

    rows_sha = hashlib.sha256(Path(files["train"]).read_bytes()).hexdigest()
    kept = json.loads(facts_file.read_text()) if facts_file.is_file() else {}
    if record.is_file() and kept.get("train_sha256") == rows_sha:
        log(f"reusing the model trained on these rows in {out}")
        return {**_training_facts(record), **kept, "reused": True}
    log(f"training from scratch on {a.train_rows} rows, {a.epochs} epoch(s) …")
    load0, t0 = os.getloadavg(), time.perf_counter()
    if out.exists():  # a model trained on other rows (this benchmark's own output)
        import shutil

        shutil.rmtree(out)
    subprocess.run(cmd, check=True)
    facts = _training_facts(record)
    facts["train_sha256"] = rows_sha
    facts.update(wall_s=round(time.perf_counter() - t0, 1), loadavg_before=load0)
    facts["loadavg_after"] = os.getloadavg()
    facts["command"] = "albert-edge " + " ".join(cmd[3:]).replace(str(work), "WORK")
    facts_file.write_text(json.dumps(facts))
    return facts


def _training_facts(record: Path) -> dict[str, Any]:
    t = json.loads(record.read_text())
    keep = ("train_examples", "dev_accuracy", "wall_time_s", "hyperparameters", "parameters")
    return {k: t.get(k) for k in keep}


def plans(a: Any, prep: Any, held: Path, section: dict[str, Any], save: Save) -> None:
    """The auto plan at each budget (bytes objective), on every held-out row."""
    section.setdefault("plans", {})
    for drop in a.trained_max_drop:
        log(f"[trained] auto search at --max-drop {drop} …")
        s = Settings(max_drop=drop, min_lower_bound=a.min_lower_bound, rows=a.held_rows)
        t0, load = time.perf_counter(), os.getloadavg()
        try:
            plan, _ = auto_plan(prep, held, s, ConvertOptions(verify=False), progress=log)
        except NoPlanError as exc:
            section["plans"][str(drop)] = {"no_plan": str(exc)}
            save()
            continue
        plan["search"]["bench_wall_s"] = round(time.perf_counter() - t0, 2)
        plan["search"]["loadavg_before"] = load
        section["plans"][str(drop)] = plan
        save()


def static_fallback(a: Any, cal: Path, held: Path, section: dict[str, Any], save: Save) -> Any:
    """int8-static with a budget below its all-integer loss: the search has to keep some
    units' quantizers in float. The budget is half that loss (at least the smallest the
    held-out rows can judge); a budget nothing meets is recorded and the next tried."""
    from albert_edge.mixed import min_rows
    from albert_edge.mixed.search import Settings as S

    opts = ConvertOptions(calibration=cal, verify=False)
    prep = prepare(a.trained_model, opts, base="int8-static")
    setup = make_setup(prep, opts, read_sst2(held))
    all_int = {u.tensor: "int8" for u in prep.units}
    from albert_edge.mixed.evaluate import build

    ref, _ = score(setup, build(setup, tuple(sorted((t, "fp32") for t in all_int))))
    got, _ = score(setup, build(setup, tuple(sorted(all_int.items()))))
    loss = paired_bootstrap(got, ref).to_dict()
    section["static_all_integer_loss"] = loss
    floor = next(d / 100 for d in range(1, 1000) if min_rows(d / 100) <= a.held_rows)
    lost, low = -100 * loss["delta"], 100 * loss["low"]
    if lost > floor:  # a point-loss budget below the all-integer loss
        tries = [(round(max(floor, lost * f), 2), a.min_lower_bound) for f in (0.5, 0.75, 0.9)]
    else:  # the point loss is below what these rows can judge: bound the interval instead
        tries = [(floor, round(low * f, 2)) for f in (0.5, 0.75, 0.9) if low < 0]
    section["static_budgets_tried"] = []
    for drop, bound in dict.fromkeys(tries):
        log(f"[trained] int8-static search at --max-drop {drop} --min-lower-bound {bound} "
            f"(all-integer: {lost:.2f} points lost, lower bound {low:.2f}) …")  # fmt: skip
        section["static_budgets_tried"].append({"max_drop": drop, "min_lower_bound": bound})
        s = S(max_drop=drop, min_lower_bound=bound, rows=a.held_rows)
        try:
            plan, _ = auto_plan(prep, held, s, opts, progress=log)
        except NoPlanError as exc:
            section.setdefault("static_no_plan", {})[f"{drop} / {bound}"] = str(exc)
            save()
            continue
        section["static_plans"] = {str(drop): plan}
        save()
        break
    return prep


def depth_plan(
    a: Any, files: dict[str, str], section: dict[str, Any], save: Save, work: Path
) -> tuple[Any, int] | None:
    """A depth search on its own rows, the depth its rule admits (else L-1, given), and the
    auto plan on the truncated model: ``convert --depth K --precision auto``'s path."""
    sdir = work / "depth-search"
    if (sdir / "seal.json").is_file():  # a search of an earlier model is searched again
        from albert_edge.depth.truncate import check_same_source

        try:
            check_same_source(a.trained_model, load_search(sdir))
        except AlbertEdgeError:
            import shutil

            shutil.rmtree(sdir)
    if not (sdir / "seal.json").is_file():
        log("[trained] depth search …")
        split_s = SplitSettings(
            fit_rows=a.depth_rows - a.depth_rows * 2 // 5, held_out_rows=a.depth_rows * 2 // 5
        )
        found = search_depths(
            a.trained_model, files["depth"], split=split_s, fit=FitSettings(epochs=2)
        )
        save_search(found, sdir)
    search = load_search(sdir)
    try:
        k, how = pick_depth(search, "auto", Rule())
    except AlbertEdgeError as exc:
        k, how = None, str(exc)
    layers = int(search.config["num_hidden_layers"])
    if k is None or k >= layers:
        k, how = layers - 1, f"given (the rule admitted no shallower depth: {how})"
    section["depth"] = {
        "depth": k,
        "of_layers": layers,
        "how": how,
        "search_data": search.data,
        "evidence": [vars(s) for s in search.scores if s.depth == k],
    }
    save()
    return search, k


def build_depth_artifact(a: Any, held: Path, search: Any, k: int, out: Path) -> dict[str, Any]:
    drop = a.trained_max_drop[0]
    s = Settings(max_drop=drop, min_lower_bound=a.min_lower_bound, rows=a.held_rows)

    def build(ckpt: Any, output: Any, options: Any) -> dict[str, Any]:
        return convert_auto(ckpt, output, options, held, s, progress=log)

    return convert_at_depth(a.trained_model, out, ConvertOptions(), search, k, build=build)


def artifacts(
    a: Any, prep: Any, static: Any, ctx: dict[str, Any], section: dict[str, Any], save: Save
) -> dict[str, Path]:
    """Every artifact: bytes, held-out Δ vs the fp32 artifact [95 %], dev (report only)."""
    held, cal, work = ctx["held"], ctx["cal"], ctx["work"]
    setup_h = make_setup(prep, ConvertOptions(), read_sst2(held))
    setup_d = make_setup(prep, ConvertOptions(), read_sst2(a.dev))
    builds: list[tuple[str, Callable[[Path], dict[str, Any]]]] = [
        (p, lambda out, p=p: convert(prep.ckpt, out, ConvertOptions(precision=p)))
        for p in ("fp32", "int8-dynamic", "int4")
    ]
    for drop, plan in (section.get("plans") or {}).items():
        if "units" in plan:
            builds.append(
                (
                    f"auto@{drop}",
                    lambda out, plan=plan: convert_with_plan(
                        prep, out, ConvertOptions(), plan, "benchmark plan"
                    ),
                )
            )
    scal = ConvertOptions(precision="int8-static", calibration=cal)
    builds.append(("int8-static", lambda out: convert(prep.ckpt, out, scal)))
    for drop, plan in (section.get("static_plans") or {}).items():
        builds.append(
            (
                f"static@{drop}",
                lambda out, plan=plan: convert_with_plan(
                    static, out, ConvertOptions(calibration=cal), plan, "benchmark plan"
                ),
            )
        )
    if ctx.get("depth"):
        search, k = ctx["depth"]
        builds.append(
            (
                f"auto@{a.trained_max_drop[0]} d{k}",
                lambda out: build_depth_artifact(a, held, search, k, out),
            )
        )
    rows: dict[str, Any] = {}
    paths: dict[str, Path] = {}
    ref: dict[str, Any] = {}
    for name, make in builds:
        log(f"[trained] build {name} …")
        out = work / "artifacts" / name.replace("@", "-").replace(" ", "-")
        if out.exists():
            import shutil

            shutil.rmtree(out)
        m = make(out)
        paths[name] = out
        rows[name] = _score_row(setup_h, setup_d, (out / m["model_file"]).read_bytes(), m, ref)
        section["artifacts"] = rows
        save()
    return paths


def scored_row(
    setup_h: Any, setup_d: Any, data: bytes, m: dict[str, Any], ref: dict[str, Any]
) -> dict[str, Any]:
    """An artifact (its bytes ``data``, its manifest ``m``) scored on the held-out rows
    and dev against the reference: sizes, verification, accuracies and paired Δs. The
    first artifact scored (fp32, in every benchmark) fills ``ref`` and is the reference."""
    h, _ = score(setup_h, data)
    d, _ = score(setup_d, data)
    if not ref:
        ref.update(held=h, dev=d)
    return {
        "file_bytes": m["sizes"]["file_bytes"],
        "floor_bytes": m["sizes"]["floor_bytes"],
        "ratio_to_floor": m["sizes"]["ratio_to_floor"],
        "verification": (m.get("verification") or {}).get("passed"),
        "held_out_accuracy": float(h.mean()),
        "held_out_delta": paired_bootstrap(h, ref["held"]).to_dict(),
        "dev_accuracy": accuracy_interval(d).to_dict(),
        "dev_delta": paired_bootstrap(d, ref["dev"]).to_dict(),
        "weight_matmuls_integer": f"{m['matmuls_quantized']}/{m['matmuls_total']}",
    }


def _score_row(
    setup_h: Any, setup_d: Any, data: bytes, m: dict[str, Any], ref: dict[str, Any]
) -> dict[str, Any]:
    row = {**scored_row(setup_h, setup_d, data, m, ref), "loadavg": os.getloadavg()}
    if "depth" in m:
        row["depth"] = f"{m['depth']['layers']}/{m['depth']['of_layers']}"
    if "precision_plan" in m:
        from albert_edge.mixed.plan import summary

        row["plan"] = summary(m["precision_plan"]["units"])
    return row


def _w1_row(results: list[dict[str, Any]], art: Path) -> dict[str, Any] | None:
    """The bench result of artifact directory ``art`` (bench names it by the path given)."""
    for r in results:
        given = str(r.get("artifact", ""))
        same = given in (str(art), art.name) or Path(given).resolve() == art.resolve()
        if same and r.get("status") == "ok" and r.get("latency_ms"):
            return {k: r["latency_ms"].get(k) for k in ("min", "p50", "mean", "p90", "runs")}
    return None


def latency(
    a: Any,
    paths: dict[str, Path],
    section: dict[str, Any],
    save: Save,
    work: Path,
    *,
    backend: str = "ort-cpu",
    threads: int = 1,
    key: str = "latency",
    skip: tuple[str, ...] = ("fp32",),
) -> None:
    """W1 with ``albert-edge bench --rounds`` (one resident process per artifact, visited in
    turn), then W2 (:func:`benchmarks.precisions.w2_latencies`), into ``section[key]``:
    every artifact of ``paths`` but ``skip``, on bench's ``backend`` with ``threads``."""
    names = [n for n in paths if n not in skip]
    out = work / f"bench-w1-{key}.json"
    cmd = [sys.executable, "-m", "albert_edge.cli", "bench", *(str(paths[n]) for n in names)]
    cmd += ["--backend", backend, "--seq-lens", "128", "--threads", str(threads)]
    cmd += ["--runs", str(a.w1_runs), "--rounds", str(a.w1_rounds), "--warmup", "5"]
    cmd += ["--json", str(out), "-q"]
    log(f"[latency] W1: {len(names)} artifacts, {threads} thread(s), {a.w1_rounds} rounds …")
    load0 = os.getloadavg()
    if out.exists():
        out.unlink()
    subprocess.run(cmd, check=True)
    results = json.loads(out.read_text())["results"]
    lat: dict[str, Any] = {
        "backend": backend,
        "threads": threads,
        "w1": {n: _w1_row(results, paths[n]) for n in names},
        "w1_loadavg_before": load0,
        "w1_loadavg_after": os.getloadavg(),
        "w1_rounds": a.w1_rounds,
        "w1_runs": a.w1_runs,
    }
    section[key] = lat
    save()
    from benchmarks.precisions import w2_latencies

    log(f"[latency] W2: {a.w2} dev sentences at their own length …")
    load0 = os.getloadavg()
    files = {n: paths[n] / json.loads((paths[n] / "manifest.json").read_text())["model_file"]
             for n in names}  # fmt: skip
    w2 = w2_latencies([(n, files[n]) for n in names], a.w2, threads, rounds=a.w2_rounds)
    lat.update(w2_median_ms=w2, w2_loadavg_before=load0, w2_loadavg_after=os.getloadavg())
    lat.update(w2_sentences=a.w2, w2_rounds=a.w2_rounds)
    save()


def load_text(x: Any) -> str:
    """A load average triple as the shell prints it."""
    return ", ".join(f"{v:.2f}" for v in x) if isinstance(x, list | tuple) else str(x)


def _iv(d: dict[str, Any]) -> str:
    return f"{100 * d['delta']:+.2f} [{100 * d['low']:+.2f}, {100 * d['high']:+.2f}]"


def _artifact_lines(rows: dict[str, Any]) -> list[str]:
    lines = [
        "| artifact | depth | file bytes | ratio to floor | integer weight MatMuls | held-out acc % "
        "| held-out Δ vs fp32, points [95 %] | dev acc % (report only) | dev Δ [95 %] |",
        "|---|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r.get('depth', 'full')} | {r['file_bytes']:,} | {r['ratio_to_floor']} "
            f"| {r['weight_matmuls_integer']} | {100 * r['held_out_accuracy']:.2f} "
            f"| {_iv(r['held_out_delta'])} | {100 * r['dev_accuracy']['delta']:.2f} "
            f"| {_iv(r['dev_delta'])} |"
        )
    return lines


def latency_lines(lat: dict[str, Any]) -> list[str]:
    """The Markdown of one :func:`latency` record: how it was timed, then a row per artifact
    (W1 min and p50, p50 against int8-dynamic's, W2 median)."""
    w1, w2 = lat.get("w1") or {}, lat.get("w2_median_ms") or {}
    threads = lat.get("threads", 1)
    lines = [
        f"W1: batch 1, 128 tokens, {threads} thread(s), `albert-edge bench --backend "
        f"{lat.get('backend', 'ort-cpu')} --rounds {lat.get('w1_rounds')} "
        f"--runs {lat.get('w1_runs')}` (each artifact resident in its own process, visited in "
        f"turn), load average {load_text(lat.get('w1_loadavg_before'))} → "
        f"{load_text(lat.get('w1_loadavg_after'))}. "
        f"W2: median over {lat.get('w2_sentences', '—')} SST-2 dev sentences at their own "
        f"length ({lat.get('w2_rounds', '—')} passes, block-interleaved resident processes, "
        "`benchmarks.precisions.w2_latencies`; median only), load average "
        f"{load_text(lat.get('w2_loadavg_before', '—'))} → {load_text(lat.get('w2_loadavg_after', '—'))}.",
        "",
        "| artifact | W1 min ms | W1 p50 ms | W1 p50 / int8-dynamic | W2 median ms |",
        "|---|---:|---:|---:|---:|",
    ]
    base = (w1.get("int8-dynamic") or {}).get("p50")
    for name in w1:
        r = w1[name] or {}
        ratio = f"{r['p50'] / base:.2f}" if r.get("p50") and base else "—"
        w2v = f"{w2[name]:.3f}" if name in w2 else "—"
        mn = f"{r['min']:.3f}" if r.get("min") is not None else "—"
        p50 = f"{r['p50']:.3f}" if r.get("p50") is not None else "—"
        lines.append(f"| {name} | {mn} | {p50} | {ratio} | {w2v} |")
    return lines


def render(sec: dict[str, Any]) -> list[str]:
    """The Markdown of the trained-model part."""
    from albert_edge.mixed.plan import format_plan

    if not sec:
        return []
    m, sp, tr = sec.get("machine", {}), sec.get("split", {}), sec.get("training", {})
    rows = sp.get("rows", {})
    lines = [
        "# A model whose held-out rows were never trained on",
        "",
        f"Measured {sec.get('measured')}; {m.get('cpu')}, {m.get('cores')} cores shared with "
        f"other work, CPU flags {m.get('cpu_flags')} (`grep -o -m1 'avx512_vnni\\|avx2' "
        f"/proc/cpuinfo` → {m.get('kernel_family', 'not recorded')}), load average at start "
        f"{load_text(m.get('loadavg'))}.",
        "",
        f"**The model** is trained here, from scratch (`albert-edge train`, the embedded "
        f"model's config and recipe, {tr.get('hyperparameters', {}).get('epochs')} epochs) on "
        f"{rows.get('train')} SST-2 train rows; SST-2 dev {100 * (tr.get('dev_accuracy') or 0):.2f} % "
        f"(bag-of-words level, like the embedded model; not a pretrained ALBERT). Training took "
        f"{tr.get('wall_s', tr.get('wall_time_s'))} s (load average "
        f"{load_text(tr.get('loadavg_before'))} before, {load_text(tr.get('loadavg_after'))} after): "
        "small on purpose, so that the benchmark trains it itself on a loaded 2-core CPU. "
        "**Held-out rows**: a seeded set of "
        f"{rows.get('held')} SST-2 train rows (seed {sp.get('seed')}) excluded from training "
        "by row and by text (SST-2 train repeats some sentences: no training row has a "
        "held-out row's text); "
        "every plan is chosen on them (`--data`, all rows). The depth search uses another "
        f"{rows.get('depth')} excluded rows. Dev (872 rows, ±1.7 points at 95 %) is reported "
        "only, never used to choose. Δ = accuracy(artifact) − accuracy(fp32 artifact) on the "
        "same rows, paired bootstrap 95 % (`albert_edge.depth.stats`).",
        "",
    ]
    if sec.get("targets"):
        lines += [f"Targets: {sec['targets']}.", ""]
    if sec.get("artifacts"):
        lines += [
            "## Artifacts (ONNX)",
            "",
            "auto@D: `--precision auto --max-drop D` (bytes objective); static@D: int8-static "
            "with fallback at budget D (below); auto@D dK: the auto plan searched on the model "
            "truncated to depth K (`convert --depth K --depth-search DIR --precision auto`). "
            "Held-out acc: on the held-out rows the plans were chosen on; dev: report only.",
            "",
            *_artifact_lines(sec["artifacts"]),
            "",
        ]
    if sec.get("latency"):
        lines += ["## Latency of each plan", "", *latency_lines(sec["latency"]), ""]
    for drop, plan in (sec.get("plans") or {}).items():
        lines += [f"## auto at --max-drop {drop}: the plan and each unit's sensitivity", ""]
        lines += [
            "Sensitivity: each unit alone at int8 / int4 (everything else fp32), points lost "
            "vs the fp32 graph on the held-out rows [95 %]; negative = gained.",
            "",
        ]
        lines += [plan.get("no_plan") or format_plan(plan), ""]
    lines += _static_lines(sec)
    if sec.get("depth"):
        d = sec["depth"]
        lines += [
            "## The auto plan at a depth",
            "",
            f"Depth {d['depth']} of {d['of_layers']} ({d['how']}); the depth search's own "
            f"held-out evidence (re-fitted head, {d['search_data'].get('held_out_rows')} rows, "
            f"vs full depth): {_depth_evidence(d.get('evidence') or [])}. The plan is searched on the truncated "
            f"model (`convert --depth {d['depth']} --depth-search DIR --precision auto`, at the "
            "first budget) and scored like every other artifact, against the full-depth fp32.",
            "",
        ]
    return lines


def _reverts(plan: dict[str, Any]) -> str:
    roles = {u["tensor"]: u["role"] for u in plan["units"]}
    steps = [
        f"{roles.get(r['tensor'], r['tensor'])} {r['from']} → {r['to']} (the plan before it "
        f"lost {r['plan_loss_points']:.2f} points)"
        for r in plan["search"].get("reverted") or []
    ]
    return "; then ".join(steps) or "nothing reverted"


def _depth_evidence(rows: list[dict[str, Any]]) -> str:
    for r in rows:
        if r.get("head") == "refit":
            return (
                f"{100 * r['held_out_accuracy']:.2f} %, Δ {100 * r['delta']:+.2f} "
                f"[{100 * r['delta_low']:+.2f}, {100 * r['delta_high']:+.2f}] points"
            )
    return "—"


def _static_lines(sec: dict[str, Any]) -> list[str]:
    from albert_edge.mixed.plan import format_plan

    lines: list[str] = []
    loss = sec.get("static_all_integer_loss")
    for drop, plan in (sec.get("static_plans") or {}).items():
        floats = [u["role"] for u in plan["units"] if u["precision"] == "fp32"]
        share = plan["search"].get("integer_matmul_share") or {}
        lines += [
            f"## int8-static with fallback at --max-drop {drop}",
            "",
            f"Every unit integer (plain int8-static): Δ {_iv(loss) if loss else '—'} points "
            f"on the held-out rows, outside the budget `--max-drop {drop} --min-lower-bound "
            f"{(sec.get('static_budgets_tried') or [{}])[-1].get('min_lower_bound')}` "
            "(chosen to be so): the search keeps "
            f"{len(floats)} unit(s) in float — {', '.join(floats) or 'none'} — and "
            f"{share.get('matmuls_quantized')}/{share.get('matmuls_total')} weight MatMuls "
            f"compute on integers (share {share.get('share')}). Calibration: 128 training rows. "
            "A unit stays in float where, alone, its integer form fails the budget (the "
            "greedy step; its row below), or through the revert loop, which moves the unit "
            "whose own loss is largest one step wider and re-validates the plan: "
            f"{_reverts(plan)}."
            + (
                " A table left in float is a Gather, not a MatMul: the integer MatMul share "
                "stays whole, while the bytes grow by the table's fp32 size."
                if any("table" in f for f in floats)
                else ""
            ),
            "",
            format_plan(plan),
            "",
        ]
    for drop, why in (sec.get("static_no_plan") or {}).items():
        lines += [f"int8-static at --max-drop {drop}: no plan ({why})", ""]
    return lines
