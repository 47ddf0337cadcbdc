#!/usr/bin/env python
"""Depth × precision on the embedded SST-2 model (issue 27): what a shallower ALBERT buys.

For ``albert_edge/models/sst2-albert-tiny`` (L=4, one shared layer) this script

1. runs the depth search (:func:`albert_edge.depth.search_depths`): a seeded split of
   SST-2 train rows into FIT (``--fit-rows``) and HELD-OUT (``--held-out-rows``); an exit
   head per depth, initialised from the model's pooler + classifier, fitted on FIT;
   every depth scored on HELD-OUT against the unchanged full-depth model (paired
   bootstrap 95 %); SST-2 dev scored for the record only;
2. builds, through the public API, every depth × precision artifact: depth L is today's
   artifact (``convert``, the model's own head), depth k < L is ``convert --depth k``
   (:func:`albert_edge.depth.convert_at_depth`: truncated checkpoint, re-fit head);
3. scores every artifact sentence by sentence on HELD-OUT and on dev (each paired with
   the full-depth PyTorch model on the same rows);
4. times all of them side by side: seq-128 p50 and min in ONE
   ``bench(rounds=--rounds)`` run (every artifact resident in its own process, visited in
   turn every round), and W2 (the median over ``--w2`` SST-2 dev sentences each at its
   own length, every artifact in its own resident process, block by block in turn:
   ``benchmarks/precisions.py``'s :func:`w2_latencies`, reused);
5. applies the choice rule (:func:`albert_edge.depth.choose`: held-out point loss <= 0.5
   and lower bound >= -1.5 points; fastest W2 among the admitted) and states the issue's
   bar: the pick >= 2x faster than today's full-depth int8 at W2, <= 0.5 point loss on
   dev (dev never used to choose).

``--pabee`` (a later run, added to the same files): the embedded model's config and
hyperparameters trained with PABEE's exit loss (``albert-edge train --exit-loss pabee``)
on the train rows outside the held-out split, searched (heads start from its trained
exits), built, scored and timed beside today's full-depth int8 of the embedded model; the
rule's pick and the bar against both references; ``--pabee-clients`` loads the pick in
optimum, transformers.js / onnxruntime-node and LiteRT.

Outputs: ``benchmarks/results/depth.json`` (albert-edge-bench/1 + ``depth`` keys) and
``depth.md``. ``--render`` re-renders the Markdown from the JSON. Run:
``python -m benchmarks.depth [--rounds 5 --runs 50]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_edge.bench import bench, resolve_target, validate_report  # noqa: E402
from albert_edge.bench.report import machine_line  # noqa: E402
from benchmarks.precisions import DEV, TRAIN, TRAINED, w2_latencies  # noqa: E402

BACKEND = {"onnx": "ort-cpu", "tflite": "litert-xnnpack"}
TFLITE_BUCKETS = (32, 128, 512)


def log(msg: str) -> None:
    print(f"depth: {msg}", file=sys.stderr, flush=True)


def get_search(work: Path, a: argparse.Namespace) -> Any:
    """The depth search, reused from ``work/search`` when its settings match."""
    from albert_edge.depth import (
        FitSettings,
        SplitSettings,
        load_search,
        save_search,
        search_depths,
    )

    split = SplitSettings(fit_rows=a.fit_rows, held_out_rows=a.held_out_rows, seed=a.seed)
    where = work / "search"
    if (where / "depth_search.json").is_file():
        from albert_edge.errors import AlbertEdgeError

        try:
            s = load_search(where)
        except AlbertEdgeError as exc:  # changed, or from before searches were sealed
            log(f"not reusing {where}: {exc}")
            s = None
        if s is not None and s.settings["split"] == vars(split) and "report" in s.reference:
            log(f"reusing the search in {where}")
            return s
    t0 = time.time()
    s = search_depths(TRAINED, TRAIN, split=split, fit=FitSettings(seed=a.seed), report=DEV)
    log(f"search: {time.time() - t0:.0f} s")
    save_search(s, where, overwrite=True)
    return s


def build_all(
    search: Any, work: Path, a: argparse.Namespace, model: Path = TRAINED, prefix: str = ""
) -> list[dict[str, Any]]:
    """Every depth × precision artifact of ``model``: (label, depth, target, precision, path)."""
    from albert_edge.convert import convert
    from albert_edge.depth import convert_at_depth
    from albert_edge.options import ConvertOptions

    full = int(search.config["num_hidden_layers"])
    plan = [("onnx", p) for p in a.precisions.split(",")]
    plan += [("tflite", p) for p in a.tflite.split(",") if p]
    arts = []
    for k in search.representable:
        for target, precision in plan:
            out = work / f"d{k}-{target}-{precision}"
            opts = ConvertOptions(
                target=target,
                precision=precision,
                seq_lens=TFLITE_BUCKETS if target == "tflite" else (),
                overwrite=True,
                verify=True,  # every artifact verified against its own (truncated) PyTorch model
            )
            t0 = time.time()
            if k == full:  # today's artifact: the model as it is
                convert(model, out, opts)
            else:
                convert_at_depth(model, out, opts, search, k)
            log(f"built {prefix}depth {k} {target} {precision} in {time.time() - t0:.0f} s")
            label = f"{prefix}depth {k}/{full} {target} {precision}"
            arts.append(
                {
                    "artifact": label,
                    "depth": k,
                    "target": target,
                    "precision": precision,
                    "path": out,
                }
            )
    return arts


def score_all(search: Any, arts: list[dict[str, Any]], threads: int) -> dict[str, Any]:
    """Held-out and dev accuracy of every artifact, paired with full-depth PyTorch; returns
    each artifact's dev correctness vector (by label), for pairing artifacts with each other."""
    from albert_edge.data import read_sst2
    from albert_edge.depth import paired_bootstrap
    from albert_edge.depth.evaluate import artifact_correct, held_out_rows
    from albert_edge.depth.search import unbits

    held = held_out_rows(search, TRAIN)
    dev = read_sst2(DEV)
    ref_held = unbits(search.reference["held_out_correct"])
    ref_dev = unbits(search.reference["report"]["correct"])
    seed = int(search.settings["split"]["seed"])
    vectors = {}
    for art in arts:
        t0 = time.time()
        for key, rows, ref in (("held_out", held, ref_held), ("dev", dev, ref_dev)):
            c = artifact_correct(art["path"], rows, threads=threads)
            if key == "dev":
                vectors[art["artifact"]] = c
            iv = paired_bootstrap(c, ref, seed=seed)
            art[f"{key}_accuracy"] = float(c.mean())
            art[f"{key}_delta"], art[f"{key}_low"], art[f"{key}_high"] = iv.delta, iv.low, iv.high
        log(
            f"scored {art['artifact']}: held-out {100 * art['held_out_accuracy']:.2f} %, "
            f"dev {100 * art['dev_accuracy']:.2f} % ({time.time() - t0:.0f} s)"
        )
    return vectors


