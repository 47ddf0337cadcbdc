"""``albert-edge early-exit``: fit exit heads and build a dynamic-exit ONNX artifact.

A thin wrapper over :func:`albert_edge.early_exit.fit_exit_heads` and
:func:`albert_edge.early_exit.build_early_exit_artifact`; the argparse wiring lives here so
the shared CLI module only registers the subcommand. Thresholds are not chosen here: they
are a run-time argument of the runner (``docs/early-exit.md`` says how to choose one on
held-out rows).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from albert_edge.io import output_arg
from albert_edge.options import int_at_least, seed_value


def add_parser(sub: Any, add_quiet: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser(
        "early-exit",
        help="fit per-layer exit heads and build a dynamic-exit ONNX artifact",
    )
    p.add_argument("checkpoint", type=Path, help="a sequence-classification ALBERT directory")
    p.add_argument(
        "--data",
        type=Path,
        required=True,
        help="labelled training rows for the exit heads (SST-2 style .tsv: label<TAB>sentence)",
    )
    p.add_argument(
        "-o", "--output", type=output_arg, required=True, help="artifact directory to write"
    )
    p.add_argument(
        "--precision",
        choices=("fp32", "int8-dynamic"),
        default="fp32",
        help="precision of the graphs (default: %(default)s)",
    )
    p.add_argument(
        "--fit-rows",
        type=int_at_least(1),
        default=8000,
        help="rows of --data (seeded shuffle) to fit the heads on (default: %(default)s)",
    )
    p.add_argument("--seed", type=seed_value, default=0, help="shuffle seed (default: %(default)s)")
    p.add_argument(
        "--overwrite", action="store_true", help="replace an existing albert-edge artifact"
    )
    add_quiet(p)
    p.set_defaults(run=run)


def fit_rows_of(data: Path, fit_rows: int, seed: int) -> list[tuple[int, str]]:
    """The rows the exit heads are fitted on: ``data`` shuffled with ``seed``, the first
    ``fit_rows``. One definition for this command and ``bench --recommend``, so both build
    the same heads from the same file."""
    import random

    from albert_edge.data import read_sst2
    from albert_edge.early_exit.heads import check_fit_labels

    rows = read_sst2(data)  # a bad file fails here, before the model loads
    random.Random(seed).shuffle(rows)
    if fit_rows > len(rows):  # said aloud, never shrunk silently
        print(
            f"albert-edge: note: {data} has {len(rows)} rows, fewer than the {fit_rows} "
            f"fit rows asked; fitting the exit heads on all {len(rows)}",
            file=sys.stderr,
        )
    chosen = rows[:fit_rows]
    check_fit_labels([y for y, _ in chosen], None, str(data))
    return chosen


def fit_heads_on(ckpt: Any, rows: list[tuple[int, str]], seed: int) -> Any:
    """:func:`albert_edge.early_exit.fit_exit_heads` on ``(label, text)`` rows."""
    from albert_edge.early_exit import fit_exit_heads

    return fit_exit_heads(ckpt, [t for _, t in rows], [y for y, _ in rows], seed=seed)


def run(a: argparse.Namespace) -> int:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.early_exit import build_early_exit_artifact
    from albert_edge.io import check_output

    check_output(a.output, overwrite=a.overwrite, inputs=[a.checkpoint, a.data])
    rows = fit_rows_of(a.data, a.fit_rows, a.seed)
    ckpt = load_checkpoint(a.checkpoint)
    heads = fit_heads_on(ckpt, rows, a.seed)
    from albert_edge.sealed import made_from

    fitted_on = made_from(data={"data": a.data}, with_checkpoint=False)
    manifest = build_early_exit_artifact(
        ckpt, a.output, heads, precision=a.precision, overwrite=a.overwrite, made_from=fitted_on
    )
    sizes = manifest["sizes"]
    print(
        f"{a.output}: {manifest['early_exit']['num_exits']} exits, {sizes['file_bytes']:,} bytes "
        f"({sizes['ratio_to_floor']}x the {a.precision} floor, exit heads included); run it "
        "with albert_edge.early_exit.EarlyExitRunner"
    )
    return 0
