"""The public entry points: search a plan on held-out rows, convert with a plan.

``convert --precision auto`` is :func:`convert_auto` (search, then build with the plan);
``convert --precision-plan plan.json`` is :func:`convert_with_plan`. Both build the
artifact through :func:`albert_edge.convert.convert` with the plan's per-unit precisions
(``ConvertOptions.unit_precisions``) and the plan as data (``plan_record``: written as
``plan.json`` and into the manifest), so verification, the manifest and the model card
are every artifact's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import PrecisionPlanError
from albert_edge.mixed.evaluate import Setup, executor
from albert_edge.mixed.plan import check_plan, load_plan, make_plan
from albert_edge.mixed.search import SearchResult, Settings, min_rows, search
from albert_edge.mixed.units import Unit, find_units

if TYPE_CHECKING:
    import onnx_ir as ir

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.options import ConvertOptions


@dataclass
class Prepared:
    """The fp32 graph of a checkpoint, its units and its identity."""

    ckpt: Checkpoint
    model: ir.Model
    units: list[Unit]
    identity: dict[str, Any]


def prepare(checkpoint: str | Path | Checkpoint | None, options: ConvertOptions) -> Prepared:
    """Load, export the fp32 graph (convert's own export and graph passes), list its units."""
    from albert_edge.checkpoint import Checkpoint, load_checkpoint
    from albert_edge.layout import source_record
    from albert_edge.onnx.pipeline import optimize

    if options.target != "onnx":
        raise PrecisionPlanError(
            "precision plans are built for --to onnx (TFLite per-unit plans are not "
            "implemented); drop --to tflite"
        )
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
    model, _ = optimize(ckpt, replace(options, precision="fp32", unit_precisions=()))
    units = find_units(model, options, int(ckpt.config.vocab_size))
    return Prepared(ckpt, model, units, source_record(ckpt))


def held_out_rows(data: str | Path, settings: Settings) -> list[tuple[int, str]]:
    """``settings.rows`` rows of ``data`` drawn with ``settings.seed`` (all of them when
    fewer); refused when fewer than :func:`min_rows` for the budget."""
    import numpy as np

    from albert_edge.data import read_sst2

    rows = read_sst2(data)
    need = min_rows(settings.max_drop)
    if len(rows) < need:
        raise PrecisionPlanError(
            f"{data}: {len(rows)} labelled rows are too few to judge a {settings.max_drop}-point "
            f"budget (one sentence would move the accuracy by {100 / max(1, len(rows)):.2f} "
            f"points); give at least {need} rows"
        )
    pick = np.random.default_rng(settings.seed).permutation(len(rows))[: settings.rows]
    return [rows[int(i)] for i in sorted(pick.tolist())]


def make_setup(prep: Prepared, options: ConvertOptions, rows: list[tuple[int, str]]) -> Setup:
    import onnx_ir as ir

    tok = prep.ckpt.tokenizer()
    max_len = min(128, int(prep.ckpt.config.max_position_embeddings))
    feeds = tuple(
        tok.encode(text, max_length=max_len, padding="none").as_numpy() for _, text in rows
    )
    build = replace(options, precision="int4", int4_kernel="int8", verify=False)
    return Setup(
        ir.to_proto(prep.model).SerializeToString(), build, feeds, tuple(y for y, _ in rows)
    )


def auto_plan(
    prep: Prepared,
    data: str | Path,
    settings: Settings,
    options: ConvertOptions,
    *,
    workers: int = 1,
    cluster: str | None = None,
    engine: str = "auto",
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[dict[str, Any], SearchResult]:
    """Search a plan for ``prep`` on ``data``'s held-out rows: (plan record, search)."""
    from albert_edge.data import input_file_record

    if settings.objective == "latency" and cluster is not None:
        raise PrecisionPlanError(
            "--objective latency times candidates where they run; it cannot use --cluster "
            "(latency is only timed on the machine that will run the artifact)"
        )
    rows = held_out_rows(data, settings)
    setup = make_setup(prep, options, rows)
    with executor(setup, workers=workers, cluster=cluster, engine=engine) as run:
        result = search(prep.units, run, settings, progress)
    data_record = {k: v for k, v in input_file_record(Path(data)).items() if k != "path"}
    plan = make_plan(
        result, identity=prep.identity, options=options, settings=settings, data=data_record
    )
    plan["search"]["seconds"] = round(result.seconds, 3)
    plan["search"]["executor"] = result.executor
    return plan, result


def plan_options(options: ConvertOptions, plan: dict[str, Any], assignment: Any) -> ConvertOptions:
    """Convert options that build ``plan``: the int4 recipe on int8 kernels, the plan's
    ``--target`` and block size, each unit at its precision."""
    r = plan.get("recipe") or {}
    return replace(
        options,
        precision="int4",
        int4_kernel="int8",
        runs_on=str(r.get("runs_on", options.runs_on)),
        block_size=int(r.get("block_size", options.block_size)),
        per_channel=r.get("per_channel", options.per_channel),
        unit_precisions=tuple(assignment),
        plan_record=plan,
    )


def convert_with_plan(
    prep: Prepared, output: str | Path, options: ConvertOptions, plan: dict[str, Any], where: str
) -> dict[str, Any]:
    """Build the artifact of ``plan`` (checked against ``prep``'s model) into ``output``."""
    from albert_edge.convert import convert

    assignment = check_plan(plan, prep.units, prep.identity, where)
    return convert(prep.ckpt, output, plan_options(options, plan, assignment))


def convert_plan_file(
    checkpoint: str | Path | Checkpoint | None,
    output: str | Path,
    options: ConvertOptions,
    plan_file: str | Path,
) -> dict[str, Any]:
    """``convert --precision-plan plan.json``."""
    plan = load_plan(plan_file)  # a bad file is refused before the model loads
    prep = prepare(checkpoint, options)
    return convert_with_plan(prep, output, options, plan, str(plan_file))


def convert_auto(
    checkpoint: str | Path | Checkpoint | None,
    output: str | Path,
    options: ConvertOptions,
    data: str | Path,
    settings: Settings,
    **run: Any,
) -> dict[str, Any]:
    """``convert --precision auto``: search on ``data``, then build with the plan. A
    budget nothing meets raises :class:`~albert_edge.errors.NoPlanError` before anything
    is written."""
    from albert_edge.progress import step

    held_out_rows(data, settings)  # too few rows: refused before the model loads
    prep = prepare(checkpoint, options)
    with step(f"precision search ({len(prep.units)} units, --max-drop {settings.max_drop})"):
        plan, _ = auto_plan(prep, data, settings, options, **run)
    return convert_with_plan(prep, output, options, plan, "the searched plan")