def time_all(arts: list[dict[str, Any]], a: argparse.Namespace) -> dict[str, Any]:
    """W2 (interleaved block by block) then seq-128 in one bench(rounds) run."""
    from albert_edge.data import read_sst2

    n = min(a.w2, len(read_sst2(DEV)))
    w2 = w2_latencies([(x["artifact"], x["path"]) for x in arts], n, a.threads, a.rounds)
    targets = [resolve_target(x["path"]).with_(name=x["artifact"]) for x in arts]
    rep = bench(
        targets,
        backends=sorted(set(BACKEND.values())),
        seq_lens=(128,),
        threads=(a.threads,),
        runs=a.runs,
        warmup=3,
        rounds=a.rounds,
        roofline=False,
        progress=True,
    )
    rep["results"] = [r for r in rep["results"] if r["backend"] == BACKEND[r["format"]]]
    by = {x["artifact"]: x for x in arts}
    for r in rep["results"]:
        x = by[r["artifact"]]
        r.update({k: v for k, v in x.items() if k != "path"})
        r["w2_median_ms"] = w2.get(r["artifact"])
    rep["settings"].update(w2_sentences=n, w2_rounds=a.rounds, loadavg=os.getloadavg())
    return rep


def decide(rep: dict[str, Any], search: Any) -> dict[str, Any]:
    """The rule's pick (held-out evidence, W2 speed) and the issue's bar (dev, W2)."""
    from albert_edge.depth import Rule, choose

    rows = rep["results"]
    cands = [
        {
            **{
                k: r.get(k)
                for k in (
                    "artifact",
                    "depth",
                    "precision",
                    "target",
                    "w2_median_ms",
                    "file_bytes",
                    "held_out_accuracy",
                )
            },
            "delta": r["held_out_delta"],
            "delta_low": r["held_out_low"],
            "delta_high": r["held_out_high"],
        }
        for r in rows
    ]
    result = choose(cands, Rule(), speed_key="w2_median_ms")
    full = int(search.config["num_hidden_layers"])
    today = next(
        (
            r
            for r in rows
            if r["depth"] == full and r["target"] == "onnx" and r["precision"] == "int8-dynamic"
        ),
        None,
    )
    pick = result["chosen"]
    bar: dict[str, Any] = {"today": today and today["artifact"]}
    if pick and today:
        mine = next(r for r in rows if r["artifact"] == pick["artifact"])
        w2x = today["w2_median_ms"] / mine["w2_median_ms"]
        p128 = today["latency_ms"]["p50"] / mine["latency_ms"]["p50"]
        loss = -100 * mine["dev_delta"]
        loss_vs_today = 100 * (today["dev_accuracy"] - mine["dev_accuracy"])
        bar.update(
            pick=pick["artifact"],
            w2_speedup=w2x,
            seq128_speedup=p128,
            dev_loss_points=loss,
            dev_loss_vs_today_points=loss_vs_today,
            met=bool(w2x >= 2 and loss <= 0.5),
        )
    return {
        "rule": result["rule"],
        "chosen": pick,
        "bar": bar,
        "evidence": [{k: e.get(k) for k in ("artifact", "why_not")} for e in result["evidence"]],
    }


def per_depth_lines(rep: dict[str, Any]) -> list[str]:
    """Each depth's ONNX int8-dynamic against today's (full depth, same precision): the
    speed a depth buys and its held-out and dev evidence side by side (report only)."""
    rows = {
        r["depth"]: r
        for r in rep["results"]
        if r["target"] == "onnx" and r["precision"] == "int8-dynamic"
    }
    full = rows.get(max(rows)) if rows else None
    if not full or not full.get("w2_median_ms"):
        return []
    out = ["", "Per depth, ONNX int8-dynamic vs today's full-depth int8 (from the rows above):", ""]
    for k, r in sorted(rows.items()):
        w2, p50 = r.get("w2_median_ms"), (r.get("latency_ms") or {}).get("p50")
        out.append(
            f"- depth {k}: W2 {full['w2_median_ms'] / w2:.2f}×, seq 128 "
            f"{full['latency_ms']['p50'] / p50:.2f}× faster; held-out {_pts(r, 'held_out')}, "
            f"dev {_pts(r, 'dev')}"
        )
    return out


