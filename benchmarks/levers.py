#!/usr/bin/env python
"""What each speed/size lever costs a sequence classifier, and what it saves (issue 55).

``python -m benchmarks.levers CKPT --fit F --report R --out DIR [--label NAME]``

Every lever runs through its own command as a user runs it (this tree's CLI in a
subprocess, with the flags its ``--help`` gives), is chosen on the first ``--fit-rows``
rows of ``--fit`` the model never trained on (:func:`never_trained`) and is measured on
``--report`` rows (never chosen on) against the same model at full depth in fp32, with a
paired 95 % bootstrap interval. ``--jobs`` commands run at once (default 2 x 1 thread: two
cores); ``--resume`` reuses DIR's finished commands; ``--only`` runs some levers:

* depth: ``depth search --report R`` + ``depth truncate --depth auto`` (the shallowest
  depth the rule admits: point loss <= ``--max-drop``, lower bound >= -1.5 points);
* early exit: ``early-exit --max-drop`` (its confidence threshold); the artifact's runner
  scores R (accuracy, mean exit layer);
* vocabulary: ``trim --corpus FIT --held-out R`` (every piece the fit text uses);
* precision: ``convert --precision int8-dynamic`` and ``--precision auto --max-drop`` (the
  mixed plan), each scored by ``verify --data R --reference CKPT``;
* pruning: ``prune --max-drop``; the pruned checkpoint scores R in PyTorch.

Writes ``DIR/levers.{json,md}``, each command's output and stderr beside them. FLOPs: the
analytic matrix-product count of one 128-token row (:mod:`albert_edge.bench.flops`);
bytes: each output's weight files against the checkpoint's (precision rows: the fp32
ONNX artifact's).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from albert_edge.bench.schema import machine_info
from albert_edge.prune.plan import heads_label
from benchmarks._setup import ROOT, cpu_flag, log

SEQ = 128  # tokens of the FLOP count
QUIET = ["--overwrite", "-q"]
RESUME = ""  # main's --resume: the inputs' digest a finished command must match
LEVERS = ("depth", "early-exit", "trim", "int8", "mixed", "prune")  # the table's order
LONGEST = ("prune", "depth", "mixed", "early-exit", "int8", "trim")  # the order they start in


def cli(out: Path, name: str, args: list[Any], threads: int) -> tuple[bool, str, float]:
    """``albert-edge ARGS`` under ``nice 10`` with ``threads`` BLAS threads; stdout and
    stderr to ``DIR/NAME.{out,err}``; (succeeded, last stderr line, wall seconds)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    cmd = ["nice", "-n", "10", sys.executable, "-m", "albert_edge.cli", *map(str, args)]
    done = out / f"{name}.done.json"  # --resume: a finished command with the same arguments
    if RESUME and done.is_file() and rd(done)["cmd"] == [RESUME, *cmd[3:]]:
        return rd(done)["ok"], rd(done)["last"], rd(done)["seconds"]
    t0 = time.time()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    (out / f"{name}.out").write_text(r.stdout)
    (out / f"{name}.err").write_text(r.stderr)
    last = ([ln for ln in r.stderr.splitlines() if ln.strip()] or [""])[-1].split("error: ")[-1]
    s = round(time.time() - t0, 1)
    log(f"{name}: rc {r.returncode}, {s:.0f} s")
    done.write_text(
        json.dumps({"cmd": [RESUME, *cmd[3:]], "ok": r.returncode == 0, "last": last, "seconds": s})
    )
    return r.returncode == 0, last, s


def rd(path: Path) -> Any:
    return json.loads(path.read_text())


def points(delta: float, low: float | None, high: float | None, scale: float = 100.0) -> dict:
    """A difference and its interval in points (fractions times ``scale``)."""
    r = [None if v is None else round(v * scale, 2) for v in (delta, low, high)]
    return dict(zip(("delta", "low", "high"), r, strict=True))


def flops(config: dict[str, Any], layers: float | None = None) -> float:
    """Matrix-product FLOPs of one 128-token row at ``layers`` layers (fractional: a mean
    exit layer; None: the config's depth)."""
    from albert_edge.bench.flops import model_flops

    def f(k: float) -> int:
        return model_flops({**config, "num_hidden_layers": k}, "sequence-classification", 1, SEQ)

    if layers is None:
        return float(f(config["num_hidden_layers"]))
    return float(f(1) + (layers - 1) * (f(2) - f(1)))  # linear in depth


