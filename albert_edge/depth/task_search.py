"""Depth search for token-classification and question-answering models.

The classification search (:func:`albert_edge.depth.search_depths`) with the task's own
head and metric: the examples of a CoNLL or SQuAD file (sentences, questions) are split
once by the same seeded permutation into a FIT split and a HELD-OUT split; a per-token
head is fitted after every representable depth on the fit split
(:mod:`albert_edge.depth.task_heads`) and every depth is scored on the held-out split in
the task's metric (entity F1, SQuAD F1), paired with the unchanged full-depth model on
the same examples. The record has the classification search's layout, its
``held_out_accuracy`` fields holding the task's primary metric and ``metric`` naming it,
so the rule (:mod:`albert_edge.depth.choose`), ``depth truncate`` and ``convert --depth``
read it unchanged: ``--max-point-loss`` is in that metric's points.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.depth.features import DepthError, FitSettings
from albert_edge.depth.groups import representable_depths, truncated_num_groups
from albert_edge.depth.record import (
    _DIMS,
    DepthScore,
    DepthSearch,
    SplitSettings,
    split_rows,
    split_sizes,
)
from albert_edge.depth.task_heads import (
    fit_task_head,
    head_outputs,
    metric_interval,
    own_linear,
    score_options,
    token_states,
)
from albert_edge.manifest import sha256_file

if TYPE_CHECKING:
    from albert_edge.checkpoint import Checkpoint
    from albert_edge.tasks import TaskData


def model_config(checkpoint: str | Path | None) -> dict[str, Any] | None:
    """The checkpoint's config.json as plain JSON (no torch); None where it has none."""
    from albert_edge import tasks
    from albert_edge.checkpoint import DEFAULT_MODEL

    return tasks.model_config(Path(checkpoint) if checkpoint is not None else DEFAULT_MODEL)


def head_of(checkpoint: str | Path | None) -> str:
    """The head config.json names (the embedded model: sequence-classification)."""
    from albert_edge.heads import head_from_architectures

    config = model_config(checkpoint)
    if config is None:
        return "sequence-classification"
    return head_from_architectures(config.get("architectures")).name


def task_data(data: str | Path, checkpoint: str | Path) -> TaskData:
    """``data`` read by the task layer and checked against the checkpoint's head and tags
    (config.json) before any model loads: a CoNLL file for a token head, a SQuAD file for
    a span head, anything else refused in one line naming the format the head needs."""
    from albert_edge.tasks import read_task_data

    config = model_config(checkpoint)
    if config is None:
        raise DepthError(f"{checkpoint}: no config.json; pass a Hugging Face checkpoint directory")
    return read_task_data(Path(data), Path(checkpoint), config)


def default_max_length(checkpoint: str | Path | None, head: str) -> int:
    """Tokens per input when ``--max-length`` is not given: 128 for a classifier (its
    sentences), the model's ``max_position_embeddings`` for a token or span head (as
    ``verify --data`` windows them: a CoNLL sentence whole, a SQuAD context in windows
    of that length with the default stride)."""
    if head == "sequence-classification":
        return 128
    config = model_config(checkpoint) or {}
    return int(config.get("max_position_embeddings") or 512)


def _encode(ckpt: Checkpoint, data: TaskData, max_length: int) -> Any:
    from albert_edge.tasks import encode

    return encode(data, ckpt.tokenizer(), min(max_length, int(ckpt.config.max_position_embeddings)))


def check_v2_held_out(held: int, data: Path) -> None:
    """SQuAD v2.0 scores only the odd-numbered held-out questions (the even ones choose
    the null threshold): refuse, before the model loads, a split that leaves fewer than
    the bootstrap's minimum to score."""
    from albert_edge.depth.stats import MIN_BOOTSTRAP_ROWS
    from albert_edge.errors import TooFewRowsError

    if held // 2 < MIN_BOOTSTRAP_ROWS:
        raise TooFewRowsError(
            f"{data}: SQuAD v2.0 chooses the null threshold on half of the {held} held-out "
            f"questions and scores the other {held // 2}, fewer than the {MIN_BOOTSTRAP_ROWS} "
            f"an interval needs: hold out at least {2 * MIN_BOOTSTRAP_ROWS} questions "
            "(--held-out-rows, and enough questions in --data)"
        )


