"""``convert``'s precision-plan flags and their run (the CLI stays a thin registration)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import PrecisionPlanError
from albert_edge.options import finite_float, int_at_least

if TYPE_CHECKING:
    from albert_edge.options import ConvertOptions


def add_mixed_flags(p: argparse.ArgumentParser) -> None:
    """``--precision auto`` and ``--precision-plan`` (docs/mixed-precision.md)."""
    g = p.add_argument_group("precision per weight (--precision auto / --precision-plan)")
    g.add_argument(
        "--max-drop",
        type=finite_float,
        default=None,
        help="--precision auto: the accuracy budget, in points lost on held-out rows against "
        "the fp32 graph (the interval's lower bound must also be >= --min-lower-bound)",
    )
    g.add_argument(
        "--data",
        type=Path,
        default=None,
        help="--precision auto: labelled SST-2 style .tsv the held-out rows are drawn from "
        "(never the split you report accuracy on)",
    )
    g.add_argument(
        "--objective",
        choices=("bytes", "latency"),
        default="bytes",
        help="--precision auto: what the plan minimizes (latency: measured on this machine)",
    )
    g.add_argument(
        "--search-rows",
        type=int_at_least(1),
        default=1000,
        help="--precision auto: held-out rows drawn (seeded) from --data (default: %(default)s)",
    )
    g.add_argument(
        "--workers",
        type=int_at_least(1),
        default=1,
        help="--precision auto: parallel candidate evaluations (local process pool, or Ray "
        "with --cluster) (default: %(default)s)",
    )
    g.add_argument(
        "--cluster",
        default=None,
        help="--precision auto: Ray cluster ADDRESS to run the evaluations on (pip install "
        "'albert-edge[ray]'); 'local' starts Ray on this machine",
    )
    g.add_argument(
        "--precision-plan",
        type=Path,
        default=None,
        help="rebuild from a plan.json (byte-identical to the artifact it came from)",
    )


def wants_plan(a: argparse.Namespace) -> bool:
    """``--precision auto``, ``--precision-plan``, or int8-static with a budget (the
    integer graph keeping the fewest units' quantizers in float)."""
    return (
        a.precision == "auto"
        or a.precision_plan is not None
        or (a.precision in ("int8-static", "int8-full") and a.max_drop is not None)
    )


def run_mixed(a: argparse.Namespace, options_for: Any) -> dict[str, Any]:
    """Run ``convert --precision auto`` / ``--precision-plan``; ``options_for(precision)``
    builds the ConvertOptions the CLI would for that precision."""
    from albert_edge import mixed

    if a.precision_plan is not None and a.precision not in (
        None,
        "auto",
        "int8-static",
        "int8-full",
    ):
        raise PrecisionPlanError(
            f"--precision-plan sets every weight's precision; drop --precision {a.precision}"
        )
    if a.depth is not None or a.depth_search is not None:
        raise PrecisionPlanError(
            "--precision auto/--precision-plan do not combine with --depth yet"
        )
    if a.calibration is not None and a.precision == "auto":
        raise PrecisionPlanError(
            "--calibration applies to --precision int8-static/int8-full (with or without a budget) "
            "and to replaying such a plan; drop --calibration"
        )
    options: ConvertOptions = options_for("fp32")
    if a.precision_plan is not None:
        return mixed.convert_plan_file(a.checkpoint, a.output, options, a.precision_plan)
    if a.max_drop is None or a.data is None:
        raise PrecisionPlanError(
            f"--precision {a.precision} with a budget needs --max-drop POINTS and --data "
            "LABELLED.tsv (held-out rows)"
        )
    settings = mixed.Settings(
        max_drop=a.max_drop,
        min_lower_bound=a.min_lower_bound,
        objective=a.objective,
        rows=a.search_rows,
    )
    cluster = None if a.cluster in (None, "local") else a.cluster
    engine = "ray" if a.cluster is not None else "local"

    def note(line: str) -> None:
        from albert_edge.progress import console, enabled

        if enabled():
            console().print(f"albert-edge:   {line}")

    return mixed.convert_auto(
        a.checkpoint,
        a.output,
        options,
        a.data,
        settings,
        base=_base(a.precision, options.target),
        workers=a.workers,
        cluster=cluster,
        engine=engine,
        progress=note,
    )


def _base(precision: str, target: str) -> str:
    """The recipe a searched plan builds on: the integer graph asked for, else the
    target's weight-only recipe that holds fp32, int8 and int4 weights in one graph."""
    if precision in ("int8-static", "int8-full"):
        return precision
    return "int8-dynamic" if target == "tflite" else "int4"
