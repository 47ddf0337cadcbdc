"""One candidate: build its artifact with the levers' public APIs, then judge it.

:func:`build_candidate` is what a build worker (a local process, or a Ray task with
``--cluster``) runs for one candidate. It writes ``artifact/`` (exactly as ``convert``, ``convert --depth``, ``convert --precision
auto`` or ``early-exit --max-drop`` write it: verified and sealed) into the directory it
is given, scores it on the choose rows (which decide) and the report rows (recorded only)
against the given model in PyTorch, and returns the record. Nothing here times anything.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError

EXIT_FIT_ROWS = 8000  # the exit heads' fit rows, `early-exit --fit-rows`'s default


def _options(ctx: Mapping[str, Any], precision: str) -> Any:
    from albert_edge.options import ConvertOptions

    return ConvertOptions(target=ctx["target"], precision=precision)


def precision_of(ctx: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    """The recipe ``convert`` builds a candidate with: its precision, or for a precision
    plan (``auto``) the target's weight-only base the plan narrows per unit
    (:func:`albert_edge.mixed.plan_base`: int4 for ONNX, int8-dynamic for TFLite)."""
    from albert_edge.mixed import plan_base

    precision = str(spec["precision"])
    return plan_base(str(ctx["target"])) if precision == "auto" else precision


def _auto(ctx: Mapping[str, Any], budget: float) -> Any:
    """A builder for ``convert --precision auto`` on the choose rows under ``budget``:
    all of them (the plan search's default draws 1,000, too few to judge the small
    budget a shallow depth leaves), minimising bytes whatever ``--objective`` says: a
    plan's single-unit timings differ by noise, so a latency plan changed between two
    runs of the same inputs (a resumed run built other bytes); latency is judged
    between the candidates, timed side by side."""
    from albert_edge.mixed import Settings, convert_auto

    settings = Settings(max_drop=budget, objective="bytes", rows=ctx["choose_rows"])

    def build(ckpt: Any, out: Any, options: Any) -> dict[str, Any]:
        base = options.precision  # precision_of's base for the target
        return dict(convert_auto(ckpt, out, options, ctx["choose"], settings, base, workers=1))

    return build


def _convert(ctx: Mapping[str, Any], spec: Mapping[str, Any], out: Path) -> None:
    from albert_edge.convert import convert
    from albert_edge.depth import convert_at_depth, load_search

    precision = spec["precision"]
    auto = precision == "auto"
    opts = _options(ctx, precision_of(ctx, spec))
    build = _auto(ctx, float(spec["budget_left"])) if auto else convert
    given = spec["source"] == "given"
    base = ctx["given"] if given else ctx["base"]
    # a trimmed vocabulary (healed or not) is its own checkpoint with its own depth
    # search: its heads read its states
    ckpt, search = (base, ctx["search"]) if spec["vocab"] == "full" else vocab_of(ctx, spec)
    if spec["depth"] == ctx["layers"]:
        build(ckpt, out, opts)
        return
    convert_at_depth(ckpt, out, opts, load_search(search), int(spec["depth"]), build=build)


def vocab_of(ctx: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str]:
    """(checkpoint, depth search) of a trimmed vocabulary's candidate: ``trim`` (as the
    trim left it) or ``heal`` (after the healing fine-tune)."""
    v = ctx[spec["vocab"]]
    return str(v["checkpoint"]), str(v["search"])


def _exit(ctx: Mapping[str, Any], spec: Mapping[str, Any], out: Path, scratch: Path) -> Any:
    """``early-exit --max-drop``: heads on the fit rows, the threshold on the choose rows
    under the budget its full-depth fp32 form left, recorded as the artifact's policy."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.early_exit import build_early_exit_artifact
    from albert_edge.early_exit.artifact import with_policy
    from albert_edge.early_exit.fit import choose_threshold, fit_heads_on, read_rows
    from albert_edge.reference import torch_threads
    from albert_edge.sealed import made_from

    base = ctx["base"] if spec["vocab"] == "full" else vocab_of(ctx, spec)[0]
    path = None if base is None else Path(base)  # None: the embedded model
    ckpt = load_checkpoint(path)
    fit = read_rows(ctx["fit"], path, "optimize")  # in the split's seeded order
    fit = fit.subset(range(min(EXIT_FIT_ROWS, len(fit.examples))))
    with torch_threads(1):
        heads = fit_heads_on(ckpt, fit, 27)
    off = scratch / "off"
    fitted_on = made_from(data={"data": ctx["fit"]}, with_checkpoint=False)
    build_early_exit_artifact(ckpt, off, heads, precision=spec["precision"], made_from=fitted_on)
    policy, record = choose_threshold(
        off,
        read_rows(ctx["choose"], path, "optimize"),
        read_rows(ctx["report"], path, "optimize"),
        ckpt.tokenizer(),
        float(spec["budget_left"]),
        threads=1,
    )
    with_policy(off, out, policy, choice=record, inputs=[Path(ctx["fit"])])
    # the share of choose rows stopping at each exit: the timing mixes per-exit costs by it
    chosen = [e for e in record["choose"]["evidence"] if e["policy"] == record["policy"]]
    layers = int(ckpt.config.num_hidden_layers)
    share = chosen[0]["exit_share"] if chosen else [0.0] * (layers - 1) + [1.0]
    return {
        "policy": str(record["policy"]),
        "mean_layers": record["report"]["mean_layers"],
        "choose_exit_share": share,
    }


def build_candidate(ctx: Mapping[str, Any], spec: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Build and judge one candidate into ``where`` (a fresh directory); the record."""
    import shutil

    from albert_edge.depth import Rule
    from albert_edge.manifest import read_manifest
    from albert_edge.optimize.stages import (
        artifact_metrics,
        compare,
        disk_full,
        held_reference,
        task_rows,
    )

    d = Path(where)
    out, scratch = d / "artifact", d / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    rec: dict[str, Any] = {"key": spec["key"], "spec": dict(spec)}
    try:
        if spec["exit"] != "none":
            rec["exit"] = _exit(ctx, spec, out, scratch)
        else:
            _convert(ctx, spec, out)
    except AlbertEdgeError as exc:
        rec.update(built=False, why_not=f"not built: {exc}", build_s=time.monotonic() - t0)
        full = disk_full(exc, d)
        if full is not None:  # the disk's fault, not the candidate's: the run stops
            rec["disk_full"] = full
        return rec
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rec["build_s"] = time.monotonic() - t0
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
    max_len = int(ctx["seq_len"])
    for split in ("choose", "report"):
        rows = task_rows(Path(ctx[split]), ctx["given"])
        ref, options, names = held_reference(
            ctx["given"], rows, max_len, Path(ctx[f"reference_{split}"])
        )
        rec[split] = compare(artifact_metrics(out, rows, max_len, names, options), ref)
    rule = Rule(
        max_point_loss=float(ctx["max_drop"]), min_lower_bound=float(ctx["min_lower_bound"])
    )
    c = rec["choose"]
    rec["why_not"] = rule.why_not({"delta": c["delta"], "delta_low": c["low"]})
    rec["score_s"] = time.monotonic() - t0 - rec["build_s"]
    return rec
