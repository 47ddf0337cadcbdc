"""Depth search: an exit head per depth on the frozen backbone, scored on held-out rows.

The labelled examples (sentences, sentence pairs, CoNLL sentences, SQuAD questions) are
split once, by a seeded permutation, into a FIT split (the heads learn there) and a
HELD-OUT split the heads never see: every depth is scored there, in the task's metric
(:class:`~albert_edge.tasks.Metrics`: accuracy for a sequence classifier, entity F1 for
a token head, SQuAD F1 for a span head), against the unchanged model at full depth on
the same examples, with a paired bootstrap interval. That split is the one a depth is
chosen on. A dev set is for reporting only (``report=``): choosing and claiming on the
same 872 sentences would overstate what the choice keeps.

One code path for every head: what differs (the states a head reads, the head it starts
from, how its outputs are scored) is the head's probe (:mod:`albert_edge.depth.probes`).
Only depths a config can express are searched (:mod:`albert_edge.depth.groups`).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.depth.features import DepthError, FitSettings
from albert_edge.depth.groups import representable_depths, truncated_num_groups
from albert_edge.depth.probes import Probe, Split, probe_for
from albert_edge.depth.record import (
    _DIMS,
    MIN_HELD_OUT_ROWS,
    DepthScore,
    DepthSearch,
    HeldOutMetric,
    SplitSettings,
    bits,
    split_rows,
    split_sizes,
    unbits,
)
from albert_edge.manifest import sha256_file

if TYPE_CHECKING:
    from albert_edge.checkpoint import Checkpoint
    from albert_edge.tasks import Metrics, TaskData

# the record's types live in albert_edge.depth.record; importable from here as before
__all__ = [
    "MIN_HELD_OUT_ROWS",
    "DepthScore",
    "DepthSearch",
    "HeldOutMetric",
    "SplitSettings",
    "add_report",
    "bits",
    "check_served",
    "count_rows",
    "labelled_rows",
    "search_depths",
    "split_rows",
    "split_sizes",
    "unbits",
]


def labelled_rows(
    data: Path, checkpoint: str | Path | None
) -> tuple[list[tuple[int, str]], list[str | None]]:
    """``(label, first sentence)`` per row of ``data``, and each row's second sentence
    (an empty list for a single-sentence file): read by the task layer and checked against
    the checkpoint's head and labels (config.json; None is the embedded model) before any
    model loads, for a sequence-classification head (:func:`count_rows` serves every head).
    A head the search does not serve is refused in one line naming those it serves."""
    from albert_edge.depth.probes import ClsProbe

    check_served(checkpoint)
    task = ClsProbe().read(Path(data), checkpoint)
    rows = [(int(ex.label), ex.text) for ex in task.examples]
    pairs = [ex.text_pair for ex in task.examples] if task.pair else []
    return rows, pairs


def check_served(checkpoint: str | Path | None) -> str:
    """The checkpoint's head (config.json, no torch), or one line naming the heads the
    depth search serves."""
    from albert_edge.depth.data import head_of
    from albert_edge.depth.task_heads import SERVED, served_line

    head = head_of(checkpoint)
    if head not in SERVED:
        raise DepthError(served_line(checkpoint, head))
    return head


def count_rows(data: Path, checkpoint: str | Path | None) -> int:
    """The labelled examples of ``data`` a search splits (sentences, sentence pairs,
    CoNLL sentences, SQuAD questions), read and checked against the checkpoint's head
    before any model loads."""
    return len(probe_for(check_served(checkpoint)).read(Path(data), checkpoint).examples)


def search_depths(
    checkpoint: str | Path | Checkpoint | None,
    data: str | Path,
    *,
    split: SplitSettings | None = None,
    fit: FitSettings | None = None,
    report: str | Path | None = None,
) -> DepthSearch:
    """Fit an exit head per representable depth and score each on held-out examples.

    ``data``: a labelled task file for the model's head (the FIT and HELD-OUT splits are
    drawn from it): a GLUE-style .tsv for a sequence classifier (single sentences or
    pairs; accuracy), a CoNLL file for a token head (entity F1), a SQuAD .json for a span
    head (SQuAD F1). Each head starts from the checkpoint's trained exit head for that
    depth when it has them (a classifier trained with ``--exit-loss pabee``), else from
    the model's own head; ``fit.epochs = 0`` keeps the starting heads as they are
    (scored, not fitted). ``report``: optional labelled file of the same task scored for
    the record only.
    """
    from albert_edge.checkpoint import Checkpoint, load_checkpoint
    from albert_edge.sealed import made_from

    split, fit = split or SplitSettings(), fit or FitSettings()
    data = Path(data)
    where = checkpoint.path if isinstance(checkpoint, Checkpoint) else checkpoint
    # a head the search does not serve, a bad file, too few rows: refused before the model loads
    probe = probe_for(check_served(where))
    task = probe.read(data, where)
    _, held, note = split_sizes(len(task.examples), split)
    probe.check(task, held, data)
    if report is not None:
        probe.read(Path(report), where)  # likewise a bad report file
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
    c = ckpt.config
    shape = (int(c.num_hidden_layers), int(c.num_hidden_groups), int(c.inner_group_num))
    depths = representable_depths(*shape)
    init, init_text = probe.init(ckpt, depths)  # a changed exit-heads file fails before the work
    origin = made_from(ckpt.path, {"data": data, "report": report})
    fit_idx, held_idx = split_rows(len(task.examples), split)
    parts = probe.splits(ckpt, task, [fit_idx, held_idx], split.max_length, data)
    own = probe.own(ckpt)
    for part in parts:
        probe.set_options(part, own, shape[0])
    heads = {k: probe.fit(init[k], parts[0], fit, k) for k in depths}
    m_ref = probe.metrics(own, parts[1], shape[0])
    scores = [
        _depth_score(
            probe, heads[k] if kind == "refit" else own, k, kind, parts, m_ref, split, shape
        )
        for kind in ("refit", "own")
        for k in depths
    ]
    result = DepthSearch(
        source=_source(ckpt),
        config={k: int(getattr(c, k)) for k in _DIMS},
        data=_data_record(data, task, len(fit_idx), parts[1], m_ref, split.seed, note),
        settings={"split": asdict(split), "fit": {**asdict(fit), "init": init_text}},
        reference=_reference(probe, m_ref, parts[1], shape[0], split),
        scores=scores,
        representable=depths,
        heads=heads,
        made_from=origin,
    )
    if report is not None:
        add_report(result, ckpt, report)
    return result


def _source(ckpt: Checkpoint) -> dict[str, Any]:
    from albert_edge.layout import source_record

    return source_record(ckpt)


def _depth_score(
    probe: Probe,
    head: dict[str, Any],
    depth: int,
    kind: str,
    parts: list[Split],
    m_ref: Metrics,
    split: SplitSettings,
    shape: tuple[int, int, int],
) -> DepthScore:
    """One (head, depth)'s evidence: its metric on the held-out split, paired with the
    full-depth model's on the same examples, and on the fit split."""
    from albert_edge.tasks import paired_metric_interval

    m = probe.metrics(head, parts[1], depth)
    iv = paired_metric_interval(m, m_ref, resamples=split.resamples, seed=split.seed)
    groups = truncated_num_groups(shape[0], shape[1], depth, shape[2])
    return DepthScore(
        depth=depth,
        head=kind,
        groups_kept=int(groups or 0),
        held_out_metric=HeldOutMetric(m.primary, m.value),
        delta=iv.delta,
        delta_low=iv.low,
        delta_high=iv.high,
        fit_metric=probe.metrics(head, parts[0], depth).value,
    )