def search_task_depths(
    ckpt: Checkpoint | str | Path,
    data: Path,
    *,
    split: SplitSettings,
    fit: FitSettings,
    report: Path | None = None,
) -> DepthSearch:
    """:func:`albert_edge.depth.search_depths` for a token or span head (see the module
    docstring); ``ckpt`` a loaded checkpoint or its directory."""
    from albert_edge.checkpoint import Checkpoint, load_checkpoint
    from albert_edge.layout import source_record
    from albert_edge.sealed import made_from
    from albert_edge.tasks import paired_metric_interval, score

    where = ckpt.path if isinstance(ckpt, Checkpoint) else Path(ckpt)
    task = task_data(data, where)  # a bad file or a wrong head: refused before the model loads
    _, held, note = split_sizes(len(task.examples), split)
    if task.format == "squad-v2.0":
        check_v2_held_out(held, data)
    if report is not None:
        task_data(report, where)
    ckpt = ckpt if isinstance(ckpt, Checkpoint) else load_checkpoint(ckpt)
    head = ckpt.head.name
    origin = made_from(ckpt.path, {"data": data, "report": report})
    fit_idx, held_idx = split_rows(len(task.examples), split)
    fit_data, held_data = task.subset(fit_idx), task.subset(held_idx)
    fit_feats = _encode(ckpt, fit_data, split.max_length)
    held_feats = _encode(ckpt, held_data, split.max_length)
    fit_ts = token_states(ckpt, fit_feats, description="fit features")
    held_ts = token_states(ckpt, held_feats, description="held-out features")
    c = ckpt.config
    layers = int(c.num_hidden_layers)
    shape = (layers, int(c.num_hidden_groups))
    depths = representable_depths(*shape, int(c.inner_group_num))
    own = own_linear(ckpt)
    heads = {k: fit_task_head(head, own, fit_ts, fit_feats, fit, depth=k) for k in depths}
    ref_out = head_outputs(head, own, held_ts, layers)
    opts = score_options(held_data, held_feats, ref_out)
    m_ref = score(held_data, held_feats, ref_out, **opts)
    fit_opts = score_options(fit_data, fit_feats, head_outputs(head, own, fit_ts, layers))
    scores = []
    for head_kind in ("refit", "own"):
        for k in depths:
            h = heads[k] if head_kind == "refit" else own
            m = score(held_data, held_feats, head_outputs(head, h, held_ts, k), **opts)
            iv = paired_metric_interval(m, m_ref, resamples=split.resamples, seed=split.seed)
            fit_m = score(fit_data, fit_feats, head_outputs(head, h, fit_ts, k), **fit_opts)
            groups = truncated_num_groups(*shape, k, int(c.inner_group_num))
            scores.append(
                DepthScore(
                    depth=k,
                    head=head_kind,
                    groups_kept=int(groups or 0),
                    held_out_accuracy=m.value,
                    delta=iv.delta,
                    delta_low=iv.low,
                    delta_high=iv.high,
                    fit_accuracy=fit_m.value,
                    metric=m.primary,
                )
            )
    low, high = metric_interval(m_ref, resamples=split.resamples, seed=split.seed)
    result = DepthSearch(
        source=source_record(ckpt),
        config={k: int(getattr(c, k)) for k in _DIMS},
        data={
            "file": data.name,
            "sha256": sha256_file(data),
            "task": task.kind.value,
            "format": task.format,
            "rows": len(task.examples),
            "fit_rows": len(fit_idx),
            "held_out_rows": len(held_idx),
            "held_out_features": len(held_feats),
            "split_seed": split.seed,
            **({"scored_examples": m_ref.examples} if m_ref.examples != len(held_idx) else {}),
            **({"note": note} if note else {}),
        },
        settings={
            "split": asdict(split),
            "fit": {
                **asdict(fit),
                "init": f"the model's own {'/'.join(sorted(own))} (a per-token linear)",
            },
        },
        reference={
            "depth": layers,
            "head": "own",
            "metric": m_ref.primary,
            "held_out_accuracy": m_ref.value,
            "low": low,
            "high": high,
            "held_out_metrics": m_ref.values,
            **({"null_threshold": opts["null_threshold"]} if opts else {}),
        },
        scores=scores,
        representable=depths,
        heads=heads,
        made_from=origin,
    )
    if report is not None:
        add_task_report(result, ckpt, report)
    return result


def add_task_report(search: DepthSearch, ckpt: Checkpoint, data: str | Path) -> None:
    """Score every searched head on ``data`` in the task's metric, for the record only
    (nothing chooses on these numbers)."""
    from albert_edge.tasks import paired_metric_interval, score

    data = Path(data)
    task = task_data(data, ckpt.path)
    s = search.settings["split"]
    resamples, seed = int(s["resamples"]), int(s["seed"])
    feats = _encode(ckpt, task, int(s["max_length"]))
    ts = token_states(ckpt, feats, description="report")
    head = ckpt.head.name
    own = own_linear(ckpt)
    layers = int(ckpt.config.num_hidden_layers)
    ref_out = head_outputs(head, own, ts, layers)
    opts = score_options(task, feats, ref_out)
    m_ref = score(task, feats, ref_out, **opts)
    low, high = metric_interval(m_ref, resamples=resamples, seed=seed)
    search.reference["report"] = {
        "file": data.name,
        "sha256": sha256_file(data),
        "rows": len(task.examples),
        "metric": m_ref.primary,
        "accuracy": m_ref.value,
        "low": low,
        "high": high,
        "metrics": m_ref.values,
    }
    for sc in search.scores:
        h = search.heads[sc.depth] if sc.head == "refit" else own
        m = score(task, feats, head_outputs(head, h, ts, sc.depth), **opts)
        iv = paired_metric_interval(m, m_ref, resamples=resamples, seed=seed)
        sc.report = {
            "metric": m.primary,
            "accuracy": m.value,
            "delta": iv.delta,
            "low": iv.low,
            "high": iv.high,
        }
