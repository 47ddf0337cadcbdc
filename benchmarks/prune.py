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
5. TextPruner (PyPI ``textpruner``) at the same level on the same fit rows, where it runs
   (``--textpruner DIR``: a folder it was installed into with ``pip install --no-deps
   --target DIR textpruner``: its pinned numpy 1.21 would replace the environment's).

Timing on a shared machine is noise-prone: the load average is recorded beside it.
Outputs: ``benchmarks/results/prune.json`` and ``prune.md``. Run:
``python -m benchmarks.prune --model DIR --data REST.tsv [--pruned DIR] [--work DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

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
    from albert_edge.verify import read_task_data
    from albert_edge.vocab.heldout import max_len_of, model_config

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


def onnx_int8(src: Path, pruned: Path, work: Path, runs: int | None) -> dict[str, Any]:
    """int8-dynamic ONNX of both checkpoints at full depth: bytes, W1 (1 x 128, 2 threads)."""
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
        size = sum(f.stat().st_size for f in art.glob("*.onnx*"))
        out["artifacts"][name] = {"onnx_bytes": size}
        targets.append(resolve_target(art).with_(name=name))
    if len(targets) == 2:
        out["load_before"] = [round(x, 2) for x in os.getloadavg()]
        report = time_targets(
            targets, "onnxruntime", batch=1, seq=128, threads=2, runs=runs, warmup=None
        )
        out["load_after"] = [round(x, 2) for x in os.getloadavg()]
        for row in report["results"]:
            name = row.get("target") or row.get("name")
            for key in out["artifacts"]:
                if key == name or (isinstance(name, str) and name.endswith(key)):
                    out["artifacts"][key]["w1_p50_ms"] = p50(row)
        a = out["artifacts"]
        if a["unpruned"].get("w1_p50_ms") and a["pruned"].get("w1_p50_ms"):
            out["w1_ratio"] = a["pruned"]["w1_p50_ms"] / a["unpruned"]["w1_p50_ms"]
        out["bench_rows"] = report["results"]
    return out


def textpruner_peer(src: Path, rec: dict[str, Any], data: Path, folder: Path) -> dict[str, Any]:
    """TextPruner's iterative (first-order) pruning at the chosen level, where it runs."""
    sys.path.insert(0, str(folder))
    try:
        import textpruner  # type: ignore[import-not-found]
        from textpruner import TransformerPruner, TransformerPruningConfig
    except Exception as exc:
        return {"ran": False, "why": f"not importable: {type(exc).__name__}: {exc}"[:300]}
    import transformers

    from albert_edge.checkpoint import load_checkpoint

    ckpt = load_checkpoint(src)
    cfg = ckpt.config
    why_groups = None
    if int(cfg.num_hidden_groups) > 1 or int(cfg.inner_group_num) > 1:
        why_groups = (
            "TextPruner's ALBERT structure (model_utils/albert.py) names only "
            "'encoder.albert_layer_groups.0.albert_layers.0' and sizes its masks by "
            f"num_hidden_layers ({cfg.num_hidden_layers}): a model with "
            f"{cfg.num_hidden_groups} groups has no form in it"
        )
    model = getattr(transformers, ckpt.head.hf_class).from_pretrained(str(src))
    try:
        tp_cfg = TransformerPruningConfig(
            target_ffn_size=rec["kept"]["ffn_per_layer"],
            target_num_of_heads=rec["kept"]["heads_per_layer"],
            pruning_method="iterative",
            n_iters=1,
        )
        import albert_edge.tasks as tasks
        from albert_edge.learn.tasks import collate
        from albert_edge.verify import read_task_data
        from albert_edge.vocab.heldout import model_config

        rows = read_task_data(data, src, model_config(src) or {})
        feats = tasks.encode(rows.subset(range(512)), ckpt.tokenizer(), 64)
        batches = [collate(feats, idx) for idx in feats.batches(32)]
        pruner = TransformerPruner(model, transformer_pruning_config=tp_cfg)
        pruner.prune(dataloader=batches, adaptor=lambda out: out.loss, save_model=False)
    except Exception as exc:
        return {
            "ran": False,
            "version": getattr(textpruner, "__version__", "?"),
            "why": f"{type(exc).__name__}: {exc}"[:300],
            "structure": why_groups,
        }
    return {"ran": True, "version": textpruner.__version__, "structure": why_groups}


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
        f"{r['machine']['load_average_1_5_15']} at the start (a shared machine: 8 helpers).",
        "",
        "## What was kept",
        "",
        f"- heads per shared layer: **{k['heads_per_layer']} of {k['of_heads']}**; FFN neurons: "
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
            f"| {e['heads_keep']} | {e['ffn_keep']} | {e.get('flops_ratio', 1):.3f} | "
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
        if "w1_ratio" in o:
            lines.append(
                f"- **W1 pruned / unpruned: x{o['w1_ratio']:.3f}** (load average "
                f"{o['load_before']} before, {o['load_after']} after: noisy)"
            )
    t = r.get("textpruner")
    lines += ["", "## TextPruner as a peer", ""]
    if not t:
        lines.append("Not run.")
    elif t.get("ran"):
        lines.append(f"TextPruner {t['version']} ran. {t.get('note', '')}")
    else:
        lines.append(f"TextPruner {t.get('version', '')} did not run: `{t['why']}`.")
        if t.get("structure"):
            lines.append(f"Why: {t['structure']}.")
    if r.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in r["notes"]]
    return "\n".join(lines) + "\n"


def save(r: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "prune.json").write_text(json.dumps(r, indent=2) + "\n")
    (RESULTS / "prune.md").write_text(render(r))


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
    p.add_argument("--textpruner", type=Path, default=None, help="folder TextPruner is in")
    p.add_argument("--render", action="store_true", help="re-render the Markdown from the JSON")
    a = p.parse_args(argv)
    if a.render:
        save(json.loads((RESULTS / "prune.json").read_text()))
        return 0
    if a.model is None or a.data is None:
        p.error("--model and --data are required (unless --render)")
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
    if a.textpruner is not None:
        log("TextPruner")
        r["textpruner"] = textpruner_peer(a.model, r["prune"], a.data, a.textpruner)
    save(r)
    log(f"wrote {RESULTS / 'prune.json'} and prune.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