def unseen(work: Path, a: argparse.Namespace) -> dict[str, Any]:
    """The caveat tested: the same shape trained (``albert-edge train``, ``--unseen-epochs``)
    on SST-2 train WITHOUT the search's held-out rows, then searched with the same split,
    so its held-out rows are rows neither the heads nor the backbone ever saw. Accuracy
    only (the shape, hence the speed per depth, is the embedded model's)."""
    import subprocess

    from albert_edge.depth import FitSettings, SplitSettings, search_depths

    split = SplitSettings(fit_rows=a.fit_rows, held_out_rows=a.held_out_rows, seed=a.seed)
    kept, kept_rows = without_held_out(work, split)
    ckpt = work / "unseen-ckpt"
    if not (ckpt / "config.json").is_file():
        t0 = time.time()
        cmd = [
            sys.executable,
            "-m",
            "albert_edge.train",
            "--train",
            str(kept),
            "--dev",
            str(DEV),
            "--epochs",
            str(a.unseen_epochs),
            "-o",
            str(ckpt),
            "-q",
        ]
        subprocess.run(cmd, check=True)
        log(f"unseen: trained in {time.time() - t0:.0f} s")
    s = search_depths(ckpt, TRAIN, split=split, fit=FitSettings(seed=a.seed), report=DEV)
    out = s.to_dict()
    out["reference"].pop("held_out_correct", None)
    out["reference"]["report"].pop("correct", None)
    out["trained_on_rows"] = kept_rows
    out["epochs"] = a.unseen_epochs
    return out


def without_held_out(work: Path, split: Any) -> tuple[Path, int]:
    """SST-2 train minus the search's held-out rows (same seeded split), as a TSV: what a
    backbone trains on so that the held-out rows stay unseen by it. (path, rows kept)"""
    from albert_edge.data import read_sst2
    from albert_edge.depth.search import split_rows

    rows = read_sst2(TRAIN)
    _, held = split_rows(len(rows), split)
    skip = set(held)
    kept = work / "train-without-held-out.tsv"
    text = "label\tsentence\n" + "".join(
        f"{y}\t{t}\n" for i, (y, t) in enumerate(rows) if i not in skip
    )
    if not kept.is_file() or kept.read_text() != text:
        kept.write_text(text)
    return kept, len(rows) - len(skip)


def unseen_lines(u: dict[str, Any] | None) -> list[str]:
    if not u:
        return []
    ref = u["reference"]
    out = [
        "",
        "## The caveat tested: the same shape, its backbone trained without the held-out rows",
        "",
        f"Added by `benchmarks/depth.py --unseen` (a later run). `albert-edge train` "
        f"({u['epochs']} epoch(s)) on the {u['trained_on_rows']} SST-2 "
        "train rows outside the search's held-out split, then the same search: its held-out "
        "rows are unseen by heads and backbone alike. Full depth: held-out "
        f"{100 * ref['held_out_accuracy']:.2f} %, dev {100 * ref['report']['accuracy']:.2f} %. "
        "Re-fitted heads, Δ points vs full depth [95 %] (dev: report only):",
        "",
        "| depth | held-out Δ | dev Δ | rule |",
        "|---|---|---|---|",
    ]
    from albert_edge.depth import Rule

    for sc in u["scores"]:
        if sc["head"] != "refit":
            continue
        r = sc["report"]
        why = Rule().why_not(sc) or "admitted"
        out.append(
            f"| {sc['depth']} | {100 * sc['delta']:+.2f} [{100 * sc['delta_low']:+.2f}, "
            f"{100 * sc['delta_high']:+.2f}] | {100 * r['delta']:+.2f} [{100 * r['low']:+.2f}, "
            f"{100 * r['high']:+.2f}] | {why} |"
        )
    return out


# --- PABEE: the bar tested on a model trained for it (issue 27) ------------------------

TODAY = "today: embedded depth 4/4 onnx int8-dynamic"
PABEE_PREFIX = "pabee "


def train_pabee(work: Path, a: argparse.Namespace) -> tuple[Path, int]:
    """``albert-edge train --exit-loss pabee`` with the embedded model's own hyperparameters
    (read from its ``training.json``; seed ``--pabee-seed``, default the embedded model's)
    on SST-2 train minus the search's held-out rows; reused when already trained alike."""
    import subprocess

    from albert_edge.depth import SplitSettings

    split = SplitSettings(fit_rows=a.fit_rows, held_out_rows=a.held_out_rows, seed=a.seed)
    kept, kept_rows = without_held_out(work, split)
    rec = json.loads((TRAINED / "training.json").read_text())
    hp = rec["hyperparameters"]
    seed = rec["seed"] if a.pabee_seed is None else a.pabee_seed
    ckpt = work / "ckpt"
    done = ckpt / "training.json"
    if done.is_file():
        got = json.loads(done.read_text())
        same = (got["hyperparameters"], got["seed"], got["train_examples"]) == (hp, seed, kept_rows)
        if not same or (got.get("exit_loss") or {}).get("kind") != "pabee":
            raise SystemExit(f"depth: {ckpt} was trained otherwise; delete it to train again")
        if not (ckpt / "seal.json").is_file():
            raise SystemExit(f"depth: {ckpt} predates sealed training outputs; delete it")
        log(f"pabee: reusing {ckpt} (trained in {got['wall_time_s']} s)")
        return ckpt, kept_rows
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in hp.items()]
    cmd = [sys.executable, "-m", "albert_edge.train", "--train", str(kept), "--dev", str(DEV)]
    cmd += [*flags, f"--seed={seed}", f"--threads={rec['threads']}", "--exit-loss=pabee"]
    t0 = time.time()
    subprocess.run([*cmd, "-o", str(ckpt), "-q"], check=True)
    log(f"pabee: trained in {time.time() - t0:.0f} s")
    return ckpt, kept_rows


def today_artifact(work: Path, threads: int) -> tuple[dict[str, Any], Any]:
    """Today's full-depth int8 of the embedded model (``convert`` at int8-dynamic), scored on
    dev (its held-out rows are rows it trained on: not scored there). (record, dev vector)"""
    from albert_edge.convert import convert
    from albert_edge.data import read_sst2
    from albert_edge.depth import accuracy_interval
    from albert_edge.depth.evaluate import artifact_correct
    from albert_edge.options import ConvertOptions

    out = work / "today-int8"
    convert(TRAINED, out, ConvertOptions(precision="int8-dynamic", overwrite=True, verify=True))
    c = artifact_correct(out, read_sst2(DEV), threads=threads)
    iv = accuracy_interval(c)
    art = {"artifact": TODAY, "depth": 4, "target": "onnx", "precision": "int8-dynamic"}
    art.update(path=out, dev_accuracy=iv.delta, dev_low=iv.low, dev_high=iv.high)
    return art, c


