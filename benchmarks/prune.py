"""Pruning heads and FFN neurons of a held-out model, measured (``albert-edge prune``).

Through the public face (:func:`albert_edge.prune.prune`, ``convert``, ``bench``):

1. ``prune MODEL --data REST --max-drop P``: REST are training rows the model never saw
   (split by the prune into fit / choose / report rows); the level is chosen on the choose
   rows, the report rows are scored before and after healing (``prune.json``);
2. SST-2 dev (never read by the prune) scored for the unpruned model, the pruned model
   before healing (the plan re-applied to the source weights) and the written (healed)
   checkpoint, each paired with the unpruned model on the same rows (95 % bootstrap);
3. kept heads / neurons, encoder FLOPs at 128 tokens, checkpoint bytes;
4. int8 ONNX (``int8-dynamic``) at full depth of the unpruned and the pruned checkpoint:
   bytes and W1 (batch 1, 128 tokens, 2 threads, ``bench()``: one child process per
   artifact); where the conversion of a pruned checkpoint fails, the error is recorded;
5. TextPruner (PyPI ``textpruner``) at the same level on the same fit rows, where it is
   installed; else one line says how to add it and the peer row is skipped (its pinned
   dependencies, numpy 1.21 among them, would change this environment's: install it with
   albert-edge into a separate virtual environment, ``pip install textpruner``, and run
   this benchmark with that environment's python). ``--no-textpruner`` skips it.

Timing on a shared machine is noise-prone: the load average is recorded beside it.
Outputs: ``benchmarks/results/prune.json`` and ``prune.md``. Run:
``python -m benchmarks.prune --model DIR --data REST.tsv [--pruned DIR] [--work DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path
from typing import Any

from albert_edge.prune.plan import heads_label, per_layer_counts

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("ALBERT_EDGE_SHARED", ROOT.parent / "shared"))
DEV = SHARED / "data" / "sst2" / "dev.tsv"
RESULTS = ROOT / "benchmarks" / "results"


def log(msg: str) -> None:
    print(f"prune bench: {msg}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    family = "unknown"
    try:
        info = Path("/proc/cpuinfo").read_text()
        family = "avx512_vnni" if "avx512_vnni" in info else "avx2" if "avx2" in info else family
    except OSError:
        pass
    return {
        "cpu_family": family,
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
    }


def dev_scores(src: Path, pruned: Path, dev: Path) -> dict[str, Any]:
    """SST-2 dev: unpruned, pruned before healing, the written checkpoint, paired."""
    import albert_edge.tasks as tasks
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.prune import Plan, apply_plan, load_pruned
    from albert_edge.prune.evaluate import metrics, versus
    from albert_edge.tasks import model_config, read_task_data
    from albert_edge.vocab.heldout import max_len_of

    rec = json.loads((pruned / "prune.json").read_text())
    ckpt = load_checkpoint(src)
    head = ckpt.head.name
    data = read_task_data(dev, src, model_config(src) or {})
    max_len = max_len_of(ckpt)
    feats = tasks.encode(data, ckpt.tokenizer(), max_len)
    plan = Plan(
        heads={int(k): tuple(v["heads_kept"]) for k, v in rec["layers"].items()},
        ffn={int(k): tuple(v["ffn_kept"]) for k, v in rec["layers"].items()},
        num_heads=rec["kept"]["of_heads"],
        intermediate=rec["kept"]["of_ffn"],
    )
    ref = metrics(ckpt.model, head, data, feats)
    unhealed = metrics(apply_plan(ckpt.model, plan), head, data, feats)
    written = metrics(load_pruned(pruned, ckpt.head), head, data, feats)
    return {
        "file": dev.name,
        "max_len": max_len,
        "unpruned": ref.value,
        "before_heal": versus(unhealed, ref),
        "written": versus(written, ref),
        "written_is": rec["heal"]["kept"],
    }


def onnx_int8(
    src: Path, pruned: Path, work: Path, runs: int | None, timed: bool = True
) -> dict[str, Any]:
    """int8-dynamic ONNX of both checkpoints at full depth: bytes, W1 (1 x 128, 2 threads;
    not with ``timed=False``)."""
    from albert_edge.bench import resolve_target
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions
    from benchmarks.script_report import p50, time_targets

    out: dict[str, Any] = {"precision": "int8-dynamic", "artifacts": {}}
    targets = []
    for name, ckpt in (("unpruned", src), ("pruned", pruned)):
        art = work / f"onnx-int8-{name}"
        try:
            if not (art / "manifest.json").is_file():
                opts = ConvertOptions(target="onnx", precision="int8-dynamic", overwrite=True)
                convert(ckpt, art, opts)
        except Exception as exc:  # recorded, not hidden: what the conversion refused
            out["artifacts"][name] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            continue
        size = sum(f.stat().st_size for f in art.rglob("*.onnx*"))
        out["artifacts"][name] = {"onnx_bytes": size}
        targets.append(resolve_target(art).with_(name=name))
    if len(targets) == 2 and timed:
        # two passes, the order swapped: a load spike during one artifact's turn shows as
        # a disagreement between the passes, not as a speed-up
        out["passes"] = []
        out["bench_rows"] = []
        for order in (targets, targets[::-1]):
            load = [round(x, 2) for x in os.getloadavg()]
            report = time_targets(
                order, "ort-cpu", batch=1, seq=128, threads=2, runs=runs, warmup=None
            )
            got = {row.get("artifact"): p50(row) for row in report["results"]}
            out["passes"].append({"order": [t.name for t in order], "load": load, "p50": got})
            out["bench_rows"] += report["results"]
        for name, a in out["artifacts"].items():
            times = [p["p50"].get(name) for p in out["passes"] if p["p50"].get(name)]
            a["w1_p50_ms"] = min(times) if times else None
            a["w1_p50_ms_passes"] = times
        a = out["artifacts"]
        if a["unpruned"].get("w1_p50_ms") and a["pruned"].get("w1_p50_ms"):
            out["w1_ratio"] = a["pruned"]["w1_p50_ms"] / a["unpruned"]["w1_p50_ms"]
    return out


def interleaved_w1(src: Path, work: Path, dev: Path, rounds: int) -> dict[str, Any]:
    """W1 again, both int8 artifacts in one process, one run of each in turn (the order
    swapped every round) on the same 128 tokens of SST-2 dev text, 2 threads: a load
    spike hits both alike, so the ratio of their quantiles is steadier than two separate
    timings on a busy machine (at the cost of not being alone in the process)."""
    import time

    import numpy as np

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.data import read_sst2
    from albert_edge.runtime import open_runner

    tok = load_checkpoint(src).tokenizer()
    text = " ".join(t for _, t in read_sst2(dev)[:40])
    enc = tok.encode(text, max_length=128, padding="max_length")
    feeds = {
        "input_ids": np.asarray(enc.input_ids, dtype=np.int64),
        "attention_mask": np.asarray(enc.attention_mask, dtype=np.int64),
        "token_type_ids": np.asarray(enc.token_type_ids, dtype=np.int64),
    }
    runners = {n: open_runner(work / f"onnx-int8-{n}", threads=2) for n in ("unpruned", "pruned")}
    times: dict[str, list[float]] = {n: [] for n in runners}
    for _ in range(10):  # warm-up
        for r in runners.values():
            r.run(feeds)
    load = [round(x, 2) for x in os.getloadavg()]
    for i in range(rounds):
        for n in list(runners)[:: 1 if i % 2 == 0 else -1]:
            t = time.perf_counter()
            runners[n].run(feeds)
            times[n].append(1000 * (time.perf_counter() - t))
    q = {n: {k: float(np.percentile(v, p)) for k, p in (("p10", 10), ("p50", 50), ("p90", 90))}
         for n, v in times.items()}  # fmt: skip
    return {
        "rounds": rounds,
        "tokens": int(feeds["input_ids"].shape[1]),
        "load": load,
        "ms": q,
        "ratio": {k: q["pruned"][k] / q["unpruned"][k] for k in ("p10", "p50", "p90")},
    }


def onnx_dev(src: Path, work: Path, dev: Path) -> dict[str, Any]:
    """The task's metric on ``dev`` (SST-2 dev; the QA / NER eval rows with --task) of
    each int8 artifact (ONNX Runtime), paired with the unpruned PyTorch model on the same
    encoded rows."""
    import albert_edge.tasks as tasks
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.heads import head_by_name
    from albert_edge.prune.evaluate import metrics, versus
    from albert_edge.runtime import open_runner
    from albert_edge.tasks import model_config, read_task_data
    from albert_edge.vocab.heldout import max_len_of

    ckpt = load_checkpoint(src)
    names = head_by_name(ckpt.head.name).outputs
    data = read_task_data(dev, src, model_config(src) or {})
    feats = tasks.encode(data, ckpt.tokenizer(), max_len_of(ckpt))
    ref = metrics(ckpt.model, ckpt.head.name, data, feats)
    out = {}
    for name in ("unpruned", "pruned"):
        art = work / f"onnx-int8-{name}"
        if not (art / "manifest.json").is_file():
            continue
        runner = open_runner(art, threads=1)

        def run(feeds: dict[str, Any], r: Any = runner) -> dict[str, Any]:
            got = r.run(feeds)
            return {n: got[n] for n in names}

        got = tasks.score(data, feats, tasks.run_features(feats, run, batch_size=32))
        out[name] = versus(got, ref)
    return out


TEXTPRUNER_MISSING = (
    "TextPruner is not installed here: `pip install textpruner` into a separate virtual "
    "environment with albert-edge (its pinned numpy would replace this one's) and rerun "
    "with that environment's python; skipping the peer row"
)


def textpruner_peer(src: Path, rec: dict[str, Any], data: Path, dev: Path) -> dict:
    """TextPruner's iterative first-order pruning (one iteration, its loss) at the level
    prune chose, on the same 2,048 fit rows; what it changed per shared layer, whether
    transformers loads what it saves, and its accuracy (unhealed, as prune's search
    judged) on prune's report rows and SST-2 dev."""
    try:
        import textpruner  # type: ignore[import-not-found]
        from textpruner import GeneralConfig, TransformerPruner, TransformerPruningConfig
    except ImportError:
        log(TEXTPRUNER_MISSING)
        return {"ran": False, "why": "not installed (pip install textpruner: a separate venv)"}
    except Exception as exc:  # installed, but its own imports fail against this environment
        return {"ran": False, "why": f"not importable: {type(exc).__name__}: {exc}"[:300]}
    import tempfile

    import transformers

    import albert_edge.tasks as tasks
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.learn.tasks import collate
    from albert_edge.prune.api import PruneOptions, split_indices
    from albert_edge.prune.evaluate import metrics, versus
    from albert_edge.tasks import model_config, read_task_data
    from albert_edge.vocab.heldout import max_len_of

    ckpt = load_checkpoint(src)
    head, tok, max_len = ckpt.head.name, ckpt.tokenizer(), max_len_of(ckpt)
    rows = read_task_data(data, src, model_config(src) or {})
    opts = PruneOptions(max_drop=0.5)  # the benchmark's prune used the default split
    fit, _, report = split_indices(len(rows.examples), opts, str(data))
    feats = tasks.encode(rows.subset(fit[: opts.importance_rows]), tok, max_len)
    batches = [collate(feats, idx) for idx in feats.batches(32)]
    model = getattr(transformers, ckpt.head.hf_class).from_pretrained(str(src)).eval()
    out: dict[str, Any] = {"version": getattr(textpruner, "__version__", "?")}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            pruner = TransformerPruner(
                model,
                transformer_pruning_config=TransformerPruningConfig(
                    target_ffn_size=rec["kept"]["ffn_per_layer"],
                    # TextPruner takes one count: the mean of per-layer counts
                    target_num_of_heads=round(
                        statistics.mean(per_layer_counts(rec["kept"]["heads_per_layer"]))
                    ),
                    pruning_method="iterative",
                    n_iters=1,
                ),
                general_config=GeneralConfig(output_dir=tmp),
            )
            pruner.prune(dataloader=batches, adaptor=lambda o: o.loss, save_model=False)
            out["mask_rows"] = int(pruner.head_mask.shape[0])
            model.save_pretrained(tmp + "/saved")
            try:
                getattr(transformers, ckpt.head.hf_class).from_pretrained(tmp + "/saved")
                out["loads_in_transformers"] = True
            except Exception as exc:
                out["loads_in_transformers"] = f"{type(exc).__name__}: {exc}"[:200]
    except Exception as exc:
        return {**out, "ran": False, "why": f"{type(exc).__name__}: {exc}"[:300]}
    layers = []
    for g, group in enumerate(model.albert.encoder.albert_layer_groups):
        for i, layer in enumerate(group.albert_layers):
            layers.append(
                {
                    "group": g,
                    "inner": i,
                    "heads": int(layer.attention.query.weight.shape[0])
                    // int(layer.attention.attention_head_size),
                    "ffn": int(layer.ffn.weight.shape[0]),  # out_features is left stale
                }
            )
    out.update(ran=True, layers=layers, config_intermediate_size=model.config.intermediate_size)
    for name, d in (("report", rows.subset(report)), ("dev", None)):
        d = d or read_task_data(dev, src, model_config(src) or {})
        f = tasks.encode(d, tok, max_len)
        out[name] = versus(metrics(model, head, d, f), metrics(ckpt.model, head, d, f))
    return out


