"""``albert-edge early-exit``: fit exit heads and build a dynamic-exit ONNX artifact.

The argparse wiring only: the command is :func:`albert_edge.early_exit.fit.fit_early_exit`
(rows read through the task layer, heads fitted, the ``--max-drop`` threshold chosen on
rows the heads never see), so the shared CLI module only registers the subcommand.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from albert_edge.early_exit.fit import MIN_HALF_ROWS, fit_early_exit
from albert_edge.io import output_arg
from albert_edge.options import DefaultInt, int_at_least, points_value, seed_value


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
    p.add_argument(
        "--max-drop",
        type=points_value,
        default=None,
        metavar="P",
        help="choose the confidence threshold with the fewest layers run whose accuracy on "
        "held-out rows of --data is at most P points below full depth (e.g. 0.5); recorded "
        "as the artifact's default policy, with the held-out figures in its manifest",
    )
    p.add_argument(
        "--held-out-rows",
        type=int_at_least(2 * MIN_HALF_ROWS),
        default=DefaultInt(2000),
        help="--max-drop: rows of --data kept from the fit, half to choose the threshold on, "
        "half to report it on (default: %(default)s; a quarter of smaller files)",
    )
    p.add_argument("--seed", type=seed_value, default=0, help="shuffle seed (default: %(default)s)")
    p.add_argument(
        "--overwrite", action="store_true", help="replace an existing albert-edge artifact"
    )
    add_quiet(p)
    p.set_defaults(run=run)


def run(a: argparse.Namespace) -> int:
    from albert_edge.errors import UnsupportedError

    if a.max_drop is None and not isinstance(a.held_out_rows, DefaultInt):
        raise UnsupportedError(
            "--held-out-rows sets the rows --max-drop chooses and reports the threshold on; "
            "add --max-drop P or drop --held-out-rows"
        )
    manifest, record = fit_early_exit(
        a.checkpoint,
        a.data,
        a.output,
        precision=a.precision,
        fit_rows=a.fit_rows,
        max_drop=a.max_drop,
        held_out_rows=int(a.held_out_rows),
        seed=a.seed,
        overwrite=a.overwrite,
    )
    if record is not None:
        _say_choice(record)
    sizes = manifest["sizes"]
    print(
        f"{a.output}: {manifest['early_exit']['num_exits']} exits, {sizes['file_bytes']:,} bytes "
        f"({sizes['ratio_to_floor']}x the {a.precision} floor, exit heads included), default "
        f"policy {manifest['early_exit'].get('policy', 'off')}; run it with "
        "albert_edge.early_exit.EarlyExitRunner"
    )
    return 0


def _say_choice(record: dict[str, Any]) -> None:
    rep = record["report"]
    d = rep["delta_vs_full_depth"]
    if record.get("note"):
        print(f"albert-edge: note: {record['note']}", file=sys.stderr)
    print(
        f"policy {record['policy']} (chosen on {record['choose']['rows']} held-out rows, "
        f"max drop {record['max_drop_points']:g} points); on {rep['rows']} other held-out "
        f"rows: accuracy {100 * rep['accuracy']:.2f} vs {100 * rep['full_depth_accuracy']:.2f} "
        f"at full depth, {d['points']:+.2f} points [{d['low']:+.2f}, {d['high']:+.2f}] (paired "
        f"95 %), mean layers run {rep['mean_layers']:.2f}"
    )