def pabee(work: Path, a: argparse.Namespace) -> dict[str, Any]:
    """Train with the PABEE loss (held-out rows unseen), search (heads start from the trained
    exits, re-fitted on the fit split), build and score every depth × precision, time them
    interleaved with today's full-depth int8, apply the rule, state the bar both ways."""
    from albert_edge.depth import FitSettings, SplitSettings, search_depths

    ckpt, kept_rows = train_pabee(work, a)
    split = SplitSettings(fit_rows=a.fit_rows, held_out_rows=a.held_out_rows, seed=a.seed)
    search = search_depths(ckpt, TRAIN, split=split, fit=FitSettings(seed=a.seed), report=DEV)
    as_trained = search_depths(
        ckpt, TRAIN, split=split, fit=FitSettings(epochs=0, seed=a.seed), report=DEV
    )
    arts = build_all(search, work, a, model=ckpt, prefix=PABEE_PREFIX)
    vectors = score_all(search, arts, a.threads)
    today, vectors[TODAY] = today_artifact(work, a.threads)
    rep = time_all([*arts, today], a)
    mine = {**rep, "results": [r for r in rep["results"] if r["artifact"] != TODAY]}
    decision = decide(mine, search)
    decision["vs_today"] = bar_vs_today(rep, decision, vectors)
    problems = validate_report(rep)
    if problems:
        raise SystemExit("depth: invalid pabee report: " + "; ".join(problems))
    training = json.loads((ckpt / "training.json").read_text())
    training.pop("sha256", None)
    return {
        "training": training,
        "trained_on_rows": kept_rows,
        "depth_search": _compact(search),
        "as_trained": _compact(as_trained),
        "bench": rep,
        "decision": decision,
    }


def _compact(search: Any) -> dict[str, Any]:
    out = search.to_dict()
    out["reference"].pop("held_out_correct", None)
    out["reference"].get("report", {}).pop("correct", None)
    return out


def bar_vs_today(rep: dict[str, Any], decision: dict[str, Any], vectors: Any) -> dict[str, Any]:
    """The bar against today's full-depth int8 of the embedded model: speed, and the dev
    accuracy difference paired row by row (both artifacts scored on the same 872 rows)."""
    from albert_edge.depth import paired_bootstrap

    pick = (decision.get("chosen") or {}).get("artifact")
    rows = {r["artifact"]: r for r in rep["results"]}
    if pick is None:
        return {"today": TODAY, "met": False}
    mine, today = rows[pick], rows[TODAY]
    iv = paired_bootstrap(vectors[pick], vectors[TODAY])
    w2x = today["w2_median_ms"] / mine["w2_median_ms"]
    return {
        "today": TODAY,
        "pick": pick,
        "w2_speedup": w2x,
        "seq128_speedup": today["latency_ms"]["p50"] / mine["latency_ms"]["p50"],
        "seq128_min_speedup": today["latency_ms"]["min"] / mine["latency_ms"]["min"],
        "today_dev_accuracy": today["dev_accuracy"],
        "pick_dev_accuracy": mine["dev_accuracy"],
        "dev_delta": iv.delta,
        "dev_low": iv.low,
        "dev_high": iv.high,
        "met": bool(w2x >= 2 and -100 * iv.delta <= 0.5),
    }


def pabee_lines(pb: dict[str, Any] | None) -> list[str]:
    """The PABEE section of ``depth.md``, from the JSON only."""
    if not pb:
        return []
    rep, dec, tr = pb["bench"], pb["decision"], pb["training"]
    s, d = pb["depth_search"], pb["depth_search"]["data"]
    ref = s["reference"]
    ex = tr["exit_loss"]
    lines = [
        "",
        "## The bar tested on a PABEE-trained model whose held-out rows are unseen",
        "",
        f"Added by `benchmarks/depth.py --pabee` (a later run; {rep['created']}). Machine: "
        f"{machine_line(rep)}. Threads: {rep['settings']['threads']}. Load average (1/5/15 "
        f"min) at the end of the timing: {rep['settings'].get('loadavg')} on 2 cores (other "
        "work shared the machine: compare rows of this table with each other only).",
        "",
        f"Model: the embedded model's config and hyperparameters (`{tr['command']}`, seed "
        f"{tr['seed']}, {tr['threads']} thread, {tr['hyperparameters']['epochs']} epochs, "
        f"{tr['wall_time_s']:.0f} s) trained with PABEE's weighted exit loss (exit weights "
        f"{', '.join(f'{w:.1f}' for w in ex['weights'])}: an exit after every layer, the "
        "model's pooler shared, one linear per layer) on the "
        f"{pb['trained_on_rows']} SST-2 train rows outside the search's held-out split, so "
        f"the {d['held_out_rows']} held-out rows (seeded split {d['split_seed']}) are unseen by "
        "backbone and heads alike. Dev accuracy per exit at the end of training (PyTorch, "
        "report only): "
        + ", ".join(f"layer {i + 1} {100 * x:.2f} %" for i, x in enumerate(ex["dev_exit_accuracy"]))
        + f". Search heads: {s['settings']['fit']['init']}, then re-fitted "
        f"{s['settings']['fit']['epochs']} epochs on {d['fit_rows']} fit rows (a subset of "
        "the rows the model trained on). Reference: this model at full depth in PyTorch fp32: "
        f"held-out {100 * ref['held_out_accuracy']:.2f} % [{100 * ref['low']:.2f}, "
        f"{100 * ref['high']:.2f}], dev {100 * ref['report']['accuracy']:.2f} % "
        f"[{100 * ref['report']['low']:.2f}, {100 * ref['report']['high']:.2f}].",
        "",
        "Columns as in the first table; Δ against this model's full depth in PyTorch. The "
        "last row is today's artifact of the embedded model, timed in the same run "
        "(interleaved); its held-out column is empty (it trained on those rows) and its dev "
        "interval is its accuracy's own.",
        "",
    ]
    return lines + table_lines(rep, dec) + pabee_heads_lines(pb) + pabee_bar_lines(pb)


