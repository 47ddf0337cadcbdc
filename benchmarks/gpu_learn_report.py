"""The report of ``bash benchmarks/gpu_learn.sh OUT``: ``train --init`` on CUDA with each
``--amp`` and the deep teacher's masked-LM pretraining, read from the files the script wrote
into ``OUT`` and written as ``benchmarks/results/<--name>.{json,md}``.

    python -m benchmarks.gpu_learn_report OUT [--control CONTROL_OUT] [--name gpu_learn]

The numbers are the training records themselves (``training.json`` of each run,
``pretraining.json``, each teacher's ``deep_teacher.json`` inside ``deep_teacher*.tar.gz``
or, where the archive was not kept, the same record as the last line of its
``finetune_lr*.log``); nothing is re-measured here. ``--control``: the output of the same
script with ``PRE_STEPS=1`` (one masked-LM step: the random initialisation) and the same
fine-tune settings, the from-scratch control a pretrained teacher has to beat.
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
    teachers = _teachers(out)
    if teachers:
        rec["teachers"] = teachers
    return rec


def _teachers(out: Path) -> list[dict[str, Any]]:
    """Every fine-tuned teacher's record in ``out``, by learning rate."""
    found: dict[str, dict[str, Any]] = {}
    for tar in sorted(out.glob("deep_teacher*.tar.gz")):
        with tarfile.open(tar) as tf:
            member = tf.extractfile("t/deep_teacher.json")
            if member is not None:
                ft = json.loads(member.read())["finetune"]
                found[str(ft["lr"])] = ft
    for log in sorted(out.glob("finetune_lr*.log")):
        last = [line for line in log.read_text().splitlines() if line.startswith('{"recipe"')]
        if last:
            ft = json.loads(last[-1])["finetune"]
            found.setdefault(str(ft["lr"]), ft)
    return sorted(found.values(), key=lambda t: t["lr"])


def _pct(x: float) -> str:
    return f"{100 * x:.2f}"


def _train_lines(train: dict[str, Any]) -> list[str]:
    lines = [
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
    for amp, r in train.items():
        h = r["held_out"]
        lines.append(
            f"| {amp} | {r['rows']} × {r['epochs']} ({r['batch']}) | {r['train_s']} | "
            f"{r['wall_s']} | {_pct(h['accuracy'])} [{_pct(h['low'])}, {_pct(h['high'])}] "
            f"| {_pct(r['dev_accuracy'])} |"
        )
    base = train.get("none")
    if base:
        lines += [""] + [
            f"- `--amp {amp}`: train time {r['train_s'] / base['train_s']:.1f}× `--amp none`'s."
            for amp, r in train.items()
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
    return lines


def markdown(rec: dict[str, Any]) -> str:
    lines = [
        "# Learning on a GPU: `train --init` with each `--amp`, and masked-LM pretraining",
        "",
        "`bash benchmarks/gpu_learn.sh OUT .whl` on a lent GPU, then "
        "`python -m benchmarks.gpu_learn_report OUT`. Machine:",
        "",
        *[f"    {m}" for m in rec["machine"]],
    ]
    if rec["train"]:
        lines += _train_lines(rec["train"])
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
    for title, recs in (("teacher", rec.get("teachers")), ("control", rec.get("control"))):
        if recs:
            lines += _teacher_table(title, recs)
    if rec.get("teachers") and rec.get("control"):
        t = max(rec["teachers"], key=lambda r: r["held_out_accuracy"]["accuracy"])
        c = max(rec["control"], key=lambda r: r["held_out_accuracy"]["accuracy"])
        lines += [
            "",
            f"Each side's best on held-out (the split fine-tuning chose epochs on; so the "
            f"held-out figures carry a small selection among {len(rec['teachers'])} and "
            f"{len(rec['control'])} learning rates, dev carries none): teacher lr {t['lr']} "
            f"{_pct(t['held_out_accuracy']['accuracy'])} % held-out, "
            f"{_pct(t['dev_accuracy'])} % dev; control lr {c['lr']} "
            f"{_pct(c['held_out_accuracy']['accuracy'])} % held-out, "
            f"{_pct(c['dev_accuracy'])} % dev (872 rows: about ±1.7 points at 95 %). "
            f"Teacher minus control: {100 * (t['held_out_accuracy']['accuracy'] - c['held_out_accuracy']['accuracy']):+.2f} "
            f"points held-out, {100 * (t['dev_accuracy'] - c['dev_accuracy']):+.2f} dev. "
            "Whether the teacher uses its depth, and what it gives a depth-2 student: "
            "`benchmarks/results/learn.md` (the teacher directory passed to "
            "`python -m benchmarks.learn --parts deep-teacher --deep-teacher-from DIR`).",
        ]
    return "\n".join(lines) + "\n"


def _teacher_table(title: str, recs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        f"### {'Fine-tuned teachers' if title == 'teacher' else 'From-scratch control'} "
        "(`benchmarks.deep_teacher finetune`"
        + (", from one masked-LM step: the random initialisation)" if title == "control" else ")"),
        "",
        "| lr | rows × epochs (batch) | device | wall s | held-out % [95 %] | dev % |",
        "|---:|---|---|---:|---|---:|",
    ]
    for t in recs:
        h = t["held_out_accuracy"]
        lines.append(
            f"| {t['lr']} | {t['max_train_rows']:,} × {t['epochs']} ({t['batch']}) | "
            f"{t['device']} | {t['wall_s']} | {_pct(h['accuracy'])} [{_pct(h['low'])}, "
            f"{_pct(h['high'])}] | {_pct(t['dev_accuracy'])} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_learn_report", description=__doc__)
    p.add_argument("out", type=Path, help="the OUT_DIR gpu_learn.sh wrote")
    p.add_argument("--control", type=Path, help="the OUT_DIR of its PRE_STEPS=1 control run")
    p.add_argument("--name", default="gpu_learn", help="results file stem")
    a = p.parse_args(argv)
    rec = collect(a.out)
    if a.control:
        rec["control"] = _teachers(a.control)
    (RESULTS / f"{a.name}.json").write_text(json.dumps(rec, indent=2) + "\n")
    (RESULTS / f"{a.name}.md").write_text(markdown(rec))
    print(RESULTS / f"{a.name}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
