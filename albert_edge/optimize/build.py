"""One candidate: build its artifact with the levers' public APIs, then judge it.

:func:`build_candidate` is what a build worker (a local process, or a Ray task with
``--cluster``) runs for one candidate. It writes ``artifact/`` (exactly as ``convert``, ``convert --depth``, ``convert --precision
auto`` or ``early-exit --max-drop`` write it: verified and sealed) into the directory it
is given, scores it on the choose rows (which decide) and the report rows (recorded only)
against the given model in PyTorch, and returns the record. Nothing here times anything.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError
from albert_edge.optimize.context import RunContext
from albert_edge.optimize.plan import Candidate, CandidateBuild

EXIT_FIT_ROWS = 8000  # the exit heads' fit rows, `early-exit --fit-rows`'s default


def precision_of(target: str, precision: str) -> str:
    """The recipe ``convert`` builds a candidate with: its precision, or for a precision
    plan (``auto``) the target's weight-only base the plan narrows per unit
    (:func:`albert_edge.mixed.plan_base`: int4 for ONNX, int8-dynamic for TFLite)."""
    from albert_edge.mixed import plan_base

    return plan_base(target) if precision == "auto" else precision


def _auto(choose: Path, choose_rows: int, budget: float) -> Any:
    """A builder for ``convert --precision auto`` on the choose rows under ``budget``:
    all of them (the plan search's default draws 1,000, too few to judge the small
    budget a shallow depth leaves), minimising bytes whatever ``--objective`` says: a
    plan's single-unit timings differ by noise, so a latency plan changed between two
    runs of the same inputs (a resumed run built other bytes); latency is judged
    between the candidates, timed side by side."""
    from albert_edge.mixed import Settings, convert_auto

    settings = Settings(max_drop=budget, objective="bytes", rows=choose_rows)

    def build(ckpt: Any, out: Any, options: Any) -> dict[str, Any]:
        base = options.precision  # precision_of's base for the target
        return dict(convert_auto(ckpt, out, options, choose, settings, base, workers=1))

    return build


def source_of(ctx: RunContext, c: Candidate) -> tuple[Path | None, Path | None]:
    """(checkpoint, depth search) a candidate is built from: the given model or the
    searched one (fine-tuned where that ran) with its search, or a trimmed vocabulary
    (healed or not) or the pruned checkpoint, its own checkpoint with its own search: its
    heads read its states."""
    derived = ctx.derived(c)
    if derived is not None:
        return derived.checkpoint, derived.search
    return (ctx.given if c.source == "given" else ctx.base), ctx.search


def _convert(ctx: RunContext, build: CandidateBuild, out: Path) -> None:
    from albert_edge.convert import convert
    from albert_edge.depth import convert_at_depth, load_search
    from albert_edge.options import ConvertOptions

    c = build.candidate
    opts = ConvertOptions(target=ctx.target, precision=precision_of(ctx.target, c.precision))
    builder = (
        _auto(ctx.choose, ctx.choose_rows, build.budget_left) if c.precision == "auto" else convert
    )
    ckpt, search = source_of(ctx, c)
    if c.depth == ctx.layers:
        builder(ckpt, out, opts)
        return
    assert search is not None  # the depth stage ran before any candidate
    convert_at_depth(ckpt, out, opts, load_search(search), c.depth, build=builder)


def _exit(ctx: RunContext, build: CandidateBuild, out: Path, scratch: Path) -> Any:
    """``early-exit --max-drop``: heads on the fit rows, the threshold on the choose rows
    under the budget its full-depth fp32 form left, recorded as the artifact's policy."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.early_exit import build_early_exit_artifact
    from albert_edge.early_exit.artifact import with_policy
    from albert_edge.early_exit.fit import choose_threshold, fit_heads_on, read_rows
    from albert_edge.reference import torch_threads
    from albert_edge.sealed import made_from

    c = build.candidate
    derived = ctx.derived(c)
    path = derived.checkpoint if derived is not None else ctx.base  # None: the embedded model
    ckpt = load_checkpoint(path)
    fit = read_rows(ctx.fit, path, "optimize")  # in the split's seeded order
    fit = fit.subset(range(min(EXIT_FIT_ROWS, len(fit.examples))))
    with torch_threads(1):
        heads = fit_heads_on(ckpt, fit, 27)
    off = scratch / "off"
    fitted_on = made_from(data={"data": ctx.fit}, with_checkpoint=False)
    build_early_exit_artifact(ckpt, off, heads, precision=c.precision, made_from=fitted_on)
    policy, record = choose_threshold(
        off,
        read_rows(ctx.choose, path, "optimize"),
        read_rows(ctx.report, path, "optimize"),
        ckpt.tokenizer(),
        build.budget_left,
        threads=1,
    )
    with_policy(off, out, policy, choice=record, inputs=[ctx.fit])
    # the share of choose rows stopping at each exit: the timing mixes per-exit costs by it
    chosen = [e for e in record["choose"]["evidence"] if e["policy"] == record["policy"]]
    layers = int(ckpt.config.num_hidden_layers)
    share = chosen[0]["exit_share"] if chosen else [0.0] * (layers - 1) + [1.0]
    return {
        "policy": str(record["policy"]),
        "mean_layers": record["report"]["mean_layers"],
        "choose_exit_share": share,
    }


