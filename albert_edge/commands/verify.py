"""``albert-edge verify``: an artifact against its PyTorch reference; ``--data``: the
task's metric on both (docs/tasks.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from albert_edge.commands.args import add_quiet, ints, print_json
from albert_edge.options import int_at_least, thread_count


def add_parser(sub: Any) -> None:
    """``verify``: the artifact, its reference, the task data and the output grid."""
    p = sub.add_parser(
        "verify",
        help="compare an artifact with its PyTorch reference; --data: the task's metric on "
        "both (docs/tasks.md)",
    )
    p.add_argument("artifact", type=Path, help="artifact directory or model file")
    p.add_argument(
        "--reference",
        default=None,
        help="checkpoint to compare against (default: the manifest's source)",
    )
    p.add_argument(
        "--data",
        type=Path,
        default=None,
        help="labelled data for the head's task metric: a GLUE .tsv (single sentences or "
        "pairs), CoNLL-2003 (NER), SQuAD .json (QA), SWAG/RACE (multiple choice), text "
        "(masked LM); default for the embedded model: the packaged SST-2 dev sample",
    )
    p.add_argument(
        "--task",
        default=None,
        choices=(
            "classification",
            "token-classification",
            "question-answering",
            "multiple-choice",
            "masked-lm",
        ),
        help="the task of --data, only where the file cannot tell (default: from the file "
        "and the model's head)",
    )
    p.add_argument(
        "--batch-sizes",
        type=ints,
        default=None,
        help="comma-separated batch sizes of the output grid (default: 1,2)",
    )
    p.add_argument(
        "--seq-lens",
        type=ints,
        default=(),
        help="comma-separated sequence lengths of the output grid (default: 1, 16, max)",
    )
    p.add_argument(
        "--threads",
        type=thread_count,
        default=2,
        help="runtime and PyTorch threads (default: 2; at most 4 per usable CPU)",
    )
    p.add_argument(
        "--max-examples",
        type=int_at_least(1),
        default=None,
        help="use only the first N rows of --data",
    )
    p.add_argument(
        "--on",
        default=None,
        choices=("x86-avx2", "x86-vnni", "arm64", "wasm"),
        help="run the artifact on another CPU kernel family (emulated: ONNX Runtime or LiteRT "
        "under qemu-user, onnxruntime-web for wasm; set up once with `albert-edge kernels setup "
        "NAME`)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(p)
    p.set_defaults(run=run)


def run(a: argparse.Namespace) -> int:
    """Verify (a dynamic-exit artifact exit by exit); exit 1 with the failures on stderr."""
    from albert_edge.early_exit.index import is_early_exit
    from albert_edge.early_exit.verify import run_verify_cli
    from albert_edge.report import print_verify_report
    from albert_edge.verify import verify

    if is_early_exit(a.artifact):  # several graphs stepped by a loop: checked per exit
        return run_verify_cli(
            a.artifact,
            a.reference,
            a.threads,
            a.json,
            data=a.data,
            task=a.task,
            max_examples=a.max_examples,
            on=a.on,
            batch_sizes=a.batch_sizes,
            seq_lens=a.seq_lens,
        )
    report = verify(
        a.artifact,
        reference=a.reference,
        data=a.data,
        batch_sizes=a.batch_sizes or (1, 2),
        seq_lens=a.seq_lens or None,
        threads=a.threads,
        max_examples=a.max_examples,
        on=a.on,
        task=a.task,
    )
    if a.json:
        print_json(report.to_dict())
    else:
        print_verify_report(report)
    if not report.passed:
        print("verify: FAILED: " + "; ".join(report.failures()), file=sys.stderr)
        return 1
    return 0
