"""``albert-edge optimize``: argparse wiring and one call into :func:`albert_edge.optimize.api.optimize`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from albert_edge.io import output_arg
from albert_edge.options import int_at_least, minutes_value, points_value


def add_parser(sub: Any, quiet: Any) -> None:
    p = sub.add_parser(
        "optimize",
        help="one search from a checkpoint to the artifact to ship: fine-tune with exits, "
        "depth, vocabulary, pruning, precision plan and exit policy under one budget "
        "(docs/optimize.md)",
    )
    _data_args(p)
    _budget_args(p)
    _run_args(p)
    p.add_argument("--no-finetune", action="store_true", help="skip the PABEE fine-tune stage")
    p.add_argument("--no-trim", action="store_true", help="skip the vocabulary trim stage")
    p.add_argument(
        "--no-prune",
        action="store_true",
        help="skip the prune stage (attention heads and FFN neurons of the shared layers)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a previous artifact at -o")
    quiet(p)
    p.set_defaults(run=run_optimize)


def _data_args(p: argparse.ArgumentParser) -> None:
    """The model and the rows it is fitted, chosen and reported on."""
    p.add_argument("checkpoint", nargs="?", default=None, help="HF directory (default: embedded)")
    p.add_argument(
        "--data",
        type=Path,
        required=True,
        help="labelled data for the model's head (GLUE-style .tsv of single sentences or "
        "pairs; CoNLL-2003 for a token head; SQuAD .json for a span head): split once into "
        "fit, choose and report examples",
    )
    p.add_argument(
        "--report-data",
        type=Path,
        default=None,
        help="the rows the report is measured on, never fitted or chosen on (e.g. the dev "
        "split): --data is then split into fit and choose rows only",
    )
    p.add_argument(
        "--choose-data",
        type=Path,
        default=None,
        help="the rows the budget's rule admits candidates on, never fitted on (default: "
        "a quarter of --data, at most 2,000)",
    )


def _budget_args(p: argparse.ArgumentParser) -> None:
    """What the artifact may lose, what it is for, and what the pick minimises."""
    p.add_argument(
        "--max-drop",
        type=points_value,
        required=True,
        help="the budget: points of the task's metric the artifact may lose against the given "
        "model in PyTorch, on rows nothing was fitted on",
    )
    p.add_argument(
        "--target",
        choices=("onnx", "tflite"),
        default="onnx",
        help="the artifact's format (dynamic-exit candidates are ONNX only)",
    )
    p.add_argument(
        "--objective",
        choices=("latency", "bytes"),
        default="latency",
        help="what the pick minimises among the admitted (default latency: W1, timed here)",
    )
    p.add_argument(
        "--seq-len", type=int_at_least(8), default=128, help="tokens of W1 and of scoring"
    )
    p.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="the deployment's text for the vocabulary trim (default: the fit rows' text)",
    )


def _run_args(p: argparse.ArgumentParser) -> None:
    """Where the run writes, where its builds run, and how long it may take."""
    p.add_argument("-o", "--output", type=output_arg, required=True, help="artifact to write")
    p.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="sealed, resumable work directory (default: .OUT.optimize-work beside -o), locked "
        "while a run uses it; a rerun with the same inputs reuses every finished stage",
    )
    p.add_argument(
        "--cluster",
        default=None,
        metavar="ADDRESS",
        help="an existing Ray cluster for the builds (HOST:PORT as `ray start --head` prints "
        "it; the [ray] extra, the cluster's Ray version; default: processes on this machine); "
        "probed before the first stage; it must see the work directory at the same path",
    )
    p.add_argument(
        "--workers",
        type=int_at_least(1),
        default=None,
        help="build processes on this machine (default: its usable CPUs; not with --cluster)",
    )
    p.add_argument(
        "--max-minutes",
        type=minutes_value,
        default=45.0,
        help="time budget: the plan fits it, and when it runs out the best candidate measured "
        "so far ships (default 45)",
    )


def options_of(a: argparse.Namespace) -> Any:
    from albert_edge.optimize.options import Options

    return Options(
        checkpoint=Path(a.checkpoint) if a.checkpoint is not None else None,
        data=a.data,
        max_drop=a.max_drop,
        output=a.output,
        target=a.target,
        objective=a.objective,
        seq_len=a.seq_len,
        corpus=a.corpus,
        work_dir=a.work_dir,
        cluster=a.cluster,
        max_minutes=a.max_minutes,
        quiet=bool(getattr(a, "quiet", False)),
        overwrite=a.overwrite,
        workers=a.workers,
        finetune=not a.no_finetune,
        trim=not a.no_trim,
        prune=not a.no_prune,
        report_data=a.report_data,
        choose_data=a.choose_data,
    )


def answer(out: Path, report: dict[str, Any]) -> str:
    sh = report["shipped"]
    rep = sh.get("report") or {}
    parts = [f"{out}: {sh['key']}, {sh['file_bytes']:,} bytes"]
    if sh.get("w1_ms"):
        parts.append(f"W1 {sh['w1_ms']:.3f} ms")
    if rep:
        parts.append(
            f"{rep['metric']} {100 * rep['value']:.2f} on {rep['rows']} report rows "
            f"({100 * rep['delta']:+.2f} pt [{100 * rep['low']:+.2f}, {100 * rep['high']:+.2f}] "
            "vs the given model)"
        )
    notes = report.get("notes", [])
    late = any(n.startswith("the time budget ran out") for n in notes)
    tail = " (the time budget ran out: the best candidate measured so far)" if late else ""
    # what the user asked for and did not get is said here too, not only in report.md
    asked = [n for n in notes if n.startswith("the vocabulary trim --corpus asked for")]
    tail += "".join(f" ({n})" for n in asked)
    return ", ".join(parts) + tail + "; report.md beside it"


def run_optimize(a: argparse.Namespace) -> int:
    from albert_edge.optimize.api import optimize

    report = optimize(options_of(a))
    print(answer(a.output, report))
    return 0