def table_lines(rep: dict[str, Any], dec: dict[str, Any]) -> list[str]:
    """The depth × precision table both reports print: header, then a row per artifact
    with the rule's verdict (today's artifact, timed beside them, is the reference row)."""
    lines = [
        "| artifact | MB | size ÷ floor | held-out acc % | dev acc % (report only) | "
        "W2 med ms | seq 128 p50 / min ms | rule |",
        "|---|---|---|---|---|---|---|---|",
    ]
    why = {e["artifact"]: e["why_not"] for e in dec["evidence"]}
    chosen = (dec.get("chosen") or {}).get("artifact")
    for r in rep["results"]:
        lat = r.get("latency_ms") or {}
        if r["artifact"] == TODAY:
            held, dev, verdict = "—", _acc_iv(r, "dev"), "reference (a)"
        else:
            held, dev = _pts(r, "held_out"), _pts(r, "dev")
            verdict = (
                "**chosen**" if r["artifact"] == chosen else (why.get(r["artifact"]) or "admitted")
            )
        lines.append(
            f"| {r['artifact']} | {r['file_bytes'] / 1e6:.2f} | {r['ratio_to_floor']:.3f} | "
            f"{held} | {dev} | "
            + (f"{r['w2_median_ms']:.3f}" if r.get("w2_median_ms") else "—")
            + f" | {lat.get('p50', float('nan')):.3f} / {lat.get('min', float('nan')):.3f} | "
            f"{verdict} |"
        )
    return lines


def _acc_iv(r: dict[str, Any], key: str) -> str:
    return (
        f"{100 * r[f'{key}_accuracy']:.2f} [{100 * r[f'{key}_low']:.2f}, "
        f"{100 * r[f'{key}_high']:.2f}]"
    )


def pabee_heads_lines(pb: dict[str, Any]) -> list[str]:
    """PyTorch, per depth: the search's re-fitted heads beside the heads as PABEE trained
    them (no re-fit), Δ points vs full depth [95 %]."""
    from albert_edge.depth import Rule

    def iv(x: dict[str, Any], lo: str = "delta_low", hi: str = "delta_high") -> str:
        return f"{100 * x['delta']:+.2f} [{100 * x[lo]:+.2f}, {100 * x[hi]:+.2f}]"

    refit = {x["depth"]: x for x in pb["depth_search"]["scores"] if x["head"] == "refit"}
    trained = {x["depth"]: x for x in pb["as_trained"]["scores"] if x["head"] == "refit"}
    out = [
        "",
        "Heads in PyTorch fp32 (Δ points vs full depth [95 %]): the search's (trained exit, "
        "re-fitted) and PABEE's exits as trained (`depth search --epochs 0`); the rule reads "
        "the re-fitted ones, decided before the run.",
        "",
        "| depth | held-out Δ, re-fitted | held-out Δ, as trained | dev Δ, re-fitted | "
        "dev Δ, as trained | rule (re-fitted, fp32) |",
        "|---|---|---|---|---|---|",
    ]
    for k in sorted(refit):
        r, t = refit[k], trained[k]
        rep_r, rep_t = r["report"], t["report"]
        out.append(
            f"| {k} | {iv(r)} | {iv(t)} | {iv(rep_r, 'low', 'high')} | "
            f"{iv(rep_t, 'low', 'high')} | {Rule().why_not(r) or 'admitted'} |"
        )
    return out


def pabee_bar_lines(pb: dict[str, Any]) -> list[str]:
    """The issue's bar against both references, and per depth against today's int8."""
    dec = pb["decision"]
    bar, vt = dec["bar"], dec["vs_today"]
    if not bar.get("pick"):
        return ["", "Bar (issue 27): no candidate passed the rule; keep full depth."]
    verdict = {True: "**met**", False: "**not met**"}
    out = [
        "",
        f"Rule's pick: **{bar['pick']}**.",
        "",
        f"- (a) vs today's full-depth int8 of the embedded model ({vt['today']}, timed in "
        f"the same run): W2 {vt['w2_speedup']:.2f}× faster (seq 128 p50 "
        f"{vt['seq128_speedup']:.2f}×, min {vt['seq128_min_speedup']:.2f}×); SST-2 dev "
        f"{100 * vt['pick_dev_accuracy']:.2f} % vs {100 * vt['today_dev_accuracy']:.2f} %: "
        f"Δ {100 * vt['dev_delta']:+.2f} points [{100 * vt['dev_low']:+.2f}, "
        f"{100 * vt['dev_high']:+.2f}] (paired, same rows): {verdict[vt['met']]} "
        "(≥ 2× at W2 and ≤ 0.5-point loss on dev)",
        f"- (b) vs this model's own full depth ({bar['today']}): W2 {bar['w2_speedup']:.2f}× "
        f"faster (seq 128 p50 {bar['seq128_speedup']:.2f}×); dev loss "
        f"{bar['dev_loss_points']:+.2f} points vs its full-depth PyTorch fp32 "
        f"({bar['dev_loss_vs_today_points']:+.2f} vs its full-depth int8 artifact; a negative "
        f"loss is a gain): {verdict[bar['met']]}",
    ]
    out += [
        "",
        "Read with the intervals: the bar is stated on point estimates. On 872 dev rows the "
        "paired 95 % interval of the difference to today's artifact spans "
        f"{100 * (vt['dev_high'] - vt['dev_low']):.1f} points, so dev cannot show that the "
        "pick loses at most 0.5 points, only that its point estimate does; the evidence "
        "that chose it is the held-out split (5000 rows unseen by backbone and heads).",
    ]
    out += clients_lines(pb.get("clients"))
    rows = pb["bench"]["results"]
    today = next(r for r in rows if r["artifact"] == TODAY)
    out += [
        "",
        "Per depth, this model's ONNX int8-dynamic vs today's full-depth int8 (same run):",
        "",
    ]
    for r in rows:
        if r["artifact"] == TODAY or r["target"] != "onnx" or r["precision"] != "int8-dynamic":
            continue
        out.append(
            f"- depth {r['depth']}: W2 {today['w2_median_ms'] / r['w2_median_ms']:.2f}×, seq 128 "
            f"{today['latency_ms']['p50'] / r['latency_ms']['p50']:.2f}× faster; held-out "
            f"{_pts(r, 'held_out')}, dev {_pts(r, 'dev')}"
        )
    return out


