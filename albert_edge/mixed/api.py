"""The public entry points: search a plan on held-out rows, convert with a plan.

``convert --precision auto`` is :func:`convert_auto` (search, then build with the plan);
``convert --precision-plan plan.json`` is :func:`convert_with_plan`. Both build the
artifact through :func:`albert_edge.convert.convert` with the plan's per-unit precisions
(``ConvertOptions.unit_precisions``) and the plan as data (``plan_record``: written as
``plan.json`` and into the manifest), so verification, the manifest and the model card
are every artifact's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import PrecisionPlanError
from albert_edge.mixed.evaluate import Setup, executor
from albert_edge.mixed.plan import check_plan, load_plan, make_plan, replay_record, seal_plan
from albert_edge.mixed.search import SearchResult, Settings, search
from albert_edge.mixed.units import Unit, find_units
from albert_edge.tasks import TaskData

if TYPE_CHECKING:
    import onnx_ir as ir

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.options import ConvertOptions


def plan_base(target: str) -> str:
    """The weight-only recipe a searched plan builds on for ``target``: ONNX's int4 (fp32,
    int8 and int4 weights in one graph), TFLite's int8-dynamic (fp32 and int8 weights:
    LiteRT has no int4 weight-only kernel)."""
    return "int8-dynamic" if target == "tflite" else "int4"


@dataclass
class Prepared:
    """The fp32 graph of a checkpoint, its units and its identity."""

    ckpt: Checkpoint
    model: ir.Model | bytes  # ONNX: the fp32 graph; TFLite: the float flatbuffer
    units: list[Unit]
    identity: dict[str, Any]
    base: str = "int4"


def prepare(
    checkpoint: str | Path | Checkpoint | None, options: ConvertOptions, base: str = "int4"
) -> Prepared:
    """Load, export the fp32 graph (convert's own export and graph passes), list its units
    under the ``base`` recipe (int4: fp32/int8/int4 weights; int8-static: each unit
    integer or left in float, its activation quantizers with it)."""
    from albert_edge.checkpoint import Checkpoint, load_checkpoint
    from albert_edge.onnx.pipeline import optimize

    bases = ("int4", "int8-static") if options.target == "onnx" else ("int8-dynamic", "int8-full")
    if base not in bases:
        other = dict(zip(("int8-static", "int8-full"), ("int8-full", "int8-static"), strict=True))
        raise PrecisionPlanError(
            f"--to {options.target} builds precision plans on {' or '.join(bases)}, not {base}"
            + (f"; use --precision {other[base]}" if base in other else "")
        )
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
    if options.target == "tflite":
        return _prepare_tflite(ckpt, options, base)
    model, _ = optimize(ckpt, replace(options, precision="fp32", unit_precisions=()))
    if base == "int8-static":
        from albert_edge.onnx.quant import check_options

        check_options(replace(options, precision=base))  # --calibration: before any work
    units = find_units(model, options, int(ckpt.config.vocab_size), base)
    return Prepared(ckpt, model, units, identity(ckpt), base)


def identity(ckpt: Checkpoint) -> dict[str, Any]:
    """What a plan is made for: the manifest's source record (name, weights' sha256) and
    the depth the model runs (``num_hidden_layers``) — the weights cannot tell depths
    apart where every depth reads the same ones (a one-group model keeping its own head
    truncated at depth 2 stores exactly the full model's weights)."""
    from albert_edge.layout import source_record

    return {**source_record(ckpt), "num_hidden_layers": int(ckpt.config.num_hidden_layers)}


def _prepare_tflite(ckpt: Checkpoint, options: ConvertOptions, base: str) -> Prepared:
    from albert_edge.mixed import tflite

    model = tflite.float_graph(ckpt, options)
    units = tflite.find_tflite_units(model, ckpt, base)
    return Prepared(ckpt, model, units, identity(ckpt), base)


def held_out_rows(
    data: str | Path, settings: Settings, checkpoint: str | Path | Checkpoint | None = None
) -> TaskData:
    """The held-out examples of ``data`` a search scores on (:func:`albert_edge.mixed.rows.held_out`):
    any task's file, read as ``verify --data`` reads it and checked against
    ``checkpoint``'s head, labels and tags (its config.json: before the model loads)."""
    from albert_edge.mixed.rows import held_out

    return held_out(data, settings, checkpoint)


def make_setup(
    prep: Prepared, options: ConvertOptions, data: TaskData | Sequence[tuple[int, str]]
) -> Setup:
    """The workers' set-up: the fp32 graph, the recipe, and the held-out examples (any
    task's :class:`~albert_edge.tasks.TaskData`, or SST-2 style ``(label, sentence)``
    rows) encoded as verify encodes them."""
    from albert_edge.mixed import tflite
    from albert_edge.mixed.rows import encode_held_out, max_length

    if not isinstance(data, TaskData):
        data = sentence_rows(data)
    tok = prep.ckpt.tokenizer()
    seq_lens = tflite.seq_lens_of(prep.ckpt, options) if options.target == "tflite" else ()
    feats, feeds = encode_held_out(data, tok, max_length(prep.ckpt, options.target, seq_lens))
    common: dict[str, Any] = {
        "outputs": tuple(prep.ckpt.head.outputs),
        "per_token": feats.per_token(),
        "data": data,
        "features": feats,
    }
    if options.target == "tflite":
        build = replace(options, precision=prep.base, verify=False, seq_lens=seq_lens)
        cal = tflite.calibration_feeds(prep.ckpt, build) if prep.base == "int8-full" else None
        assert isinstance(prep.model, bytes)
        return Setup(prep.model, build, feeds, **common, target="tflite", calibration_feeds=cal)
    import onnx_ir as ir

    build = replace(options, precision=prep.base, int4_kernel="int8", verify=False)
    calibration = None
    tokenizer = None
    if prep.base == "int8-static":
        from albert_edge.onnx.quant import load_calibration

        calibration = load_calibration(build, prep.ckpt)
        tokenizer = (str(tok.path), tok.do_lower_case, tok.keep_accents)
    assert not isinstance(prep.model, bytes)  # ONNX: the fp32 graph
    return Setup(
        ir.to_proto(prep.model).SerializeToString(),
        build,
        feeds,
        **common,
        calibration=calibration,
        tokenizer=tokenizer,
    )


def sentence_rows(rows: Sequence[tuple[int, str]]) -> TaskData:
    """``(label, sentence)`` rows (:func:`albert_edge.data.read_sst2`'s) as single-sentence
    classification data."""
    from albert_edge.tasks import ClassificationExample, TaskKind

    return TaskData(
        kind=TaskKind.CLASSIFICATION,
        path=Path("<rows>"),
        format="glue-tsv",
        examples=[ClassificationExample(t, None, y, n) for n, (y, t) in enumerate(rows, 2)],
        columns=("sentence",),
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
    from albert_edge.mixed.rows import TaskScorer

    rows = held_out_rows(data, settings, prep.ckpt)
    setup = make_setup(prep, options, rows)
    assert setup.data is not None and setup.features is not None
    scorer = TaskScorer(setup.data, setup.features)
    with executor(setup, workers=workers, cluster=cluster, engine=engine) as run:
        integer = prep.base in ("int8-static", "int8-full")  # fallback: fewest in float
        result = search(prep.units, run, settings, progress, judge=scorer, from_narrowest=integer)
    data_record = {k: v for k, v in input_file_record(Path(data)).items() if k != "path"}
    plan = make_plan(
        result,
        identity=prep.identity,
        options=options,
        settings=settings,
        data=data_record,
        base=prep.base,
        task=scorer.record(result.metric, result.rows),
    )
    plan["search"]["seconds"] = round(result.seconds, 3)
    plan["search"]["executor"] = result.executor
    if setup.target == "tflite":
        if prep.base == "int8-full":
            from albert_edge.mixed.tflite import integer_ops

            plan["search"]["integer_ops"] = integer_ops(setup, result.plan)
    else:
        plan["search"]["integer_matmul_share"] = integer_share(setup, result.plan)
    return seal_plan(plan), result


def integer_share(setup: Setup, plan: dict[str, str]) -> dict[str, Any]:
    """How many weight MatMuls of the plan's graph compute on integers (what an integer
    accelerator runs), by :func:`albert_edge.onnx.inspect.matmul_counts`, the one count."""
    import onnx
    import onnx_ir as ir

    from albert_edge.mixed.evaluate import build
    from albert_edge.onnx.inspect import matmul_counts

    model = ir.from_proto(onnx.load_from_string(build(setup, tuple(sorted(plan.items())))))
    c = matmul_counts(model)
    total = int(c["matmuls_total"])
    return {
        "matmuls_quantized": int(c["matmuls_quantized"]),
        "matmuls_total": total,
        "share": round(int(c["matmuls_quantized"]) / total, 4) if total else None,
    }


def plan_options(options: ConvertOptions, plan: dict[str, Any], assignment: Any) -> ConvertOptions:
    """Convert options that build ``plan``: its recipe (int4 on int8 kernels, or
    int8-static with the plan's calibration count and method), ``--target`` and block
    size, each unit at its precision."""
    r = plan.get("recipe") or {}
    cal = r.get("calibration") or {}
    if cal:  # int8-static: as many sentences, by the same method, as the plan was built with
        options = replace(
            options,
            num_calibration=int(cal.get("samples", options.num_calibration)),
            calibration_method=str(cal.get("method", options.calibration_method)),
        )
    if plan.get("target") == "tflite":
        return replace(
            options,
            precision=str(r.get("base", "int8-dynamic")),
            per_channel=r.get("per_channel", options.per_channel),
            block_size=int(r.get("block_size", options.block_size)),
            seq_lens=tuple(int(x) for x in r.get("seq_lens") or ()),
            unit_precisions=tuple(assignment),
            plan_record=plan,
        )
    return replace(
        options,
        precision=str(r.get("base", "int4")),
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
    """Build the artifact of ``plan`` (checked against ``prep``'s model) into ``output``;
    the artifact records the plan as :func:`~albert_edge.mixed.plan.replay_record` says
    (an edited plan: what was built, without the search's claims)."""
    from albert_edge.convert import convert

    assignment = check_plan(plan, prep.units, prep.identity, where)
    record = replay_record(plan, prep.units, prep.identity, assignment)
    if record.get("edited"):
        from albert_edge.progress import console, enabled

        if enabled():
            console().print(
                f"albert-edge:   {where} was changed since its search: building its "
                "precisions, recording none of the search's measurements"
            )
    return convert(prep.ckpt, output, plan_options(options, record, assignment))


def convert_plan_file(
    checkpoint: str | Path | Checkpoint | None,
    output: str | Path,
    options: ConvertOptions,
    plan_file: str | Path,
) -> dict[str, Any]:
    """``convert --precision-plan plan.json``."""
    plan = load_plan(plan_file)  # a bad file is refused before the model loads
    made_for = str(plan.get("target", "onnx"))
    if made_for != options.target:
        raise PrecisionPlanError(
            f"{plan_file}: the plan was made for --to {made_for}; convert it with "
            f"--to {made_for}, or search a plan for --to {options.target}"
        )
    base = str((plan.get("recipe") or {}).get("base", "int4"))
    check_calibration(plan, options, str(plan_file))
    prep = prepare(checkpoint, options, base)
    return convert_with_plan(prep, output, options, plan, str(plan_file))


def check_calibration(plan: dict[str, Any], options: ConvertOptions, where: str) -> None:
    """An int8-static plan replays only with the calibration file it was searched with."""
    want = (plan.get("recipe") or {}).get("calibration")
    if not want:
        return
    from albert_edge.data import input_file_record

    have = input_file_record(options.calibration) if options.calibration else None
    if have is None or have["sha256"] != want.get("sha256"):
        raise PrecisionPlanError(
            f"{where}: the plan was calibrated with {want.get('file')} (sha256 "
            f"{str(want.get('sha256'))[:12]}…); pass that file as --calibration"
        )


def convert_auto(
    checkpoint: str | Path | Checkpoint | None,
    output: str | Path,
    options: ConvertOptions,
    data: str | Path,
    settings: Settings,
    base: str = "int4",
    **run: Any,
) -> dict[str, Any]:
    """``convert --precision auto``: search on ``data``, then build with the plan. A
    budget nothing meets raises :class:`~albert_edge.errors.NoPlanError` before anything
    is written."""
    from albert_edge.progress import step

    # too few rows, a file of another task, a label or tag the model lacks: refused
    # before the model loads
    held_out_rows(data, settings, checkpoint)
    prep = prepare(checkpoint, options, base)
    with step(f"precision search ({len(prep.units)} units, --max-drop {settings.max_drop})"):
        plan, _ = auto_plan(prep, data, settings, options, **run)
    return convert_with_plan(prep, output, options, plan, "the searched plan")
