#!/usr/bin/env python
"""SST-2 students of one teacher compared on the same dev sentences (issue 55's tries).

``python -m benchmarks.teacher_compare --teacher DIR/teacher --out OUT REF=DIR [NAME=DIR ...]``

Each student (a Hugging Face ALBERT directory with its ``spiece.model``, as ``train``
leaves it) and the teacher predict SST-2 dev; per model: accuracy with its bootstrap
interval, accuracy by sentence length (words: 0-9, 10-19, 20-29, 30+), how often it agrees
with the teacher, and its accuracy minus the first student's (``REF``) with a paired
bootstrap interval over the same sentences (:mod:`albert_edge.tasks.stats`). Why by
length: SST-2 train is mostly phrases, dev whole sentences, and that is where the
students fall behind the teacher. ``--held-out-of TRAIN`` scores the rows ``albert-edge
train`` holds out of TRAIN instead (its default draw, by sentence: the rows the recipe
chooses on). ``OUT.json`` and ``OUT.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks._setup import DEV, cpu_flag

BINS = ((0, 10), (10, 20), (20, 30), (30, None))  # words; None: no upper bound
MAX_LEN = 64  # the recipe's SST-2 length (dev's longest sentence: 65 pieces with specials)


def dev_rows(path: Path) -> tuple[list[str], Any]:
    """(sentences, 0/1 labels) of an SST-2 TSV, read by the task layer."""
    import albert_edge.tasks as tasks

    return _sentences(tasks.read_task_file(path, "classification"))


def held_out_rows(train: Path) -> tuple[list[str], Any]:
    """(sentences, 0/1 labels) of the rows ``albert-edge train`` holds out of ``train`` at
    its defaults (10 %, seed 27, drawn by sentence: no row inside a trained row), the rows
    the recipe's student chooses its epoch on and its teacher never fits."""
    import albert_edge.tasks as tasks
    from albert_edge.learn.split import HeldOut

    data = tasks.read_task_file(train, "classification")
    _, held, _ = HeldOut().split_examples(data.examples, str(train))
    return _sentences(data.subset(held))


def _sentences(data: Any) -> tuple[list[str], Any]:
    """(sentences, 0/1 labels) of a classification file's examples."""
    import numpy as np

    names = list(data.label_names)
    return [ex.text for ex in data.examples], np.array(
        [int(names[ex.label]) for ex in data.examples]
    )


def _argmax(model: Any, batches: Any) -> Any:
    """``model``'s argmax over the classes, per row of each batch of feeds, concatenated."""
    import numpy as np
    import torch

    with torch.no_grad():
        return np.concatenate([model(**b).logits.argmax(-1).numpy() for b in batches])


def teacher_predictions(teacher: Path, texts: list[str]) -> Any:
    """The teacher's argmax per sentence, in its own tokenization."""
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(teacher), local_files_only=True)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(teacher), local_files_only=True
    ).eval()
    return _argmax(
        model,
        (
            tok(
                texts[i : i + 64],
                padding=True,
                truncation=True,
                max_length=MAX_LEN,
                return_tensors="pt",
            )
            for i in range(0, len(texts), 64)
        ),
    )


def student_predictions(student: Path, texts: list[str]) -> Any:
    """The student's argmax per sentence, through its own ``spiece.model``."""
    import torch
    import transformers

    from albert_edge.tokenizer import AlbertTokenizer

    tok = AlbertTokenizer(student / "spiece.model", do_lower_case=True)
    model = transformers.AlbertForSequenceClassification.from_pretrained(
        str(student), local_files_only=True
    ).eval()
    return _argmax(
        model,
        (
            {
                k: torch.from_numpy(v)
                for k, v in tok.encode(texts[i : i + 64], max_length=MAX_LEN).as_numpy().items()
            }
            for i in range(0, len(texts), 64)
        ),
    )


def bins(words: Any) -> dict[str, Any]:
    """Per :data:`BINS` label ("0-9" ... "30-"), the mask of the sentences in it."""
    return {
        f"{lo}-{hi - 1 if hi is not None else ''}": (words >= lo)
        & (words < hi if hi is not None else True)
        for lo, hi in BINS
    }