def _loaded(r: dict[str, Any]) -> bool:
    """Whether the 1-minute load average at the start says other work shared the CPUs."""
    m = r["machine"]
    return float(m["load_average_1_5_15"][0]) > float(m.get("cpus") or 2)


def render(r: dict[str, Any]) -> str:
    p = r["prune"]
    k = p["kept"]
    lines = [
        "# Pruning heads and FFN neurons (`albert-edge prune`)",
        "",
        f"`python -m benchmarks.prune` — model `{r['model']}` "
        f"({r['shape']}), `--data {p['data']['file']}` ({p['data']['rows']:,} training rows "
        f"it never trained on), `--max-drop {r['max_drop']}`. CPU: {r['machine']['cpu_family']}"
        f" ({r['machine']['processor']}, {r['machine']['cpus']} CPUs), load average "
        f"{r['machine']['load_average_1_5_15']} at the start"
        + (" (a shared, loaded machine)." if _loaded(r) else " (an idle machine)."),
        "",
        "## What was kept",
        "",
        f"- heads per shared layer: **{heads_label(k['heads_per_layer'])} of {k['of_heads']}**; FFN neurons: "
        f"**{k['ffn_per_layer']} of {k['of_ffn']}** (pruned_heads {k['pruned_heads']})",
        f"- encoder FLOPs at 128 tokens: x{p['cost']['encoder_flops_128']['ratio']:.3f}; "
        f"checkpoint bytes {r['bytes']['unpruned']:,} -> {r['bytes']['pruned']:,} "
        f"(x{r['bytes']['pruned'] / r['bytes']['unpruned']:.3f}; the word table is unchanged)",
        f"- split: {p['data']['fit_rows']:,} fit / {p['data']['choose_rows']:,} choose / "
        f"{p['data']['report_rows']:,} report rows; importance on {p['importance']['rows']:,} "
        f"fit rows; heal {p['heal'].get('steps', 0)} steps, kept: {p['heal']['kept']}",
        f"- wall time: {p['seconds']}",
        "",
        "## The search (choose rows, unhealed, 0/1 gates)",
        "",
        "| heads | FFN | FLOPs x | delta (points) | 95 % interval | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for e in p["selection"]["evidence"]:
        iv = (
            f"[{100 * e['delta_low']:+.2f}, {100 * e['delta_high']:+.2f}]"
            if e.get("delta_low") is not None
            else "-"
        )
        verdict = "**chosen**" if e.get("chosen") else (e.get("why_not") or "admitted")
        lines.append(
            f"| {heads_label(e['heads_keep'])} | {e['ffn_keep']} | {e.get('flops_ratio', 1):.3f} | "
            f"{100 * e['delta']:+.2f} | {iv} | {verdict} |"
        )

    def row(name: str, v: dict[str, Any]) -> str:
        iv = (
            f"[{100 * v['delta_low']:+.2f}, {100 * v['delta_high']:+.2f}]"
            if v.get("delta_low") is not None
            else "-"
        )
        return (
            f"| {name} | {v['examples']:,} | {100 * v['unpruned']:.2f} | {100 * v['pruned']:.2f}"
            f" | {100 * v['delta']:+.2f} | {iv} |"
        )

    lines += [
        "",
        "## Accuracy, before and after healing (PyTorch)",
        "",
        "| rows | n | unpruned | pruned | delta (points) | paired 95 % |",
        "|---|---|---|---|---|---|",
        row("report rows, before heal", p["report"]["before_heal"]),
    ]
    if "after_heal" in p["report"]:
        lines.append(row("report rows, after heal", p["report"]["after_heal"]))
    d = r["dev"]
    lines.append(row("SST-2 dev, before heal", d["before_heal"]))
    lines.append(row(f"SST-2 dev, written ({d['written_is']})", d["written"]))
    o = r.get("onnx")
    lines += ["", "## int8 ONNX at full depth (W1: batch 1, 128 tokens, 2 threads)", ""]
    if not o:
        lines.append("Not measured in this run.")
    else:
        for name, a in o["artifacts"].items():
            if "error" in a:
                lines.append(f"- {name}: conversion failed: `{a['error']}`")
            else:
                w1 = a.get("w1_p50_ms")
                lines.append(
                    f"- {name}: {a['onnx_bytes']:,} bytes" + (f", W1 p50 {w1:.2f} ms" if w1 else "")
                )
        for p_ in o.get("passes", []):
            times = ", ".join(f"{k} {v:.2f} ms" for k, v in p_["p50"].items() if v)
            lines.append(f"- pass (order {' then '.join(p_['order'])}, load {p_['load']}): {times}")
        if "w1_ratio" in o:
            lines.append(
                f"- **W1 pruned / unpruned: x{o['w1_ratio']:.3f}** (p50, the faster pass of "
                "each" + ("; a shared, loaded machine: noisy)" if _loaded(r) else ")")
            )
        fastest: dict[str, float] = {}
        for b in o.get("bench_rows", []):
            m = (b.get("latency_ms") or {}).get("min")
            if isinstance(m, int | float):
                fastest[b["artifact"]] = min(fastest.get(b["artifact"], m), m)
        if {"unpruned", "pruned"} <= set(fastest):
            lines.append(
                f"- fastest single run (the least disturbed by the load): unpruned "
                f"{fastest['unpruned']:.2f} ms, pruned {fastest['pruned']:.2f} ms: "
                f"**x{fastest['pruned'] / fastest['unpruned']:.3f}**"
            )
    iw = (o or {}).get("interleaved")
    if iw:
        ms, ratio = iw["ms"], iw["ratio"]
        lines.append(
            f"- interleaved in one process ({iw['rounds']} rounds, one run of each in turn, "
            f"{iw['tokens']} tokens, load {iw['load']}): unpruned p10/p50 "
            f"{ms['unpruned']['p10']:.2f}/{ms['unpruned']['p50']:.2f} ms, pruned "
            f"{ms['pruned']['p10']:.2f}/{ms['pruned']['p50']:.2f} ms: **x{ratio['p10']:.3f} "
            f"(p10), x{ratio['p50']:.3f} (p50)**"
        )
    if o and o.get("dev"):
        lines += [
            "",
            "SST-2 dev of the int8 artifacts (ONNX Runtime), paired with the unpruned "
            "PyTorch model:",
            "",
            "| artifact | n | unpruned PyTorch | artifact | delta (points) | paired 95 % |",
            "|---|---|---|---|---|---|",
        ]
        lines += [row(f"int8 ONNX, {k}", v) for k, v in o["dev"].items()]
    t = r.get("textpruner")
    lines += ["", "## TextPruner as a peer", ""]
    if not t:
        lines.append("Not run.")
    elif t.get("ran"):
        shapes = "; ".join(
            f"group {x['group']} layer {x['inner']}: {x['heads']} heads, FFN {x['ffn']}"
            for x in t["layers"]
        )
        lines += [
            f"TextPruner {t['version']} (iterative, 1 iteration, its loss, the same 2,048 fit "
            f"rows, target {k['heads_per_layer']} heads / {k['ffn_per_layer']} FFN) sized its "
            f"masks {t['mask_rows']} x heads: it sees one ALBERT layer (group 0, inner 0). "
            f"After it: {shapes}; config.intermediate_size {t['config_intermediate_size']}; "
            f"transformers loads what it saves: {' '.join(str(t['loads_in_transformers']).split())}",
            "",
            "| rows | n | unpruned | TextPruner | delta (points) | paired 95 % |",
            "|---|---|---|---|---|---|",
            row("report rows (unhealed)", t["report"]),
            row("SST-2 dev (unhealed)", t["dev"]),
        ]
    else:
        lines.append(f"TextPruner {t.get('version', '')} did not run: `{t['why']}`.")
        if t.get("structure"):
            lines.append(f"Why: {t['structure']}.")
    if r.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in r["notes"]]
    for task, t in r.get("tasks", {}).items():
        lines += render_task(task, t, row)
    return "\n".join(lines) + "\n"