def _data_record(
    data: Path,
    task: TaskData,
    fit_rows: int,
    held: Split,
    m_ref: Metrics,
    seed: int,
    note: str | None,
) -> dict[str, Any]:
    """What the search was drawn from: the file (name and sha256, never a path), its
    task and layout, and the split's sizes."""
    held_rows = len(held.data.examples)
    return {
        "file": data.name,
        "sha256": sha256_file(data),
        "task": task.kind.value,
        "format": task.format,
        "rows": len(task.examples),
        "fit_rows": fit_rows,
        "held_out_rows": held_rows,
        **({"held_out_features": len(held.features)} if held.features is not None else {}),
        "split_seed": seed,
        **({"scored_examples": m_ref.examples} if m_ref.examples != held_rows else {}),
        **({"note": note} if note else {}),
    }


def _reference(
    probe: Probe, m_ref: Metrics, held: Split, layers: int, split: SplitSettings
) -> dict[str, Any]:
    """The unchanged model at full depth on the held-out split: its metric, interval,
    every metric of the task, and what later scoring pairs with (per-row correctness;
    SQuAD v2.0's null threshold)."""
    from albert_edge.tasks import metric_interval

    low, high = metric_interval(m_ref, resamples=split.resamples, seed=split.seed)
    correct = probe.correct_bits(m_ref, held)
    threshold = held.options.get("null_threshold")
    return {
        "depth": layers,
        "head": "own",
        "held_out_metric": asdict(HeldOutMetric(m_ref.primary, m_ref.value)),
        "low": low,
        "high": high,
        "held_out_metrics": dict(m_ref.values),
        **({"held_out_correct": correct} if correct is not None else {}),
        **({"null_threshold": threshold} if threshold is not None else {}),
    }


def add_report(search: DepthSearch, ckpt: Checkpoint, data: str | Path) -> None:
    """Score every searched head on ``data`` in the search's metric, for the record
    (each ``DepthScore.report``).

    Report only: nothing in :mod:`albert_edge.depth` chooses on these numbers.
    """
    from albert_edge.tasks import metric_interval, paired_metric_interval

    data = Path(data)
    probe = probe_for(ckpt.head.name)
    task = probe.read(data, ckpt.path)
    s = search.settings["split"]
    resamples, seed = int(s["resamples"]), int(s["seed"])
    (part,) = probe.splits(
        ckpt, task, [list(range(len(task.examples)))], int(s["max_length"]), data, "report"
    )
    own, layers = probe.own(ckpt), int(ckpt.config.num_hidden_layers)
    probe.set_options(part, own, layers)
    m_ref = probe.metrics(own, part, layers)
    low, high = metric_interval(m_ref, resamples=resamples, seed=seed)
    correct = probe.correct_bits(m_ref, part)
    search.reference["report"] = {
        "file": data.name,
        "sha256": sha256_file(data),
        "rows": len(task.examples),
        "metric": m_ref.primary,
        "value": m_ref.value,
        "low": low,
        "high": high,
        "metrics": dict(m_ref.values),
        **({"correct": correct} if correct is not None else {}),
    }
    for sc in search.scores:
        m = probe.metrics(search.heads[sc.depth] if sc.head == "refit" else own, part, sc.depth)
        iv = paired_metric_interval(m, m_ref, resamples=resamples, seed=seed)
        sc.report = {
            "metric": m.primary,
            "value": m.value,
            "delta": iv.delta,
            "low": iv.low,
            "high": iv.high,
        }
