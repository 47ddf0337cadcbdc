"""``bench --recommend`` over pruning: heads and FFN neurons removed, as more candidates.

With ``--data`` and a task head (sequence classification single or pair, token
classification, QA), the checkpoint is pruned by the prune package's own parts, without
its healing and without a run of ``albert-edge prune``:

1. importance of every head and FFN neuron of every shared layer
   (:func:`albert_edge.prune.importance`) on the *choose* split's inputs, on the loss
   against the model's own answers: the labels that judge the candidates are not used to
   rank what is removed;
2. the level: :func:`albert_edge.prune.search_level` with the budget ``--prune-max-drop``
   (default: the depth package's rule, 0.5 points), the cheapest (encoder FLOPs) level
   whose loss on the choose split the rule admits, judged with 0/1 gates on the unpruned
   model (nothing sliced per level);
3. the chosen level sliced (:func:`albert_edge.prune.apply_plan`) and written into the
   work directory as a plain Hugging Face checkpoint, then every asked (target,
   precision) converted from it exactly as ``convert`` converts any checkpoint (verified
   against the pruned checkpoint, its size floor following the pruned shapes).

**Judged like every other candidate.** A pruned candidate is scored on the choose split
paired with the unpruned checkpoint on the same rows, timed interleaved with the rest,
and admitted by its precision's bar and the rule the level was chosen by; the level, its
FLOPs factor and the search's evidence ride on each row. It is *unhealed*:
``albert-edge prune`` heals by distilling the unpruned model, which can only raise it.

Absent, with one line saying why (:func:`absent_reason`): ``--no-prune``, no ``--data``,
a head without a task metric, a checkpoint already pruned, a TF1 checkpoint (no
config.json to read the head from), or no pruned level the rule admits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from albert_edge.errors import BenchmarkError

DEFAULT_MAX_DROP = 0.5  # the depth package's Rule().max_point_loss: the budget by default
SKIP_FLAG = "--no-prune"


def check_flags(skip: bool, max_drop: float | None, data: Path | None) -> None:
    """Refuse, before any model loads, a budget nothing would use."""
    if max_drop is None:
        return
    if skip:
        raise BenchmarkError(
            f"--prune-max-drop sets the pruned candidates' budget; {SKIP_FLAG} drops them: "
            "pass one of the two"
        )
    if data is None:
        raise BenchmarkError(
            "--prune-max-drop needs --data: pruned levels are chosen on the choose split"
        )


def absent_reason(ckpt: Any, splits: Mapping[str, Any] | None, skip: bool) -> str | None:
    """Why no pruned candidate is built, in words; None when they are."""
    from albert_edge.prune.api import HEADS

    if skip:
        return SKIP_FLAG
    if splits is None:
        return "no --data (a level is chosen on labelled rows the model never trained on)"
    if ckpt.head.name not in HEADS:
        return f"a {ckpt.head.name} model has no task metric to prune against"
    if getattr(ckpt.config, "pruned_heads", None):
        return "the checkpoint is already pruned (its importance was measured before)"
    if not (Path(ckpt.path) / "config.json").is_file():
        return "no config.json to read the head from (a TF1 checkpoint: convert it first)"
    return None


def _choose_rows(ckpt: Any, calibration: Path) -> tuple[Any, Any]:
    """The choose split (the file written for calibration), read by the task layer and
    encoded at the checkpoint's length: (task data, features)."""
    import albert_edge.tasks as tasks
    from albert_edge.vocab.heldout import max_len_of

    config = tasks.model_config(Path(ckpt.path)) or {}
    data = tasks.read_task_data(calibration, Path(ckpt.path), config)
    return data, tasks.encode(data, ckpt.tokenizer(), max_len_of(ckpt))


def choose_level(
    ckpt: Any, calibration: Path, max_drop: float, threads: int, say: Callable[[str], None]
) -> tuple[Any, dict[str, Any]]:
    """(the level :func:`albert_edge.prune.search_level` chose, the record rows carry):
    importance on the choose split's inputs (the model's own answers), the budget's
    search on its labels. Raises :class:`albert_edge.prune.PruneError` when no pruned
    level is admitted."""
    import torch

    from albert_edge.depth import Rule
    from albert_edge.prune import PruneOptions, importance, search_level
    from albert_edge.prune.api import cost_record
    from albert_edge.prune.plan import heads_json

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        choose = _choose_rows(ckpt, calibration)
        model, head = ckpt.model.eval(), ckpt.head.name
        say(f"recommend: pruning importance on {len(choose[0].examples)} choose rows ...")
        scores = importance(model, choose[1], head, own=True)
        # cost the heads as the benchmark's runtime at its threads pays them
        opts = PruneOptions(
            max_drop=max_drop, min_lower_bound=Rule().min_lower_bound, runtime_threads=threads
        )
        level = search_level(
            model, head, scores, choose, opts, say=lambda m: say(f"recommend: {m}")
        )
    finally:
        torch.set_num_threads(before)
    plan = level.plan
    chosen = next(r for r in level.evidence if r.get("chosen"))
    record = {
        "heads_keep": heads_json(plan.heads_keep),
        "of_heads": plan.num_heads,
        "ffn_keep": plan.ffn_keep,
        "of_ffn": plan.intermediate,
        "pruned_heads": {str(k): v for k, v in plan.removed_heads().items()},
        "flops_ratio": chosen["flops_ratio"],
        "cost": cost_record(ckpt.config, plan),
        "gated": {k: chosen.get(k) for k in ("delta", "delta_low", "delta_high", "examples")},
        "rule": level.rule,
        "importance": "first-order Taylor on the choose split's inputs, loss against the "
        "model's own answers (labels unused)",
        "healed": False,
    }
    return level, record