def weight_bytes(d: Path) -> int:
    return sum(
        f.stat().st_size for f in d.rglob("*") if f.suffix in (".safetensors", ".onnx", ".bin")
    )


class Scorer:
    """The report rows scored in-process with the public API, paired with the given
    checkpoint in PyTorch at full depth (for the early-exit runner and a pruned model)."""

    def __init__(self, ckpt: Path, report: Path, threads: int) -> None:
        import torch

        from albert_edge.checkpoint import load_checkpoint
        from albert_edge.tasks import model_config, read_task_data
        from albert_edge.torch_model import trained_length

        torch.set_num_threads(threads)
        self.data = read_task_data(report, ckpt, model_config(ckpt) or {})
        ref = load_checkpoint(ckpt)
        self.max_len = trained_length(ref) or SEQ
        self.ref = self.torch(ref)[0]

    def score(self, tokenizer: Any, run: Any) -> tuple[Any, dict[str, Any]]:
        from albert_edge.tasks import encode, run_features, score

        feats = encode(self.data, tokenizer, self.max_len)
        out = run_features(feats, run)
        return score(self.data, feats, {"logits": out["logits"]}), out

    def torch(self, ckpt: Any) -> tuple[Any, dict[str, Any]]:
        from albert_edge.reference import run_reference

        return self.score(ckpt.tokenizer(), lambda f: {"logits": run_reference(ckpt, f)["logits"]})

    def paired(self, m: Any) -> dict[str, Any]:
        from albert_edge.tasks import paired_metric_interval

        iv = paired_metric_interval(m, self.ref)
        return {"metric": round(m.value * 100, 2), **points(iv.delta, iv.low, iv.high)}