def compare(preds: dict[str, Any], labels: Any, words: Any, ref: str) -> dict[str, Any]:
    """Per model: accuracy (interval), by length, agreement with ``teacher``, minus ``ref``."""
    from albert_edge.tasks.stats import accuracy_interval, paired_bootstrap

    right = {k: p == labels for k, p in preds.items()}
    rows: dict[str, Any] = {}
    masks = bins(words)
    for k, p in preds.items():
        rows[k] = {
            "accuracy": accuracy_interval(right[k]).to_dict(),
            "by_words": {b: float(right[k][m].mean()) for b, m in masks.items()},
            "agrees_with_teacher": float((p == preds["teacher"]).mean()),
            f"minus_{ref}": paired_bootstrap(right[k], right[ref]).to_dict(),
        }
    return rows


def markdown(rec: dict[str, Any]) -> str:
    ref = rec["reference"]

    def pts(d: dict[str, float], sign: bool = False) -> str:
        f = "{:+.2f}" if sign else "{:.2f}"
        return f"{f.format(d['delta'] * 100)} [{f.format(d['low'] * 100)}, {f.format(d['high'] * 100)}]"

    lines = [
        "# SST-2 students of one teacher, on the same "
        + ("held-out rows" if rec.get("rows", "all") != "all" else "dev sentences"),
        "",
        f"CPU: {rec['cpu']}. {rec.get('dev', 'dev')}"
        + (f" ({rec['rows']})" if rec.get("rows", "all") != "all" else "")
        + f": {rec['examples']} rows; by length (words): "
        + ", ".join(f"{k}: {n}" for k, n in rec["bin_sizes"].items())
        + f". Paired: minus `{ref}` on the same rows (bootstrap 95 %).",
        "",
        "| model | accuracy (95 %) | "
        + " | ".join(rec["bin_sizes"])
        + f" | agrees with the teacher | − {ref} (paired) |",
        "|---|---|" + "---:|" * len(rec["bin_sizes"]) + "---:|---|",
    ]
    for k, r in rec["models"].items():
        by = " | ".join(f"{v * 100:.1f}" for v in r["by_words"].values())
        diff = "–" if k == ref else pts(r[f"minus_{ref}"], sign=True)
        lines.append(
            f"| {k} | {pts(r['accuracy'])} | {by} | {r['agrees_with_teacher'] * 100:.1f} % | {diff} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    p = argparse.ArgumentParser(prog="python -m benchmarks.teacher_compare", description=__doc__)
    p.add_argument("--teacher", type=Path, required=True, help="the teacher's directory")
    p.add_argument("--dev", type=Path, default=DEV, help="SST-2 dev TSV (default: the shared one)")
    p.add_argument(
        "--held-out-of",
        type=Path,
        metavar="TRAIN",
        help="score the rows train holds out of TRAIN (its default split, drawn by sentence) "
        "instead of --dev",
    )
    p.add_argument("--out", type=Path, required=True, help="OUT: writes OUT.json and OUT.md")
    p.add_argument("students", nargs="+", metavar="NAME=DIR", help="the first is the reference")
    a = p.parse_args(argv)
    pairs = [s.split("=", 1) for s in a.students]
    if any(len(x) != 2 for x in pairs):
        p.error("students: give NAME=DIR")
    scored = a.held_out_of or a.dev
    texts, labels = held_out_rows(scored) if a.held_out_of else dev_rows(scored)
    words = np.array([len(t.split()) for t in texts])
    preds = {"teacher": teacher_predictions(a.teacher, texts)}
    for name, d in pairs:
        preds[name] = student_predictions(Path(d), texts)
    ref = pairs[0][0]
    rec = {
        "cpu": cpu_flag(),
        "dev": scored.name,
        "rows": "held out of it by train's default split" if a.held_out_of else "all",
        "examples": len(texts),
        "reference": ref,
        "bin_sizes": {b: int(m.sum()) for b, m in bins(words).items()},
        "models": compare(preds, labels, words, ref),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.with_suffix(".json").write_text(json.dumps(rec, indent=2) + "\n")
    md = markdown(rec)
    a.out.with_suffix(".md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
