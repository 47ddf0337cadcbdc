"""Vocabulary trimming and a smaller factorized embedding, measured (``albert-edge trim``).

Through the public API (:func:`albert_edge.vocab.trim.trim_checkpoint`, ``convert``):

1. the corpus is SST-2 train; the trim's held-out rows are every 10th train row (never
   counted when choosing pieces); SST-2 dev is never used by the trim;
2. variants: untrimmed, trimmed (every piece the corpus uses), and trimmed with
   ``--embedding-rank`` 32 and 16; each for the embedded model (``sst2-albert-tiny``) and
   for a random-init albert-base shape (bytes only: random weights have no accuracy; its
   rank re-fit runs ``--base-refit-steps`` steps, enough for the bytes, which do not
   depend on it);
3. artifact bytes of each variant: ONNX int8 (``int8-dynamic``), ONNX int4, TFLite int8;
4. the embedded model's accuracy (PyTorch, the reference every artifact is verified
   against) on the held-out rows and on dev, each variant paired with the untrimmed model
   on the same rows (``albert_edge.depth.paired_bootstrap``, 95 %);
5. dev segmentation: the share of dev sentences segmented exactly as before (ids
   remapped) and ``<unk>`` counts before/after.

The embedded model is trained from scratch (~81 % dev, bag-of-words level); its held-out
rows come from SST-2 train, which it was trained on. Accuracy here says whether trimming
changed what the model computes, not how good it is.

Outputs: ``benchmarks/results/vocab_trim.json`` and ``vocab_trim.md`` (written after every
measurement: an interrupted run keeps what it measured). Run:
``python -m benchmarks.vocab_trim [--work DIR] [--skip-base]``.
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

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("ALBERT_EDGE_SHARED", ROOT.parent / "shared"))
TRAIN = SHARED / "data" / "sst2" / "train.tsv"
DEV = SHARED / "data" / "sst2" / "dev.tsv"
SPIECE = SHARED / "data" / "albert" / "30k-clean.model"
RESULTS = ROOT / "benchmarks" / "results"
RANKS = (32, 16)
ROUTES = (("onnx", "int8-dynamic"), ("onnx", "int4"), ("tflite", "int8-dynamic"))


def log(msg: str) -> None:
    print(f"vocab_trim: {msg}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    family = "unknown"
    try:
        info = Path("/proc/cpuinfo").read_text()
        family = "avx512_vnni" if "avx512_vnni" in info else "avx2" if "avx2" in info else family
    except OSError:
        pass
    return {
        "cpu": platform.processor() or platform.machine(),
        "kernel_family": family,
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
    }


def variants(src: Path, work: Path, name: str, refit_steps: int) -> dict[str, Path]:
    """{label: checkpoint dir}: untrimmed, trimmed, trimmed at each rank (reused if present)."""
    from albert_edge.vocab.trim import TrimOptions, trim_checkpoint

    out = {"untrimmed": src}
    plan = [("trimmed", None), *((f"trimmed-rank{r}", r) for r in RANKS)]
    for label, rank in plan:
        dest = work / f"{name}-{label}"
        if not (dest / "trim.json").is_file():
            log(f"{name}: trim {label}")
            opts = TrimOptions(embedding_rank=rank, refit_steps=refit_steps)
            trim_checkpoint(src, TRAIN, dest, opts)
        out[label] = dest
    return out


def artifact_bytes(ckpt: Path, work: Path, tag: str, verify: bool) -> dict[str, int]:
    from albert_edge.convert import convert
    from albert_edge.facts import model_file_bytes
    from albert_edge.options import ConvertOptions

    sizes = {}
    for target, precision in ROUTES:
        out = work / f"art-{tag}-{target}-{precision}"
        if not (out / "manifest.json").is_file():
            log(f"convert {tag} -> {target} {precision}")
            convert(ckpt, out, ConvertOptions(target=target, precision=precision, verify=verify))
        manifest = json.loads((out / "manifest.json").read_text())
        sizes[f"{target}-{precision}"] = model_file_bytes(out / manifest["model_file"])
    return sizes


def predictions(ckpt_dir: Path | None, sentences: list[str]) -> list[int]:
    import torch

    from albert_edge.checkpoint import load_checkpoint

    ck = load_checkpoint(ckpt_dir)
    tok = ck.tokenizer()
    out: list[int] = []
    with torch.no_grad():
        for k in range(0, len(sentences), 128):
            enc = tok.encode(sentences[k : k + 128], max_length=128).as_numpy()
            logits = ck.model(**{n: torch.from_numpy(v) for n, v in enc.items()}).logits
            out += logits.argmax(-1).tolist()
    return out


def accuracy(ckpts: dict[str, Path], rows: list[tuple[int, str]]) -> dict[str, Any]:
    """Accuracy of each variant and its paired difference to the untrimmed model."""
    from albert_edge.depth import accuracy_interval, paired_bootstrap

    labels = [y for y, _ in rows]
    texts = [s for _, s in rows]
    correct = {}
    for label, path in ckpts.items():
        pred = predictions(None if label == "untrimmed" else path, texts)
        correct[label] = [p == y for p, y in zip(pred, labels, strict=True)]
    out: dict[str, Any] = {"rows": len(rows)}
    for label, c in correct.items():
        out[label] = {
            "accuracy": accuracy_interval(c).to_dict(),
            "vs_untrimmed": paired_bootstrap(c, correct["untrimmed"]).to_dict(),
            "predictions_changed": sum(
                a != b for a, b in zip(c, correct["untrimmed"], strict=True)
            ),
        }
    return out


def dev_segmentation(trimmed: Path) -> dict[str, Any]:
    from albert_edge.data import read_sst2
    from albert_edge.tokenizer import AlbertTokenizer
    from albert_edge.vocab.trim import old_ids_of, segmentation_report

    before, after = AlbertTokenizer(SPIECE), AlbertTokenizer(trimmed / "spiece.model")
    dev = [s for _, s in read_sst2(DEV)]
    return segmentation_report(before, after, old_ids_of(before, after), dev)


def save(result: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "vocab_trim.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "vocab_trim.md").write_text(render(result))


def _pct(x: float) -> str:
    return f"{100 * x:.2f}"


def render(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        "# Vocabulary trimming and a smaller factorized embedding",
        "",
        "`python -m benchmarks.vocab_trim` (benchmarks/vocab_trim.py). Corpus: SST-2 train; "
        "the trim's held-out rows: every 10th train row (not counted when choosing pieces); "
        "SST-2 dev is never used by the trim.",
        f"Machine: {m['cpu']}, kernel family {m['kernel_family']}, {m['cpus']} CPUs, "
        f"load average {m['loadavg'][0]:.2f} (bytes and accuracy do not depend on it).",
        "",
        "**The embedded model is trained from scratch (~81 % dev, bag-of-words level)**, on "
        "SST-2 train (the held-out rows included): accuracy here says whether trimming "
        "changed what the model computes, not how good it is.",
        "",
    ]
    for name, block in r.get("models", {}).items():
        lines += [f"## {name}", ""]
        if name != "embedded":
            lines += [
                "Random weights: only the bytes mean anything here; the rank re-fit ran "
                f"{r.get('base_refit_steps', 20)} steps on random tables, so its errors say "
                "nothing about a trained albert-base.",
                "",
            ]
        trims = block.get("trim", {})
        if trims:
            lines += [
                "| variant | pieces | held-out token coverage | held-out exact segmentation "
                "| embedding rank | held-out rel. error of the embedding output (SVD fold -> re-fit) |",
                "|---|---:|---:|---:|---:|---|",
            ]
            for label, t in trims.items():
                h = t["held_out"]
                rank = t.get("embedding_rank")
                err = (
                    f"{rank['held_out_relative_error_svd_fold']:.3f} -> "
                    f"{rank['held_out_relative_error']:.3f}"
                    if rank
                    else "-"
                )
                lines.append(
                    f"| {label} | {t['pieces_kept']:,} of {t['of_pieces']:,} | "
                    f"{_pct(h['token_coverage'])} % | {_pct(h['exact_segmentation_share'])} % | "
                    f"{rank['rank'] if rank else '-'} | {err} |"
                )
            lines.append("")
        sizes = block.get("bytes", {})
        if sizes:
            routes = list(next(iter(sizes.values())))
            lines += ["| variant | " + " | ".join(routes) + " |", "|---|" + "---:|" * len(routes)]
            base = sizes.get("untrimmed", {})
            for label, s in sizes.items():
                cells = []
                for k in routes:
                    ratio = (
                        f" ({s[k] / base[k]:.2f}x)" if k in base and label != "untrimmed" else ""
                    )
                    cells.append(f"{s[k]:,}{ratio}")
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
            lines.append("")
        for split in ("held_out", "dev"):
            acc = block.get("accuracy", {}).get(split)
            if not acc:
                continue
            lines += [
                f"Accuracy on {split.replace('_', '-')} ({acc['rows']:,} rows), PyTorch, each "
                "variant paired with the untrimmed model (bootstrap 95 %):",
                "",
                "| variant | accuracy % [95 %] | Δ points vs untrimmed [95 %] | predictions changed |",
                "|---|---|---|---:|",
            ]
            for label, a in acc.items():
                if label == "rows":
                    continue
                ac, d = a["accuracy"], a["vs_untrimmed"]
                lines.append(
                    f"| {label} | {_pct(ac['delta'])} [{_pct(ac['low'])}, {_pct(ac['high'])}] | "
                    f"{100 * d['delta']:+.2f} [{100 * d['low']:+.2f}, {100 * d['high']:+.2f}] | "
                    f"{a['predictions_changed']} |"
                )
            lines.append("")
        seg = block.get("dev_segmentation")
        if seg:
            lines += [
                f"SST-2 dev ({seg['sentences']} sentences) with the trimmed tokenizer: "
                f"{_pct(seg['exact_segmentation_share'])} % segment exactly as before (ids "
                f"remapped), token coverage {_pct(seg['token_coverage'])} %, `<unk>` "
                f"{seg['unk_before']} before -> {seg['unk_after']} after.",
                "",
            ]
    return "\n".join(lines)


def run_model(name: str, src: Path, work: Path, result: dict[str, Any], a: Any) -> None:
    import json as _json

    from albert_edge.data import read_sst2
    from albert_edge.vocab.corpus import HELD_OUT_EVERY

    block = result["models"].setdefault(name, {})
    embedded = name == "embedded"
    ckpts = variants(src, work, name, a.refit_steps if embedded else a.base_refit_steps)
    block["trim"] = {
        k: _json.loads((p / "trim.json").read_text()) for k, p in ckpts.items() if k != "untrimmed"
    }
    block["dev_segmentation"] = dev_segmentation(ckpts["trimmed"])
    save(result)
    block["bytes"] = {}
    for label, path in ckpts.items():
        block["bytes"][label] = artifact_bytes(path, work, f"{name}-{label}", verify=embedded)
        save(result)
    if embedded:
        train = read_sst2(TRAIN)
        held = [r for i, r in enumerate(train) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1]
        log("accuracy")
        block["accuracy"] = {
            "held_out": accuracy(ckpts, held),
            "dev": accuracy(ckpts, read_sst2(DEV)),
        }
        save(result)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, default=None, help="scratch (reused between runs)")
    p.add_argument("--skip-base", action="store_true", help="only the embedded model")
    p.add_argument("--refit-steps", type=int, default=300, help="embedded model's rank re-fit")
    p.add_argument("--base-refit-steps", type=int, default=20, help="albert-base shape's re-fit")
    p.add_argument("--render", action="store_true", help="re-render the Markdown from the JSON")
    a = p.parse_args(argv)
    if a.render:
        save(json.loads((RESULTS / "vocab_trim.json").read_text()))
        return 0
    work = a.work or Path(tempfile.mkdtemp(prefix="vocab-trim-"))
    work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "machine": machine(),
        "started": time.time(),
        "base_refit_steps": a.base_refit_steps,
        "models": {},
    }
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.configs import make_random_checkpoint

    run_model("embedded", DEFAULT_MODEL, work, result, a)
    if not a.skip_base:
        base = work / "albert-base-random"
        if not (base / "config.json").is_file():
            make_random_checkpoint(base, "albert-base", spiece_model=SPIECE)
        run_model("albert-base shape (random init, bytes only)", base, work, result, a)
    result["seconds"] = time.time() - result["started"]
    save(result)
    log(f"wrote {RESULTS / 'vocab_trim.json'} and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