def _judge(ctx: RunContext, out: Path, rec: dict[str, Any]) -> None:
    """The built artifact's sizes, its metric on the choose rows (the rule's verdict)
    and on the report rows (recorded only), against the given model: into ``rec``."""
    from albert_edge.depth import Rule
    from albert_edge.manifest import read_manifest
    from albert_edge.optimize.scoring import (
        artifact_metrics,
        compare,
        held_reference,
        task_rows,
    )

    manifest = read_manifest(out)
    sizes = manifest.get("sizes", {})
    rec.update(
        built=True,
        artifact="artifact",
        file_bytes=sizes.get("file_bytes"),
        model_bytes=sizes.get("model_bytes", sizes.get("file_bytes")),
        ratio_to_floor=sizes.get("ratio_to_floor"),
        manifest_precision=manifest.get("precision"),
    )
    for split in ("choose", "report"):
        rows = task_rows(ctx.held(split), ctx.given)
        ref, options, names = held_reference(ctx.given, rows, ctx.seq_len, ctx.reference(split))
        rec[split] = compare(artifact_metrics(out, rows, ctx.seq_len, names, options), ref)
    rule = Rule(max_point_loss=ctx.max_drop, min_lower_bound=ctx.min_lower_bound)
    c = rec["choose"]
    rec["why_not"] = rule.why_not({"delta": c["delta"], "delta_low": c["low"]})


def build_candidate(ctx: RunContext, build: CandidateBuild, where: str) -> dict[str, Any]:
    """Build and judge one candidate into ``where`` (a fresh directory); the record."""
    import shutil

    from albert_edge.optimize.work import disk_full

    d = Path(where)
    out, scratch = d / "artifact", d / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    rec: dict[str, Any] = {"key": build.key, "spec": build.spec()}
    if build.candidate.pruned and ctx.prune is not None:  # what the report says it removed
        rec["prune"] = ctx.prune.to_json()
    try:
        if build.candidate.exit != "none":
            rec["exit"] = _exit(ctx, build, out, scratch)
        else:
            _convert(ctx, build, out)
    except AlbertEdgeError as exc:
        rec.update(built=False, why_not=f"not built: {exc}", build_s=time.monotonic() - t0)
        full = disk_full(exc, d)
        if full is not None:  # the disk's fault, not the candidate's: the run stops
            rec["disk_full"] = full
        return rec
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rec["build_s"] = time.monotonic() - t0
    _judge(ctx, out, rec)
    rec["score_s"] = time.monotonic() - t0 - rec["build_s"]
    return rec
