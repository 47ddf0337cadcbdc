"""``convert``'s precision-plan flags and their run (the CLI stays a thin registration)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import PrecisionPlanError
from albert_edge.options import finite_float, int_at_least, worker_count

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
        type=worker_count,
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
    at_depth = a.depth is not None or a.depth_search is not None
    if a.calibration is not None and a.precision == "auto":
        raise PrecisionPlanError(
            "--calibration applies to --precision int8-static/int8-full (with or without a budget) "
            "and to replaying such a plan; drop --calibration"
        )
    options: ConvertOptions = options_for("fp32")
    if a.precision_plan is not None:
        plan_file = a.precision_plan
        plan = mixed.load_plan(plan_file)  # a bad file: refused before the model loads
        _check_plan_depth(a, plan, str(plan_file), a.depth)
        if at_depth:  # ... and before it is truncated
            from albert_edge.mixed.api import check_calibration

            check_calibration(plan, options, str(plan_file))

        def replay(c: Any, out: Any, opts: Any) -> dict[str, Any]:
            # --depth auto: the plan's identity (its depth) is checked on the chosen model
            return mixed.convert_plan_file(c, out, opts, plan_file)

        return _hand_off(a, options, replay)
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

    if at_depth:  # too few rows: refused before the model loads and is truncated
        mixed.held_out_rows(a.data, settings)
    base = _base(a.precision, options.target)
    run = {"workers": a.workers, "cluster": cluster, "engine": engine, "progress": note}
    return _hand_off(
        a, options, lambda c, o, op: mixed.convert_auto(c, o, op, a.data, settings, base, **run)
    )


def _hand_off(a: argparse.Namespace, options: ConvertOptions, build: Any) -> dict[str, Any]:
    """``build(checkpoint, output, options)`` on the checkpoint, or with ``--depth`` on the
    truncated one (the plan is then the truncated model's: depth's convert_at_depth)."""
    if a.depth is None and a.depth_search is None:
        return dict(build(a.checkpoint, a.output, options))
    from albert_edge.depth.command import run_convert_at_depth

    return run_convert_at_depth(a, options, build)


def _check_plan_depth(
    a: argparse.Namespace, plan: dict[str, Any], where: str, depth: int | str | None
) -> None:
    """The early refusal of a plan at another depth than its own, before torch loads and
    the model is truncated. The check that decides is the plan's identity
    (``num_hidden_layers``, :func:`albert_edge.mixed.plan.check_plan`) once the model is
    loaded; this one reads only the plan's name — a truncated model's ends in ``-depthK``
    (the depth package's truncated_checkpoint names it so) — and, without ``--depth``,
    the checkpoint's config.json."""
    import re

    from albert_edge.layout import EMBEDDED_NAME

    name = str((plan.get("checkpoint") or {}).get("name", ""))
    at = re.fullmatch(r".*-depth(\d+)", name)
    if depth is not None:  # --depth auto: checked once the rule has chosen
        if depth != "auto" and not name.endswith(f"-depth{depth}"):
            made = f"at depth {at.group(1)}" if at else "at full depth"
            raise PrecisionPlanError(
                f"{where}: the plan was made {made} ({name}), not at depth {depth}; replay "
                f"it at its depth or search a plan at depth {depth} with --precision auto"
            )
        return
    own = Path(a.checkpoint).resolve().name if a.checkpoint is not None else EMBEDDED_NAME
    if at is not None and name != own and _config_layers(a.checkpoint) != int(at.group(1)):
        raise PrecisionPlanError(
            f"{where}: the plan was made at depth {at.group(1)} ({name}); pass --depth "
            f"{at.group(1)} --depth-search DIR (the search it was truncated with)"
        )


def _config_layers(checkpoint: str | Path | None) -> int | None:
    """``num_hidden_layers`` in a checkpoint directory's config.json (the embedded model's
    when None), read without loading the model; None when unreadable."""
    import json

    from albert_edge.checkpoint import DEFAULT_MODEL

    try:
        config = json.loads((Path(checkpoint or DEFAULT_MODEL) / "config.json").read_text())
        layers = config.get("num_hidden_layers")
    except (OSError, ValueError, AttributeError):
        return None
    return layers if isinstance(layers, int) else None


def _base(precision: str, target: str) -> str:
    """The recipe a searched plan builds on: the integer graph asked for, else the
    target's weight-only recipe that holds fp32, int8 and int4 weights in one graph."""
    if precision in ("int8-static", "int8-full"):
        return precision
    return "int8-dynamic" if target == "tflite" else "int4"
