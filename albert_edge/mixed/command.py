"""``convert``'s precision-plan flags and their run (the CLI stays a thin registration)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import PrecisionPlanError
from albert_edge.options import finite_float, int_at_least, worker_count

if TYPE_CHECKING:
    from albert_edge.options import ConvertOptions


class _UnsetInt(int):
    """A flag's default, told apart from the same number typed (a replay refuses only
    what was asked)."""

    __slots__ = ()


class _UnsetStr(str):
    """A flag's default, told apart from the same word typed."""

    __slots__ = ()


def _unset(value: Any) -> Any:
    return _UnsetInt(value) if isinstance(value, int) else _UnsetStr(value)


def given(a: argparse.Namespace, name: str) -> bool:
    """Whether the flag behind ``a.<name>`` was on the command line (a default is an
    ``_Unset*``, or None, ``()``, False)."""
    value = getattr(a, name, None)
    if name == "per_channel":  # --per-channel True, --per-tensor False, neither None
        return value is not None
    return not isinstance(value, _UnsetInt | _UnsetStr) and value not in (None, (), False)


# Flags a plan replay cannot honour, with the plan field that decides instead (None: the
# flag belongs to the search, which a replay does not run).
_PLAN_SETS = (
    ("block_size", "--block-size", "recipe.block_size"),
    ("per_channel", "--per-channel/--per-tensor", "recipe.per_channel"),
    ("runs_on", "--target", "recipe.runs_on"),
    ("int4_kernel", "--int4-kernel", "recipe.int4_kernel"),
    ("seq_lens", "--seq-lens", "recipe.seq_lens"),
    ("num_calibration", "--num-calibration", "recipe.calibration.samples"),
    ("calibration_method", "--calibration-method", "recipe.calibration.method"),
    ("keep_embeddings_wide", "--keep-embeddings-wide", "the word table's precision (units)"),
    ("max_drop", "--max-drop", None),
    ("data", "--data", None),
    ("objective", "--objective", None),
    ("search_rows", "--search-rows", None),
    ("workers", "--workers", None),
    ("cluster", "--cluster", None),
)


def _field(plan: dict[str, Any], path: str) -> Any:
    value: Any = plan
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def check_replay_flags(a: argparse.Namespace, plan: dict[str, Any], where: str) -> None:
    """Refuse, in one line naming the flag, each flag given beside ``--precision-plan``
    that the replay would not use: the plan decides its recipe, and a replay searches
    nothing. (``--calibration`` for a calibrated plan is checked against the plan's own
    file by :func:`albert_edge.mixed.api.check_calibration`; one given for a plan that
    calibrates nothing is refused here.)"""
    for attr, flag, field in _PLAN_SETS:
        if not given(a, attr):
            continue
        if field is None:
            raise PrecisionPlanError(
                f"{where}: --precision-plan replays a plan and searches nothing; drop {flag} "
                "(it applies to --precision auto)"
            )
        value = _field(plan, field) if field.startswith("recipe.") else None
        shown = f" = {json.dumps(value)}" if value is not None else ""
        raise PrecisionPlanError(f"{where}: the plan sets {field}{shown}; drop {flag}")
    recipe = plan.get("recipe") or {}
    if given(a, "calibration") and not recipe.get("calibration"):
        raise PrecisionPlanError(
            f"{where}: the plan calibrates nothing (recipe.base = {recipe.get('base')}); drop "
            "--calibration"
        )


def add_mixed_flags(p: argparse.ArgumentParser) -> None:
    """``--precision auto`` and ``--precision-plan`` (docs/mixed-precision.md). The
    shared quantization flags' defaults are marked (same values), so that a replay can
    refuse the ones a user typed (:func:`check_replay_flags`)."""
    shared = ("block_size", "num_calibration", "calibration_method", "runs_on", "int4_kernel")
    p.set_defaults(**{name: _unset(p.get_default(name)) for name in shared})
    g = p.add_argument_group("precision per weight (--precision auto / --precision-plan)")
    g.add_argument(
        "--max-drop",
        type=finite_float,
        default=None,
        help="--precision auto: the budget, in points of the task's metric (accuracy; entity "
        "F1 for CoNLL; F1 for SQuAD) lost on held-out examples against the fp32 graph (the "
        "interval's lower bound must also be >= --min-lower-bound)",
    )
    g.add_argument(
        "--data",
        type=Path,
        default=None,
        help="--precision auto: labelled task data the held-out examples are drawn from (a "
        "GLUE .tsv, single sentences or pairs; CoNLL-2003; SQuAD .json), read as verify --data "
        "reads it; the budget is in that task's metric (never the split you report on)",
    )
    g.add_argument(
        "--objective",
        choices=("bytes", "latency"),
        default=_UnsetStr("bytes"),
        help="--precision auto: what the plan minimizes (latency: measured on this machine)",
    )
    g.add_argument(
        "--search-rows",
        type=int_at_least(1),
        default=_UnsetInt(1000),
        help="--precision auto: held-out rows drawn (seeded) from --data (default: %(default)s)",
    )
    g.add_argument(
        "--workers",
        type=worker_count,
        default=_UnsetInt(1),
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


# The search's own flags: read by --precision auto (and int8-static/int8-full with a budget)
# only; any other convert would ignore them.
_SEARCH_FLAGS = (
    ("max_drop", "--max-drop"),
    ("data", "--data"),
    ("objective", "--objective"),
    ("search_rows", "--search-rows"),
    ("workers", "--workers"),
    ("cluster", "--cluster"),
)


def check_search_flags(a: argparse.Namespace) -> None:
    """Refuse, in one line, a search flag given to a convert that runs no search (e.g.
    ``--precision int8-dynamic --max-drop 0.5``: the budget would be ignored)."""
    if wants_plan(a):
        return
    for attr, flag in _SEARCH_FLAGS:
        if given(a, attr):
            what = f"--precision {a.precision}" if a.precision else "this convert"
            raise PrecisionPlanError(
                f"{flag} applies to --precision auto (and to int8-static/int8-full with "
                f"--max-drop, a budget); {what} searches nothing: drop {flag}, or pass "
                "--precision auto"
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
        check_replay_flags(a, plan, str(plan_file))
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
            f"--precision {a.precision} with a budget needs --max-drop POINTS and --data FILE "
            "(labelled held-out examples of the model's task)"
        )
    settings = mixed.Settings(
        max_drop=a.max_drop,
        min_lower_bound=float(a.min_lower_bound),
        objective=a.objective,
        rows=a.search_rows,
    )
    cluster = None if a.cluster in (None, "local") else a.cluster
    engine = "ray" if a.cluster is not None else "local"

    def note(line: str) -> None:
        from albert_edge.progress import console, enabled

        if enabled():
            console().print(f"albert-edge:   {line}")

    # too few examples, a file of another task, a label or tag the model lacks: refused
    # before the model loads
    mixed.held_out_rows(a.data, settings, a.checkpoint)
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
    from albert_edge.mixed.api import plan_base

    if precision in ("int8-static", "int8-full"):
        return precision
    return plan_base(target)
