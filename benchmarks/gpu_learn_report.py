"""The report of ``bash benchmarks/gpu_learn.sh OUT``: ``train --init`` on CUDA with each
``--amp`` and the deep teacher's masked-LM pretraining, read from the files the script wrote
into ``OUT`` and written as ``benchmarks/results/gpu_learn.{json,md}``.

    python -m benchmarks.gpu_learn_report OUT

The numbers are the training records themselves (``training.json`` of each run,
``pretraining.json``, the teacher's ``deep_teacher.json`` inside ``deep_teacher.tar.gz``);
nothing is re-measured here.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def collect(out: Path) -> dict[str, Any]:
    """Everything ``gpu_learn.sh`` left in ``out``, as one record."""
    runs = {}
    for f in sorted(out.glob("train_*.json")):
        t = json.loads(f.read_text())
        held = t["held_out_accuracy"]
        runs[f.stem[len("train_") :]] = {
            "device": t["device"],
            "amp": t["settings"]["amp"],
            "rows": t["settings"]["max_train_rows"],
            "epochs": t["settings"]["epochs"],
            "batch": t["settings"]["batch_size"],
            "train_s": t["train_s"],
            "wall_s": t["wall_time_s"],
            "held_out": {k: held[k] for k in ("accuracy", "low", "high", "rows")},
            "dev_accuracy": t["dev_accuracy"],
            "torch": t["machine"]["torch"],
        }
    rec: dict[str, Any] = {
        "machine": (out / "gpu_learn_machine.txt").read_text().strip().splitlines(),
        "train": runs,
    }
    pre = out / "pretraining.json"
    if pre.is_file():
        rec["pretraining"] = json.loads(pre.read_text())
    tar = out / "deep_teacher.tar.gz"
    if tar.is_file():
        with tarfile.open(tar) as tf:
            member = tf.extractfile("t/deep_teacher.json")
            if member is not None:
                rec["teacher"] = json.loads(member.read())["finetune"]
    return rec


def _pct(x: float) -> str:
    return f"{100 * x:.2f}"


def markdown(rec: dict[str, Any]) -> str:
    lines = [
        "# Learning on a GPU: `train --init` with each `--amp`, and masked-LM pretraining",
        "",
        "`bash benchmarks/gpu_learn.sh OUT .whl` on a lent GPU, then "
        "`python -m benchmarks.gpu_learn_report OUT`. Machine:",
        "",
        *[f"    {m}" for m in rec["machine"]],
        "",
        "## `albert-edge train --init` of the embedded model on CUDA",
        "",
        "Each run its own process (its CUDA start-up inside `wall`); held-out rows are the "
        "seeded split of SST-2 train (the embedded model was trained on them, so the "
        "held-out figure is high; dev is the report split). One run each: a check that every "
        "`--amp` path trains and keeps accuracy, not a speed study.",
        "",
        "| --amp | rows × epochs (batch) | train s | wall s | held-out % [95 %] | dev % |",
        "|---|---|---:|---:|---|---:|",
    ]
    for amp, r in rec["train"].items():
        h = r["held_out"]
        lines.append(
            f"| {amp} | {r['rows']} × {r['epochs']} ({r['batch']}) | {r['train_s']} | "
            f"{r['wall_s']} | {_pct(h['accuracy'])} [{_pct(h['low'])}, {_pct(h['high'])}] "
            f"| {_pct(r['dev_accuracy'])} |"
        )
    base = rec["train"].get("none")
    if base:
        lines += [""] + [
            f"- `--amp {amp}`: train time {r['train_s'] / base['train_s']:.1f}× `--amp none`'s."
            for amp, r in rec["train"].items()
            if amp != "none"
        ]
        lines += [
            "",
            "At this size (the 4-layer H=128 model, batch 64, length-bucketed batches of many "
            "widths) autocast adds cast kernels around every small GEMM, and for half-precision "
            "attention PyTorch's SDPA takes cuDNN / memory-efficient kernels that set up per "
            "new shape; not investigated further. `--amp auto` stays bf16, the choice for "
            "models big enough to be bound by their GEMMs. The NCCL path (`torchrun` on CUDA) "
            "needs two GPUs: one GPU cannot hold two NCCL ranks, and one process starts no "
            "process group, so it did not run here.",
        ]
    pre = rec.get("pretraining")
    if pre:
        hp = pre["hyperparameters"]
        curve = pre.get("loss_curve") or []
        lines += [
            "",
            "## Masked-LM pretraining of the deep teacher (`benchmarks.deep_teacher`)",
            "",
            f"L={pre['config']['layers']} in {pre['config']['groups']} groups, "
            f"H={pre['config']['hidden']}, on {pre['corpus']['distinct_sentences']:,} "
            "distinct SST-2 train sentences outside the held-out split (labels not read), "
            f"device {pre.get('device')}: {pre['steps_done']} of {hp['steps']} planned steps "
            f"of {hp['batch']} (lr {hp['lr']}) in {pre['wall_s']} s"
            + (f" — {pre['stopped_early']}" if pre.get("stopped_early") else "")
            + ".",
            "",
            "| step | MLM loss | s |",
            "|---:|---:|---:|",
            *[f"| {s} | {loss} | {t} |" for s, loss, t in curve],
        ]
    t = rec.get("teacher")
    if t:
        h = t["held_out_accuracy"]
        lines += [
            "",
            f"Then `benchmarks.deep_teacher finetune` on {t['device']}: {t['epochs']} epochs, "
            f"lr {t['lr']}, {t['max_train_rows']:,} rows, {t['wall_s']} s: held-out "
            f"{_pct(h['accuracy'])} % [{_pct(h['low'])}, {_pct(h['high'])}], dev "
            f"{_pct(t['dev_accuracy'])} %. What its depth is worth to a student: "
            "`benchmarks/results/learn.md`, section `deep-teacher-mlm-L6-G6-gpu`.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_learn_report", description=__doc__)
    p.add_argument("out", type=Path, help="the OUT_DIR gpu_learn.sh wrote")
    a = p.parse_args(argv)
    rec = collect(a.out)
    (RESULTS / "gpu_learn.json").write_text(json.dumps(rec, indent=2) + "\n")
    (RESULTS / "gpu_learn.md").write_text(markdown(rec))
    print(RESULTS / "gpu_learn.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