def run(ckpt: Path, report: Path, out: Path, a: argparse.Namespace) -> list[dict[str, Any]]:
    """Every lever, ``a.jobs`` at a time; one record each (``cost``: None where its command
    failed), in a fixed order."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.early_exit.runner import PolicyRunner
    from albert_edge.evaluate import artifact_tokenizer
    from albert_edge.tasks import model_config

    fit, rows, held, t, drop = out / "fit.tsv", a.rows, max(400, a.rows // 4), a.threads, a.max_drop
    cfg = model_config(ckpt) or {}
    full_f, full_b, L = flops(cfg), weight_bytes(ckpt), int(cfg["num_hidden_layers"])
    sc = Scorer(ckpt, report, t)
    a.reference = sc.ref
    split = ["--fit-rows", rows - held, "--held-out-rows", held]

    def row(lever: str, ok: bool, msg: str, choice: str, cost: Any, **kw: Any) -> list[dict]:
        """One lever's record; ``cost`` (a thunk, not run where the command failed)."""
        return [{"lever": lever, "choice": choice if ok else f"failed: {msg}", **kw,
                 "cost": cost() if ok else None}]  # fmt: skip

    def depth() -> list[dict]:
        ds, dc = out / "depth_search", out / "depth_ckpt"
        args = ["depth", "search", ckpt, "--data", fit, "--report", report, "-o", ds, *split]
        ok, msg, s = cli(out, "depth_search", [*args, "--max-point-loss", drop, *QUIET], t)
        args = ["depth", "truncate", ckpt, "--depth", "auto", "--depth-search", ds, "-o", dc]
        ok2, msg2, s2 = cli(out, "depth_truncate", [*args, "--max-point-loss", drop, *QUIET], t)
        k = int(rd(dc / "config.json")["num_hidden_layers"]) if ok2 else L  # refused: full depth
        per: dict[str, dict] = {"refit": {}, "own": {}}  # the head re-fitted after k / the model's
        for d in rd(ds / "depth_search.json")["scores"] if ok else []:
            r = d.get("report") or {}
            if r and d.get("head") in per:
                per[d["head"]][str(d["depth"])] = {
                    # depth search's report: "value" (records before the one depth
                    # search of every head: "accuracy")
                    "metric": round(r.get("value", r.get("accuracy", 0.0)) * 100, 2),
                    **points(r["delta"], r["low"], r["high"]),
                }
        choice = f"depth {k} of {L}" + ("" if ok2 else f" ({msg2})")
        return row("depth (`depth search`, `depth truncate --depth auto`)", ok, msg, choice,
            lambda: per["refit"].get(str(k), points(0, 0, 0)), layers=k, flops=flops(cfg, k) / full_f,
            bytes=weight_bytes(dc) / full_b if ok2 else 1.0, seconds=s + s2,
            caps=f"fit {rows - held}, choose {held} rows", per_depth_report=per)  # fmt: skip

    def early() -> list[dict]:
        ee = out / "early_exit"
        args = ["early-exit", ckpt, "--data", fit, "-o", ee, *split, "--max-drop", drop, *QUIET]
        ok, msg, s = cli(out, "early_exit", args, t)
        if ok:
            pr = PolicyRunner(ee, threads=t)
            names = set(pr.input_names)
            m, o = sc.score(artifact_tokenizer(ee), lambda f: pr.run({n: f[n] for n in names}))
            mean = float(sum(o["exit_depth"])) / len(o["exit_depth"])
        return row("early exit (`early-exit --max-drop`)", ok, msg,
            f"{rd(ee / 'early_exit.json')['policy']}, mean exit layer {mean:.2f}" if ok else "", lambda: sc.paired(m),
            layers=round(mean, 2) if ok else None, flops=flops(cfg, mean) / full_f if ok else 1.0,
            bytes=weight_bytes(ee) / full_b, seconds=s,
            caps=f"fit {rows - held}, choose + report {held} rows")  # fmt: skip

    def vocab() -> list[dict]:
        args = ["trim", ckpt, "--corpus", fit, "--held-out", report, "-o", out / "trim", *QUIET]
        ok, msg, s = cli(out, "trim", args, t)
        tr = rd(out / "trim" / "trim.json") if ok else {}
        hm = tr.get("held_out", {}).get("metric", {})
        choice = (
            f"{tr.get('pieces_kept')} of {tr.get('of_pieces')} pieces; report token coverage "
            f"{tr.get('held_out', {}).get('token_coverage', 0) * 100:.1f} %"
        )
        return row("vocabulary (`trim --corpus FIT`)", ok, msg, choice,
            lambda: {"metric": round(hm["trimmed"] * 100, 2), **points(hm["delta"], hm["low"], hm["high"])},
            layers=L, flops=1.0, bytes=weight_bytes(out / "trim") / full_b, seconds=s,
            caps=f"corpus {rows} rows")  # fmt: skip

    lock, memo = threading.Lock(), {"fp32": 0}

    def precision(name: str) -> list[dict]:
        with lock:  # the fp32 artifact, the bytes baseline, converted once
            if not memo["fp32"]:
                cli(out, "fp32", ["convert", ckpt, "-o", out / "fp32", *QUIET], t)
                memo["fp32"] = weight_bytes(out / "fp32") or full_b
        n = min(1000, rows)
        flags = ["--max-drop", drop, "--data", fit, "--search-rows", n] if name == "auto" else []
        art = out / name
        ok, msg, s = cli(
            out, name, ["convert", ckpt, "-o", art, "--precision", name, *flags, *QUIET], t
        )
        args = ["verify", art, "--reference", ckpt, "--data", report, "--threads", t, "--json"]
        ok2, msg, s2 = cli(out, f"{name}_verify", [*args, "-q"], t) if ok else (ok, msg, 0.0)
        acc = rd(out / f"{name}_verify.out")["accuracy"] if ok2 else {}
        iv = acc.get("interval_points") or {}
        man = rd(art / "manifest.json") if ok else {}
        units = Counter(
            str(u.get("precision")) for u in (man.get("precision_plan") or {}).get("units", [])
        )
        plan = ", ".join(f"{c} weights {p}" for p, c in sorted(units.items()))
        return row(f"precision (`convert --precision {name}`)", ok2, msg,
            f"{man.get('precision')}" + (f" plan: {plan}" if plan else ""),
            lambda: {"metric": round(acc["metric_artifact"] * 100, 2),
                     **points(acc["delta_points"], iv.get("low"), iv.get("high"), 1.0)},
            layers=L, flops=1.0, bytes=weight_bytes(art) / memo["fp32"], seconds=s + s2,
            caps=f"search {n} fit rows" if flags else "-")  # fmt: skip

    def prune() -> list[dict]:
        pd = out / "prune"
        args = ["prune", ckpt, "--data", fit, "-o", pd, "--max-drop", drop, "--threads", t, *QUIET]
        ok, msg, s = cli(out, "prune", args, t)
        rec = rd(pd / "prune.json") if ok else {}
        kept = rec.get("kept", {})
        choice = (
            f"heads {heads_label(kept['heads_per_layer']) if kept else '?'}/{kept.get('of_heads')}, "
            f"FFN {kept.get('ffn_per_layer')}/{kept.get('of_ffn')} per shared layer"
        )
        return row("pruning (`prune --max-drop`)", ok, msg, choice,
            lambda: sc.paired(sc.torch(load_checkpoint(pd))[0]), layers=L,
            flops=flops(model_config(pd) or cfg) / full_f if ok else 1.0,
            bytes=weight_bytes(pd) / full_b if ok else 1.0, seconds=s,
            caps=f"fit {rec.get('data', {}).get('fit_rows')}, choose "
            f"{rec.get('data', {}).get('choose_rows')} rows, heal {rec.get('heal', {}).get('steps')} steps")  # fmt: skip

    from concurrent.futures import ThreadPoolExecutor

    levers: dict[str, Callable[[], list[dict]]] = {
        **{"depth": depth, "early-exit": early, "trim": vocab, "prune": prune},
        **{"int8": partial(precision, "int8-dynamic"), "mixed": partial(precision, "auto")},
    }
    chosen = [k for k in LEVERS if k in (a.only or LEVERS)]
    with ThreadPoolExecutor(a.jobs) as pool:  # the longest first
        runs = {k: pool.submit(levers[k]) for k in sorted(chosen, key=LONGEST.index)}
    return [r for k in chosen for r in runs[k].result()]