def pick_clients(work: Path, pb: dict[str, Any]) -> dict[str, Any]:
    """The issue's last clause: the rule's pick loads as written in optimum
    (ORTModelForSequenceClassification), transformers.js and onnxruntime-node (Node, the
    client test's runner), and the same depth's TFLite form in LiteRT's own interpreter;
    each compared with ONNX Runtime / albert-edge's runner on the same file (the artifact
    itself was verified against its truncated PyTorch model when it was built)."""
    import subprocess

    import numpy as np
    import onnxruntime as ort
    from optimum.onnxruntime import ORTModelForSequenceClassification

    from albert_edge.data import read_sst2
    from albert_edge.tokenizer import AlbertTokenizer

    pick = pb["decision"]["chosen"]
    if pick is None or pick["target"] != "onnx":
        return {"skipped": "the pick is not an ONNX artifact"}
    art = work / f"d{pick['depth']}-onnx-{pick['precision']}"
    manifest = json.loads((art / "manifest.json").read_text())
    texts = [t for _, t in read_sst2(DEV)[:40]]
    tok = AlbertTokenizer(art / "spiece.model")
    feeds = [
        {k: v[0].tolist() for k, v in tok.encode(t, padding="none").as_numpy().items()}
        for t in texts
    ]
    sess = ort.InferenceSession(
        str(art / manifest["model_file"]), providers=["CPUExecutionProvider"]
    )
    names = {i.name for i in sess.get_inputs()}
    ref = np.asarray(
        [
            sess.run(None, {k: np.asarray([v]) for k, v in f.items() if k in names})[0][0]
            for f in feeds
        ]
    )
    out: dict[str, Any] = {"artifact": pick["artifact"], "sentences": len(texts)}
    opt = ORTModelForSequenceClassification.from_pretrained(art)
    got = np.asarray([opt(**{k: np.asarray([v]) for k, v in f.items()}).logits[0] for f in feeds])
    out["optimum"] = float(np.abs(got - ref).max())
    js = ROOT / "tests" / "clients" / "js"
    req = work / "clients-request.json"
    req.write_text(
        json.dumps(
            {
                "artifact_dir": str(art),
                "model_file": manifest["model_file"],
                "sentences": texts,
                "feeds": feeds,
                "clients": ["transformers.js", "onnxruntime-node"],
            }
        )
    )
    r = subprocess.run(
        ["node", str(js / "run_clients.mjs"), str(req)],
        capture_output=True,
        text=True,
        cwd=js,
        check=True,
    )
    node = json.loads(r.stdout.strip().splitlines()[-1])
    out["onnxruntime-node"] = float(
        np.abs(np.asarray(node["onnxruntime-node"]["logits"]) - ref).max()
    )
    labels = [manifest_label(art, row) for row in ref]
    out["transformers.js_labels_agree"] = sum(
        a == b for a, b in zip(node["transformers.js"]["labels"], labels, strict=True)
    )
    out["litert"] = litert_check(work / f"d{pick['depth']}-tflite-int8-dynamic", texts)
    return out


def manifest_label(art: Path, logits: Any) -> str:
    config = json.loads((art / "config.json").read_text())
    return str(config["id2label"][str(int(logits.argmax()))])