def tag_of(record: Mapping[str, Any]) -> str:
    """A pruned candidate's short name: heads and FFN neurons kept per shared layer."""
    from albert_edge.prune.plan import heads_label

    return f"pruned-h{heads_label(record['heads_keep'])}f{record['ffn_keep']}"


def prune_candidates(
    ckpt: Any,
    calibration: Path,
    max_drop: float,
    candidates: Sequence[tuple[str, str]],
    build: Callable[..., tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Path]]]],
    work: Path,
    threads: int,
    say: Callable[[str], None],
) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Path]], dict[str, Any]]:
    """(rows, built artifacts, info): every asked (target, precision) converted from the
    checkpoint pruned at the chosen level. ``build(candidates, at_prune=(pruned
    checkpoint, tag, row fields))`` converts (``recommend._build``)."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.prune import apply_plan
    from albert_edge.prune.write import write_checkpoint

    level, record = choose_level(ckpt, calibration, max_drop, threads, say)
    where = work / tag_of(record)
    where.mkdir()
    write_checkpoint(where, Path(ckpt.path), apply_plan(ckpt.model, level.plan), ckpt.head)
    record["checkpoint"] = str(where)
    say(f"recommend: pruned to {level.plan.label()}; converting ...")
    rows, built = build(candidates, at_prune=(load_checkpoint(where), tag_of(record), record))
    info = {"level": record, "evidence": level.evidence, "budget": max_drop}
    return rows, built, info


def add_prune(
    ckpt: Any,
    *,
    skip: bool,
    max_drop: float | None,
    splits: Mapping[str, Any] | None,
    calibration: Path | None,
    candidates: Sequence[tuple[str, str]],
    build: Callable[..., tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Path]]]],
    work: Path,
    threads: int,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """``rows``, ``built`` (scored and timed like the rest) and ``info`` (the level and
    the search, or ``absent``: why there are none) for the printout."""
    from albert_edge.prune import PruneError

    why = absent_reason(ckpt, splits, skip)
    if why is None and calibration is not None:
        budget = DEFAULT_MAX_DROP if max_drop is None else max_drop
        try:
            rows, built, info = prune_candidates(
                ckpt, calibration, budget, candidates, build, work, threads, say
            )
            return {"rows": rows, "built": built, "info": info}
        except PruneError as exc:
            why = f"no pruned level is admitted at --prune-max-drop {budget:g} ({exc})"
    return {"rows": [], "built": [], "info": {"absent": why}}


def why_not(row: Mapping[str, Any]) -> str | None:
    """A pruned candidate's verdict under the rule its level was chosen by, on its own
    choose-split difference to the checkpoint (None for other rows)."""
    record = row.get("prune")
    if not isinstance(record, Mapping) or not record.get("rule"):
        return None
    from albert_edge.bench.recommend_depth import rule_why_not
    from albert_edge.depth import Rule

    reason = rule_why_not(row, Rule(**record["rule"]))
    return f"rule: {reason}" if reason else None


def format_prune(result: Mapping[str, Any]) -> list[str]:
    """The level (heads and neurons kept, FLOPs factor, its gated score), then each
    pruned candidate's verdict; or the one line saying why there are none."""
    from albert_edge.prune.plan import heads_label

    info = result.get("pruning")
    if not info:
        return []
    if info.get("absent"):
        return [f"pruned candidates: none — {info['absent']}"]
    lv = info["level"]
    g = lv["gated"]
    iv = (
        f" [{100 * g['delta_low']:+.2f}, {100 * g['delta_high']:+.2f}]"
        if g["delta_low"] is not None
        else ""
    )
    lines = [
        f"pruning x precision: heads {heads_label(lv['heads_keep'])}/{lv['of_heads']}, FFN "
        f"{lv['ffn_keep']}/{lv['of_ffn']} per shared layer (encoder FLOPs x"
        f"{lv['flops_ratio']:.3f} at 128 tokens), the cheapest of {len(info['evidence'])} "
        f"levels judged that loses at most {info['budget']:g} points on the choose split "
        f"(gated, {100 * g['delta']:+.2f}{iv}); unhealed (`albert-edge prune` heals)"
    ]
    for r in result["candidates"]:
        if r.get("prune") is None:
            continue
        verdict = "eligible" if r.get("eligible") else f"not eligible: {r.get('why_not')}"
        d = r.get("delta_vs_checkpoint")
        delta = f"{d['points']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]" if d else "-"
        size = f"{r['file_bytes'] / 1e6:.2f} MB" if r.get("file_bytes") else "-"
        lines.append(f"    {r['name']}: Δ pts {delta} vs unpruned, {size}  {verdict}")
    return lines