def render_task(task: str, t: dict[str, Any], row: Any) -> list[str]:
    """The section of one ``--task squad|conll`` run."""
    p, k, m = t["prune"], t["prune"]["kept"], t["machine"]
    d, metric = t["dev"], TASKS.get(task, task)
    level = " ".join(
        f"--{name.replace('_', '-')} {v:g}" for name, v in t["level"].items() if v is not None
    )
    lines = [
        "",
        f"## {metric}: a {task} model trained from scratch here (`--task {task}`)",
        "",
        f"`python -m benchmarks.prune --task {task}` — model `{t['model']}` ({t['shape']}), "
        f"trained from scratch on this machine (no pretrained weights: its {metric} is low, "
        f"what is measured is the change pruning makes), `--data {p['data']['file']}` "
        f"({p['data']['rows']:,} rows: fit / choose / report {p['data']['fit_rows']:,} / "
        f"{p['data']['choose_rows']:,} / {p['data']['report_rows']:,}), `{level}`, scored on "
        f"`{t['dev_file']}` (never read by the prune). CPU: {m['cpu_family']} "
        f"({m['processor']}, {m['cpus']} CPUs), load average {m['load_average_1_5_15']} at "
        "the start.",
        "",
        f"- kept per shared layer: **{heads_label(k['heads_per_layer'])} of {k['of_heads']} heads, "
        f"{k['ffn_per_layer']} of {k['of_ffn']} FFN neurons** "
        f"({100 * (1 - k['ffn_per_layer'] / k['of_ffn']):.0f} % of the FFN removed); "
        f"encoder FLOPs at 128 tokens x{p['cost']['encoder_flops_128']['ratio']:.3f}; "
        f"checkpoint bytes {t['bytes']['unpruned']:,} -> {t['bytes']['pruned']:,}",
        f"- heal: {p['heal'].get('steps', 0)} steps, batch {p['heal'].get('batch_size', '?')}"
        f", kept: {p['heal']['kept']}; wall time {p['seconds']}",
        "",
        "| rows | n | unpruned | pruned | delta (points) | paired 95 % |",
        "|---|---|---|---|---|---|",
    ]
    choose = p["heal"].get("choose") or {}
    if choose:  # the rows the heal is judged on: shown even where the heal was not kept
        lines.append(row("choose rows, before heal", choose["before"]))
        lines.append(row("choose rows, after heal", choose["after"]))
    lines.append(row("report rows, before heal", p["report"]["before_heal"]))
    if "after_heal" in p["report"]:
        lines.append(row("report rows, after heal", p["report"]["after_heal"]))
    lines.append(row(f"{t['dev_file']}, before heal", d["before_heal"]))
    lines.append(row(f"{t['dev_file']}, written ({d['written_is']})", d["written"]))
    o = t.get("onnx")
    if o:
        for name, a in o["artifacts"].items():
            if "error" in a:
                lines.append(f"| int8 ONNX, {name}: conversion failed `{a['error']}` |||||")
        lines += [row(f"int8 ONNX {name}, {t['dev_file']}", v) for name, v in o["dev"].items()]
        sizes = ", ".join(
            f"{name} {a['onnx_bytes']:,}" for name, a in o["artifacts"].items() if "onnx_bytes" in a
        )
        lines += ["", f"int8-dynamic ONNX bytes: {sizes} (not timed in this run)."]
    if t.get("notes"):
        lines += [""] + [f"- {n}" for n in t["notes"]]
    return lines