def litert_check(art: Path, texts: list[str]) -> dict[str, Any]:
    """LiteRT's own interpreter and signature runner on the TFLite form of the same depth,
    against albert-edge's runner on the same file (max |Δ logit|)."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from albert_edge.runtime import open_runner
    from albert_edge.tokenizer import AlbertTokenizer

    model_file = art / json.loads((art / "manifest.json").read_text())["model_file"]
    interp = Interpreter(model_path=str(model_file))
    sigs = list(interp.get_signature_list())
    run = interp.get_signature_runner(sigs[-1])
    want = run.get_input_details()
    width = int(want["input_ids"]["shape"][-1])
    tok = AlbertTokenizer(art / "spiece.model")
    runner = open_runner(art, threads=1)
    worst = 0.0
    for text in texts:
        enc = tok.encode(text, max_length=width, padding="max_length").as_numpy()
        got = run(**{k: v.astype(want[k]["dtype"]) for k, v in enc.items() if k in want})["logits"][
            0
        ]
        feeds = {k: v for k, v in enc.items() if k in set(runner.input_names)}
        ref = runner.run(feeds)[runner.output_names[0]][0]
        worst = max(worst, float(np.abs(got - ref).max()))
    return {"artifact": art.name, "signatures": sigs, "max_abs_diff": worst}


def clients_lines(c: dict[str, Any] | None) -> list[str]:
    if not c:
        return []
    if "skipped" in c:
        return ["", f"Clients: not run ({c['skipped']})."]
    lt = c["litert"]
    return [
        "",
        f"Clients (`benchmarks/depth.py --pabee-clients`), {c['sentences']} dev sentences, the "
        f"pick as written: optimum `ORTModelForSequenceClassification` max |Δ logit| "
        f"{c['optimum']:.1e}, onnxruntime-node {c['onnxruntime-node']:.1e} (vs ONNX Runtime "
        f"in Python on the same file), transformers.js label agrees on "
        f"{c['transformers.js_labels_agree']}/{c['sentences']}; LiteRT's interpreter "
        f"(signature runner) on the same depth's TFLite form `{lt['artifact']}`: max |Δ logit| "
        f"{lt['max_abs_diff']:.1e} vs albert-edge's runner. `tests/clients/test_depth_clients.py` "
        "checks the same forms (depth 1: ONNX int8 and int4, TFLite int8) against PyTorch.",
    ]


def plumbing(work: Path) -> list[dict[str, Any]]:
    """The same search + ``convert --depth`` on random-init albert-base shapes (1 and 2
    hidden groups): accuracy means nothing there (random weights, 40 rows); the rows prove
    the plumbing and the byte accounting (what a truncation keeps, drops and weighs)."""
    from albert_edge.configs import make_config, make_random_checkpoint
    from albert_edge.depth import FitSettings, SplitSettings, convert_at_depth, search_depths
    from albert_edge.facts import floor_bytes
    from albert_edge.options import ConvertOptions
    from benchmarks.precisions import SPIECE

    data = work / "plumbing-rows.tsv"
    data.write_text("\n".join(TRAIN.read_text().splitlines()[:41]) + "\n")
    split = SplitSettings(fit_rows=30, held_out_rows=10, max_length=32, resamples=200)
    rows = []
    for groups in (1, 2):
        cfg = make_config("albert-base", num_hidden_groups=groups)
        ckpt = make_random_checkpoint(work / f"base-g{groups}", cfg, spiece_model=SPIECE)
        t0 = time.time()
        search = search_depths(ckpt, data, split=split, fit=FitSettings(epochs=1))
        full = json.loads((ckpt / "config.json").read_text())
        for k, precision in ((6, "fp32"), (6, "int8-dynamic")):
            out = work / f"base-g{groups}-d{k}-{precision}"
            m = convert_at_depth(
                ckpt, out, ConvertOptions(precision=precision, overwrite=True), search, k
            )
            rows.append(
                {
                    "model": f"albert-base random init, {groups} hidden group(s)",
                    "representable": search.representable,
                    "depth": k,
                    "precision": precision,
                    "groups_kept": m["depth"]["num_hidden_groups"],
                    "verified": m["verification"]["passed"],
                    "file_bytes": m["sizes"]["file_bytes"],
                    "floor_bytes": m["sizes"]["floor_bytes"],
                    "ratio_to_floor": m["sizes"]["ratio_to_floor"],
                    "full_depth_floor_bytes": floor_bytes(
                        full, "sequence-classification", precision
                    ),
                    "seconds": round(time.time() - t0),
                }
            )
            log(f"plumbing: {rows[-1]}")
    return rows


def plumbing_lines(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    out = [
        "",
        "## Plumbing: albert-base shapes (random init; accuracy meaningless)",
        "",
        "Added by `benchmarks/depth.py --plumbing` (a later run). The same search (40 SST-2 "
        "train rows) and `convert --depth 6` end to end. Depths a "
        "config can express are listed; truncated to 6 layers, the 2-group model keeps one "
        "group, and its floor (unique parameters × bytes) drops by that group's bytes.",
        "",
        "| model | searchable depths | depth | precision | groups kept | verified | MB | "
        "size ÷ floor | floor MB | full-depth floor MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['model']} | {', '.join(map(str, r['representable']))} | {r['depth']} | "
            f"{r['precision']} | {r['groups_kept']} | {r['verified']} | "
            f"{r['file_bytes'] / 1e6:.2f} | {r['ratio_to_floor']:.3f} | "
            f"{r['floor_bytes'] / 1e6:.2f} | {r['full_depth_floor_bytes'] / 1e6:.2f} |"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "depth")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--fit-rows", type=int, default=20000)
    p.add_argument("--held-out-rows", type=int, default=5000)
    p.add_argument("--seed", type=int, default=27)
    p.add_argument("--precisions", default="fp32,int8-dynamic,int4", help="ONNX precisions")
    p.add_argument("--tflite", default="int8-dynamic", help="TFLite precisions ('' for none)")
    p.add_argument("--w2", type=int, default=300)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--render", action="store_true")
    p.add_argument(
        "--plumbing",
        action="store_true",
        help="add the albert-base (1 and 2 groups) plumbing rows to an existing depth.json",
    )
    p.add_argument(
        "--unseen",
        action="store_true",
        help="add the same search on a same-shape model trained without the held-out rows",
    )
    p.add_argument("--unseen-epochs", type=int, default=1)
    p.add_argument(
        "--pabee",
        action="store_true",
        help="add the bar tested on a model trained with PABEE's exit loss without the "
        "held-out rows (trains it: minutes), timed beside today's full-depth int8",
    )
    p.add_argument(
        "--pabee-seed", type=int, default=None, help="its training seed (default: the embedded's)"
    )
    p.add_argument(
        "--pabee-clients",
        action="store_true",
        help="(re)run only the client checks of the --pabee pick (its artifacts must exist)",
    )
    a = p.parse_args(argv)
    if a.render or a.plumbing or a.unseen or a.pabee or a.pabee_clients:
        report = json.loads((a.out / "depth.json").read_text())
        if a.pabee:
            (a.work / "pabee").mkdir(parents=True, exist_ok=True)
            report["pabee"] = pabee(a.work / "pabee", a)
            (a.out / "depth.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
        if a.pabee or a.pabee_clients:
            report["pabee"]["clients"] = pick_clients(a.work / "pabee", report["pabee"])
            (a.out / "depth.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
        if a.unseen:
            (a.work / "unseen").mkdir(parents=True, exist_ok=True)
            report["unseen"] = unseen(a.work / "unseen", a)
            (a.out / "depth.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
        if a.plumbing:
            (a.work / "plumbing").mkdir(parents=True, exist_ok=True)
            report["plumbing"] = plumbing(a.work / "plumbing")
            (a.out / "depth.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
        (a.out / "depth.md").write_text(markdown(report))
        return 0
    a.work.mkdir(parents=True, exist_ok=True)
    search = get_search(a.work, a)
    arts = build_all(search, a.work, a)
    score_all(search, arts, a.threads)
    rep = time_all(arts, a)
    rep["depth_search"] = {k: v for k, v in search.to_dict().items()}
    for key in ("held_out_correct",):
        rep["depth_search"]["reference"].pop(key, None)
    rep["depth_search"]["reference"].get("report", {}).pop("correct", None)
    rep["decision"] = decide(rep, search)
    problems = validate_report(rep)
    if problems:
        raise SystemExit("depth: invalid report: " + "; ".join(problems))
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "depth.json").write_text(json.dumps(rep, indent=2, default=str) + "\n")
    (a.out / "depth.md").write_text(markdown(rep))
    print((a.out / "depth.md").read_text())
    return 0


def _pts(r: dict[str, Any], key: str) -> str:
    return (
        f"{100 * r[f'{key}_accuracy']:.2f} ({100 * r[f'{key}_delta']:+.2f} "
        f"[{100 * r[f'{key}_low']:+.2f}, {100 * r[f'{key}_high']:+.2f}])"
    )


def markdown(rep: dict[str, Any]) -> str:
    """The table and the verdicts, from the JSON only (``--render``)."""
    s = rep["depth_search"]
    d, ref = s["data"], s["reference"]
    dec = rep["decision"]
    lines = [
        "# Depth × precision on the embedded SST-2 model (issue 27)",
        "",
        f"Machine: {machine_line(rep)}. Threads: {rep['settings']['threads']}. Built, scored "
        f"and timed by `benchmarks/depth.py` in one run; {rep['created']}. Load average "
        f"(1/5/15 min) at the end: {rep['settings'].get('loadavg')} on 2 cores (other work "
        "shared the machine: compare rows of this table, not with other files; min beside p50).",
        "",
        f"Exit heads: a copy of the model's pooler + classifier per depth, fitted on "
        f"{d['fit_rows']} SST-2 train rows; every depth scored on {d['held_out_rows']} other "
        f"train rows the heads never saw (seeded split {d['split_seed']}, `{d['file']}` sha256 "
        f"`{d['sha256'][:16]}…`). Caveat: the backbone itself was trained on all train rows, "
        "so held-out accuracies are high in absolute terms, and the paired difference the rule "
        "reads is biased against shallow depths: what the later layers memorised of these rows "
        "counts as accuracy a shallow depth loses (compare the held-out and dev columns at "
        "depth 1). Searching on labelled rows the model never trained on removes the bias. "
        "Reference: the unchanged model "
        f"at full depth in PyTorch fp32: held-out {100 * ref['held_out_accuracy']:.2f} %, dev "
        f"{100 * ref['report']['accuracy']:.2f} % [{100 * ref['report']['low']:.2f}, "
        f"{100 * ref['report']['high']:.2f}].",
        "",
        "Rows at full depth are today's artifacts (`convert` of the model as it is, its own "
        "head); shallower rows are `convert --depth k` (truncated checkpoint, re-fitted head), "
        "each verified against its own PyTorch model at conversion. "
        "acc %: accuracy (Δ points vs the reference on the same rows [paired bootstrap 95 %]). "
        "Held-out chooses; dev (872 rows) is reported only, never used to choose. "
        "size ÷ floor: the file ÷ the unique parameters of the model it holds × bytes per "
        "parameter (`albert_edge.facts`): the truncated model's floor, without the groups it "
        "dropped. seq 128: batch 1, p50 / min over "
        f"{rep['settings']['policy'].get('runs')} runs pooled from "
        f"{rep['settings'].get('rounds', 1)} interleaved rounds of one `bench()` call. W2: "
        f"median ms over {rep['settings'].get('w2_sentences')} SST-2 dev sentences at their "
        f"own length, {rep['settings'].get('w2_rounds')} passes, every artifact in its own "
        "resident process, timed in turn block by block (`precisions.w2_latencies`).",
        "",
    ]
    lines += table_lines(rep, dec)
    rule = dec["rule"]
    lines += [
        "",
        f"Rule: held-out point loss ≤ {rule['max_point_loss']} and lower bound ≥ "
        f"{rule['min_lower_bound']} points; the fastest W2 among the admitted.",
        "",
    ]
    bar = dec["bar"]
    if bar.get("pick"):
        lines.append(
            f"Bar (issue 27): {bar['pick']} vs today's {bar['today']}: W2 "
            f"{bar['w2_speedup']:.2f}× faster (seq 128: {bar['seq128_speedup']:.2f}×); SST-2 "
            f"dev: {bar['dev_loss_points']:.2f}-point loss vs full-depth PyTorch fp32 "
            f"({bar['dev_loss_vs_today_points']:.2f} vs today's int8 artifact; a negative loss "
            "is a gain): " + ("**met** (≥ 2× and ≤ 0.5 points)" if bar["met"] else "**not met**")
        )
    else:
        lines.append("Bar (issue 27): no candidate passed the rule.")
    lines += per_depth_lines(rep)
    lines += unseen_lines(rep.get("unseen"))
    lines += pabee_lines(rep.get("pabee"))
    lines += plumbing_lines(rep.get("plumbing") or [])
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
