"""Depth search: an exit head per depth on the frozen backbone, scored on held-out rows.

The labelled rows are split once, by a seeded permutation, into a FIT split (the heads
learn there) and a HELD-OUT split the heads never see: every depth is scored there,
against the unchanged model at full depth, with a paired bootstrap interval. That split
is the one a depth is chosen on. A dev set is for reporting only (``report=``): choosing
and claiming on the same 872 sentences would overstate what the choice keeps.

Only depths a config can express are searched (:mod:`albert_edge.depth.groups`).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from albert_edge.depth.features import (
    DepthError,
    FitSettings,
    cls_states,
    fit_head,
    own_head,
    predictions,
    trained_exit_heads,
)
from albert_edge.depth.groups import representable_depths, truncated_num_groups
from albert_edge.depth.record import (
    _DIMS,
    MIN_HELD_OUT_ROWS,
    DepthScore,
    DepthSearch,
    SplitSettings,
    bits,
    split_rows,
    split_sizes,
    unbits,
)
from albert_edge.depth.stats import accuracy_interval, paired_bootstrap
from albert_edge.manifest import sha256_file

if TYPE_CHECKING:
    import torch

    from albert_edge.checkpoint import Checkpoint

# the record's types live in albert_edge.depth.record; importable from here as before
__all__ = [
    "MIN_HELD_OUT_ROWS",
    "DepthScore",
    "DepthSearch",
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
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.early_exit.fit import read_rows
    from albert_edge.errors import UnsupportedError

    model = Path(checkpoint) if checkpoint is not None else DEFAULT_MODEL  # None: the embedded
    check_served(checkpoint)
    try:
        task = read_rows(data, model, "depth search")
    except UnsupportedError as exc:  # the depth package's own error type, same line
        raise DepthError(str(exc)) from None
    rows = [(int(ex.label), ex.text) for ex in task.examples]
    pairs = [ex.text_pair for ex in task.examples] if task.pair else []
    return rows, pairs


def check_served(checkpoint: str | Path | None) -> str:
    """The checkpoint's head (config.json, no torch), or one line naming the heads the
    depth search serves."""
    from albert_edge.depth.task_heads import SERVED, served_line
    from albert_edge.depth.task_search import head_of

    head = head_of(checkpoint)
    if head not in SERVED:
        raise DepthError(served_line(checkpoint, head))
    return head


def count_rows(data: Path, checkpoint: str | Path | None) -> int:
    """The labelled examples of ``data`` a search splits (sentences, sentence pairs,
    CoNLL sentences, SQuAD questions), read and checked against the checkpoint's head
    before any model loads."""
    from albert_edge.depth.task_heads import TASK_HEADS
    from albert_edge.depth.task_search import task_data

    if check_served(checkpoint) in TASK_HEADS:
        assert checkpoint is not None  # the embedded model is a classifier
        return len(task_data(data, checkpoint).examples)
    return len(labelled_rows(data, checkpoint)[0])


def _labels(rows: list[tuple[int, str]], num_labels: int, where: Path) -> torch.Tensor:
    import torch

    bad = sorted({y for y, _ in rows if not 0 <= y < num_labels})
    if bad:
        raise DepthError(
            f"{where}: labels {bad[:5]} are outside the model's {num_labels} classes; "
            "use the data the classifier was trained for"
        )
    return torch.tensor([y for y, _ in rows], dtype=torch.long)


def search_depths(
    checkpoint: str | Path | Checkpoint | None,
    data: str | Path,
    *,
    split: SplitSettings | None = None,
    fit: FitSettings | None = None,
    report: str | Path | None = None,
) -> DepthSearch:
    """Fit an exit head per representable depth and score each on held-out rows.

    Each head starts from the checkpoint's trained exit head for that depth when it has
    them (:func:`trained_exit_heads`), else from the model's own head; ``fit.epochs = 0``
    keeps the starting heads as they are (scored, not fitted).

    ``data``: a labelled task file (the FIT and HELD-OUT splits are drawn from it): a
    GLUE-style .tsv for a sequence classifier (single sentences or pairs), a CoNLL file
    for a token head, a SQuAD .json for a span head
    (:mod:`albert_edge.depth.task_search`: scored in entity F1 / SQuAD F1).
    ``report``: optional labelled file of the same task scored for the record only.
    """
    from albert_edge.checkpoint import Checkpoint, load_checkpoint
    from albert_edge.layout import source_record
    from albert_edge.sealed import made_from

    split, fit = split or SplitSettings(), fit or FitSettings()
    data = Path(data)
    where = checkpoint.path if isinstance(checkpoint, Checkpoint) else checkpoint
    from albert_edge.depth.task_heads import TASK_HEADS

    if check_served(where) in TASK_HEADS:
        from albert_edge.depth.task_search import search_task_depths

        assert checkpoint is not None  # the embedded model is a classifier
        rep = Path(report) if report is not None else None
        return search_task_depths(checkpoint, data, split=split, fit=fit, report=rep)
    # a bad file, a head the search does not serve: refused here, before the model loads
    rows, pairs = labelled_rows(data, where)
    note = split_sizes(len(rows), split)[2]  # too few rows: refused before the model loads
    if report is not None:
        labelled_rows(Path(report), where)  # likewise a bad report file
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
    trained = trained_exit_heads(ckpt)  # a changed exit-heads file fails before the work
    origin = made_from(ckpt.path, {"data": data, "report": report})
    fit_idx, held_idx = split_rows(len(rows), split)
    c = ckpt.config
    labels = _labels(rows, int(c.num_labels), data)
    order = fit_idx + held_idx
    feats = cls_states(
        ckpt,
        [rows[i][1] for i in order],
        pairs=[pairs[i] for i in order] if pairs else None,
        max_length=split.max_length,
    )
    nf = len(fit_idx)
    y_fit, y_held = labels[fit_idx], labels[held_idx]
    shape = (int(c.num_hidden_layers), int(c.num_hidden_groups))
    depths = representable_depths(*shape, int(c.inner_group_num))
    init = trained or {k: own_head(ckpt) for k in depths}
    heads = {k: fit_head(init[k], feats[:nf, k - 1], y_fit, fit, depth=k) for k in depths}
    ref_correct = (predictions(own_head(ckpt), feats[nf:, -1]) == y_held).numpy()
    scores = []
    for head_kind in ("refit", "own"):
        for k in depths:
            head = heads[k] if head_kind == "refit" else own_head(ckpt)
            correct = (predictions(head, feats[nf:, k - 1]) == y_held).numpy()
            iv = paired_bootstrap(correct, ref_correct, resamples=split.resamples, seed=split.seed)
            fit_acc = float((predictions(head, feats[:nf, k - 1]) == y_fit).float().mean())
            groups = truncated_num_groups(*shape, k, int(c.inner_group_num))
            scores.append(
                DepthScore(
                    depth=k,
                    head=head_kind,
                    groups_kept=int(groups or 0),
                    held_out_accuracy=float(correct.mean()),
                    delta=iv.delta,
                    delta_low=iv.low,
                    delta_high=iv.high,
                    fit_accuracy=fit_acc,
                )
            )
    ref = accuracy_interval(ref_correct, resamples=split.resamples, seed=split.seed)
    result = DepthSearch(
        source=source_record(ckpt),
        config={k: int(getattr(c, k)) for k in _DIMS},
        data={
            "file": data.name,
            "sha256": sha256_file(data),
            "rows": len(rows),
            "fit_rows": nf,
            "held_out_rows": len(held_idx),
            "split_seed": split.seed,
            **({"note": note} if note else {}),
        },
        settings={
            "split": asdict(split),
            "fit": {
                **asdict(fit),
                "init": "trained exit heads (albert-edge train --exit-loss pabee)"
                if trained
                else "the model's own pooler + classifier",
            },
        },
        reference={
            "depth": int(c.num_hidden_layers),
            "head": "own",
            "held_out_accuracy": ref.delta,
            "low": ref.low,
            "high": ref.high,
            "held_out_correct": bits(ref_correct),
        },
        scores=scores,
        representable=depths,
        heads=heads,
        made_from=origin,
    )
    if report is not None:
        add_report(result, ckpt, report)
    return result


def add_report(search: DepthSearch, ckpt: Checkpoint, data: str | Path) -> None:
    """Score every searched head on ``data`` for the record (each ``DepthScore.report``).

    Report only: nothing in :mod:`albert_edge.depth` chooses on these numbers.
    """
    data = Path(data)
    rows, pairs = labelled_rows(data, ckpt.path)
    labels = _labels(rows, int(ckpt.config.num_labels), data)
    s = search.settings["split"]
    feats = cls_states(
        ckpt,
        [t for _, t in rows],
        pairs=pairs or None,
        max_length=int(s["max_length"]),
        description="report",
    )
    ref = (predictions(own_head(ckpt), feats[:, -1]) == labels).numpy()
    ref_iv = accuracy_interval(ref, resamples=int(s["resamples"]), seed=int(s["seed"]))
    search.reference["report"] = {
        "file": data.name,
        "sha256": sha256_file(data),
        "rows": len(rows),
        "accuracy": ref_iv.delta,
        "low": ref_iv.low,
        "high": ref_iv.high,
        "correct": bits(ref),
    }
    for sc in search.scores:
        head = search.heads[sc.depth] if sc.head == "refit" else own_head(ckpt)
        correct = (predictions(head, feats[:, sc.depth - 1]) == labels).numpy()
        iv = paired_bootstrap(correct, ref, resamples=int(s["resamples"]), seed=int(s["seed"]))
        sc.report = {
            "accuracy": float(correct.mean()),
            "delta": iv.delta,
            "low": iv.low,
            "high": iv.high,
        }