def markdown(r: dict[str, Any]) -> str:
    def iv(c: dict | None) -> str:
        if c is None:
            return "-"
        band = f" [{c['low']:+.2f}, {c['high']:+.2f}]" if c.get("low") is not None else ""
        return f"{c['delta']:+.2f}{band}"

    m = r["machine"]
    lines = [
        f"# Levers on {r['label']} ({r['checkpoint']})",
        "",
        f"Chosen on the first {r['fit']['rows']} rows of {r['fit']['file']} the model never "
        f"trained on ({r['fit'].get('skipped_trained_rows', 0)} trained rows skipped; "
        f"{r['fit'].get('how', '-')}), "
        f"reported on {r['report']['rows']} rows of {r['report']['file']}; the model at full "
        f"depth in fp32 (PyTorch): {r['metric']} {r['reference_metric']:.2f} %. Budget "
        f"{r['max_drop_points']} points. CPU {m['cpu']} ({m.get('flag', '-')}), "
        f"{r.get('jobs', 1)} commands at a time, "
        f"{r['threads']} thread(s) each, load "
        f"{m['load_1min']:.1f} at the end (seconds are noise on a shared machine).",
        "",
        "| lever | choice | report % | Δ points [95 % paired] | layers run | FLOPs ×full "
        "| bytes ×full | caps | s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for x in r["levers"]:
        c = x["cost"] or {}
        lines.append(
            f"| {x['lever']} | {x['choice']} | {c.get('metric', '-')} | {iv(x['cost'])} | "
            f"{x.get('layers') or '-'} | {x['flops']:.3f} | {x['bytes']:.3f} | {x['caps']} | "
            f"{x['seconds']:.0f} |"
        )
    per: dict = next(
        (x.get("per_depth_report") for x in r["levers"] if x["lever"][:5] == "depth"), {}
    )
    for head, what in (
        ("refit", "the head re-fitted after layer k"),
        ("own", "the model's own head"),
    ):
        v = ", ".join(f"{k}: {iv(c)}" for k, c in (per or {}).get(head, {}).items())
        lines += (
            ["", f"Every searched depth k on the report rows, {what} (Δ points): {v}"] if v else []
        )
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.levers", description=__doc__)
    p.add_argument("checkpoint", type=Path, help="a sequence-classification HF directory")
    p.add_argument(
        "--fit",
        type=Path,
        required=True,
        help="labelled rows (GLUE .tsv); rows the checkpoint trained on are skipped (its "
        "trained_rows.bin; or, given its own train file, all but its held-out split)",
    )
    p.add_argument("--fit-rows", type=int, default=4000, help="first N rows of --fit (4000)")
    p.add_argument("--report", type=Path, required=True, help="labelled rows never chosen on")
    p.add_argument("--out", type=Path, required=True, help="work directory (created)")
    p.add_argument("--label", default=None, help="the model's name in the table")
    p.add_argument("--max-drop", type=float, default=0.5, help="budget in points (0.5)")
    p.add_argument("--jobs", type=int, default=2, help="levers run at once (2)")
    p.add_argument("--threads", type=int, default=1, help="threads per command (1)")
    p.add_argument("--resume", action="store_true", help="reuse DIR's finished commands")
    p.add_argument("--only", type=lambda v: v.split(","), help=f"some of {','.join(LEVERS)}")
    a = p.parse_args(argv)
    for f in (a.fit, a.report, a.checkpoint / "config.json"):
        if not f.is_file():
            p.error(f"{f}: no such file")
    if set(a.only or ()) - set(LEVERS):
        p.error(f"--only {','.join(a.only)}: choose among {','.join(LEVERS)}")
    t0, ckpt = time.time(), a.checkpoint.resolve()
    a.out.mkdir(parents=True, exist_ok=True)
    head, unseen, skipped, how = never_trained(ckpt, a.fit)
    kept = unseen[: a.fit_rows]
    (a.out / "fit.tsv").write_text("\n".join([head, *kept]) + "\n")
    a.rows = len(kept)
    global RESUME  # the fit rows, the report rows, the checkpoint's files: what --resume keys on
    h = hashlib.sha256((a.out / "fit.tsv").read_bytes() + a.report.read_bytes())
    for f in sorted(ckpt.iterdir()) if a.resume else []:
        h.update(f.name.encode() + (f.read_bytes() if f.is_file() else b""))
    RESUME = h.hexdigest() if a.resume else ""
    levers = run(ckpt, a.report.resolve(), a.out, a)
    r = {
        "label": a.label or ckpt.name,
        "checkpoint": ckpt.name,
        "fit": {"file": a.fit.name, "rows": a.rows, "skipped_trained_rows": skipped, "how": how},
        "report": {"file": a.report.name, "rows": a.reference.examples},
        "metric": a.reference.primary,
        "reference_metric": round(a.reference.value * 100, 2),
        "max_drop_points": a.max_drop,
        "threads": a.threads,
        "jobs": a.jobs,
        "levers": levers,
        "seconds": round(time.time() - t0, 1),
        "machine": {
            "cpu": machine_info()["cpu"],
            "flag": cpu_flag(),
            "load_1min": round(os.getloadavg()[0], 2),
        },
    }
    (a.out / "levers.json").write_text(json.dumps(r, indent=2) + "\n")
    (a.out / "levers.md").write_text(markdown(r))
    print(markdown(r))
    return 0


def never_trained(ckpt: Path, fit: Path) -> tuple[str, list[str], int, str]:
    """The header and the rows of ``fit`` (a GLUE .tsv) the checkpoint never trained on, how
    many were left out and how that was known: its ``trained_rows.bin`` lists them, or, where
    ``fit`` is its own training file (same sha256) and it lists none, all but its held-out
    split (``training.json``'s fraction and seed)."""
    from albert_edge.learn.split import HeldOut
    from albert_edge.tasks.seen import read_seen, text_digest

    raw = fit.read_bytes()
    head, *body = raw.decode("utf-8").splitlines()
    text = head.split("\t").index("sentence") if "sentence" in head.split("\t") else -1
    seen = read_seen(ckpt)
    if seen is not None:
        kept = [ln for ln in body if text_digest(ln.split("\t")[text]) not in seen]
        return head, kept, len(body) - len(kept), "its trained_rows.bin"
    rec = rd(ckpt / "training.json").get("data", {}) if (ckpt / "training.json").is_file() else {}
    held = rec.get("held_out") or {}
    same = (rec.get("train") or {}).get("sha256") == hashlib.sha256(raw).hexdigest()
    if same and held.get("seed") is not None and rec["train"].get("rows") == len(body):
        texts = [ln.split("\t")[text] for ln in body] if held.get("by") == "sentence" else None
        _, idx = HeldOut(held["fraction"], held["seed"]).split(len(body), fit.name, texts)
        return head, [body[i] for i in idx], len(body) - len(idx), "its held-out split"
    return head, body, 0, "not checked: it records no trained rows, --fit is not its train file"


if __name__ == "__main__":
    sys.exit(main())