def save(r: dict[str, Any]) -> None:
    """Write the JSON and its Markdown; no path of this machine in either (a timed
    artifact is named by its folder)."""
    for row in (r.get("onnx") or {}).get("bench_rows", []):
        if isinstance(row.get("target"), str):
            row["target"] = Path(row["target"]).name
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "prune.json").write_text(json.dumps(r, indent=2) + "\n")
    (RESULTS / "prune.md").write_text(render(r))


TASKS = {"squad": "SQuAD F1", "conll": "entity F1"}


def task_run(a: argparse.Namespace) -> int:
    """``--task squad|conll``: prune a QA / NER model at a fixed level with the heal
    (:func:`albert_edge.prune.prune`), its eval rows (``--dev``) scored for the unpruned,
    the pruned-unhealed and the written model and for the int8 ONNX artifacts of both
    (ONNX Runtime), each paired with the unpruned PyTorch model; the record goes under
    ``tasks.<task>`` of prune.json, the SST-2 run left as it is."""
    from albert_edge.prune import HealSettings, PruneOptions, prune

    a.work.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((a.model / "config.json").read_text())
    t: dict[str, Any] = {
        "machine": machine(),
        "model": a.model.name,
        "shape": f"{cfg['num_hidden_layers']} layers, {cfg['num_hidden_groups']} groups, "
        f"H{cfg['hidden_size']}, E{cfg['embedding_size']}, FFN {cfg['intermediate_size']}, "
        f"{cfg['num_attention_heads']} heads",
        "level": {"heads_keep": a.heads_keep, "ffn_keep": a.ffn_keep},
        "dev_file": a.dev.name,
        "notes": list(a.note),
    }
    pruned = a.pruned
    if pruned is None:
        pruned = a.work / f"pruned-{a.task}"
        log(f"prune {a.model} --data {a.data} --heads-keep {a.heads_keep} --ffn-keep {a.ffn_keep}")
        opts = PruneOptions(
            heads_keep=a.heads_keep,
            ffn_keep=a.ffn_keep,
            heal=HealSettings(steps=a.heal_steps, batch_size=a.heal_batch_size),
            threads=a.threads,
            overwrite=True,
        )
        prune(a.model, a.data, pruned, opts)
    t["prune"] = json.loads((pruned / "prune.json").read_text())
    t["bytes"] = {
        "unpruned": (a.model / "model.safetensors").stat().st_size,
        "pruned": (pruned / "model.safetensors").stat().st_size,
    }
    log(f"{a.dev.name}: unpruned, unhealed, written")
    t["dev"] = dev_scores(a.model, pruned, a.dev)
    if not a.no_onnx:
        log("int8 ONNX of both, scored on the eval rows")
        (a.work / a.task).mkdir(parents=True, exist_ok=True)
        conv = onnx_int8(a.model, pruned, a.work / a.task, runs=None, timed=False)
        t["onnx"] = {**conv, "dev": onnx_dev(a.model, a.work / a.task, a.dev)}
    path = RESULTS / "prune.json"
    r = json.loads(path.read_text()) if path.is_file() else {}
    r.setdefault("tasks", {})[a.task] = t
    save(r)
    log(f"wrote tasks.{a.task} of {path} and prune.md")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, required=False, help="the held-out checkpoint")
    p.add_argument("--data", type=Path, required=False, help="rows it never trained on")
    p.add_argument("--dev", type=Path, default=DEV, help="SST-2 dev (never read by the prune)")
    p.add_argument("--max-drop", type=float, default=0.5)
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "prune")
    p.add_argument("--pruned", type=Path, default=None, help="reuse this prune output")
    p.add_argument("--no-onnx", action="store_true")
    p.add_argument("--runs", type=int, default=None, help="bench() runs per artifact")
    p.add_argument("--no-textpruner", action="store_true", help="skip the TextPruner peer row")
    p.add_argument("--rounds", type=int, default=500, help="interleaved W1 rounds")
    p.add_argument("--note", action="append", default=[], help="a line for the Notes section")
    p.add_argument("--render", action="store_true", help="re-render the Markdown from the JSON")
    p.add_argument(
        "--task",
        choices=("sst2", *TASKS),
        default="sst2",
        help="sst2: the held-out SST-2 model (the sections above); squad / conll: a QA or "
        "NER model pruned at a fixed level (--heads-keep / --ffn-keep), scored on --dev, "
        "recorded under tasks.<task> of prune.json beside the SST-2 run",
    )
    p.add_argument("--heads-keep", type=int, default=None, help="--task squad|conll")
    p.add_argument("--ffn-keep", type=float, default=None, help="--task squad|conll")
    p.add_argument("--heal-steps", type=int, default=300, help="--task squad|conll")
    p.add_argument("--heal-batch-size", type=int, default=32, help="--task squad|conll")
    p.add_argument("--threads", type=int, default=1, help="--task squad|conll: torch threads")
    a = p.parse_args(argv)
    if a.render:
        save(json.loads((RESULTS / "prune.json").read_text()))
        return 0
    if a.model is None or a.data is None:
        p.error("--model and --data are required (unless --render)")
    if a.task != "sst2":
        if a.dev == DEV:
            p.error(f"--task {a.task}: give --dev, the rows to score (never read by the prune)")
        if a.heads_keep is None and a.ffn_keep is None:
            p.error(f"--task {a.task}: give --heads-keep and/or --ffn-keep")
        return task_run(a)
    from albert_edge.prune import PruneOptions, prune

    a.work.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((a.model / "config.json").read_text())
    r: dict[str, Any] = {
        "machine": machine(),
        "model": a.model.name,
        "shape": f"{cfg['num_hidden_layers']} layers, {cfg['num_hidden_groups']} groups, "
        f"H{cfg['hidden_size']}, E{cfg['embedding_size']}, FFN {cfg['intermediate_size']}, "
        f"{cfg['num_attention_heads']} heads",
        "max_drop": a.max_drop,
        "notes": list(a.note),
    }
    pruned = a.pruned
    if pruned is None:
        pruned = a.work / "pruned"
        log(f"prune {a.model} --data {a.data} --max-drop {a.max_drop}")
        prune(a.model, a.data, pruned, PruneOptions(max_drop=a.max_drop, overwrite=True))
    r["prune"] = json.loads((pruned / "prune.json").read_text())
    r["bytes"] = {
        "unpruned": (a.model / "model.safetensors").stat().st_size,
        "pruned": (pruned / "model.safetensors").stat().st_size,
    }
    log("SST-2 dev")
    r["dev"] = dev_scores(a.model, pruned, a.dev)
    if not a.no_onnx:
        log("int8 ONNX: convert and time")
        r["onnx"] = onnx_int8(a.model, pruned, a.work, a.runs)
        log("int8 ONNX: interleaved W1")
        r["onnx"]["interleaved"] = interleaved_w1(a.model, a.work, a.dev, a.rounds)
        log("int8 ONNX: SST-2 dev")
        r["onnx"]["dev"] = onnx_dev(a.model, a.work, a.dev)
    if not a.no_textpruner:
        log("TextPruner")
        r["textpruner"] = textpruner_peer(a.model, r["prune"], a.data, a.dev)
    save(r)
    log(f"wrote {RESULTS / 'prune.json'} and prune.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
