"""Scoring a (masked, pruned or healed) model in the task's metric, against the unpruned.

One runner for every head: the task layer encodes the rows once
(:func:`albert_edge.tasks.encode`), runs them in length-sorted batches and scores them
(:func:`albert_edge.tasks.score`: accuracy, GLUE F1 / Matthews, entity F1, SQuAD F1); the
difference to the unpruned model gets the project's paired bootstrap interval
(:func:`albert_edge.tasks.paired_metric_interval`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from albert_edge.tasks import Features, Metrics, TaskData


def runner(model: Any, head: str, masks: Mapping[str, Mapping[int, Any]] | None = None) -> Any:
    """``feeds -> {output: array}`` over ``model`` in eval mode, gated by ``masks``."""
    import torch

    from albert_edge.heads import head_by_name
    from albert_edge.prune.gates import Gates

    names = head_by_name(head).outputs

    def run(feeds: dict[str, Any]) -> dict[str, Any]:
        model.eval()
        with torch.no_grad(), Gates(model, masks):
            out = model(**{k: torch.from_numpy(v) for k, v in feeds.items()})
        return {n: getattr(out, n).float().numpy() for n in names}

    return run


def metrics(
    model: Any,
    head: str,
    data: TaskData,
    features: Features,
    masks: Mapping[str, Mapping[int, Any]] | None = None,
) -> Metrics:
    """The task's metrics of ``model`` (gated by ``masks``) on ``data``."""
    import albert_edge.tasks as tasks

    outputs = tasks.run_features(features, runner(model, head, masks), batch_size=64)
    return tasks.score(data, features, outputs)


def versus(new: Metrics, ref: Metrics) -> dict[str, Any]:
    """``new`` against the unpruned ``ref`` on the same rows: both values, the difference
    (fractions: 0.01 = 1 point) and its paired 95 % interval (None under 30 rows)."""
    from albert_edge.tasks import paired_metric_interval
    from albert_edge.tasks.stats import MIN_BOOTSTRAP_ROWS

    record: dict[str, Any] = {
        "metric": ref.primary,
        "examples": ref.examples,
        "unpruned": ref.value,
        "pruned": new.value,
        "delta": new.value - ref.value,
        "delta_low": None,
        "delta_high": None,
    }
    if ref.examples >= MIN_BOOTSTRAP_ROWS:
        iv = paired_metric_interval(new, ref)
        record.update(delta=iv.delta, delta_low=iv.low, delta_high=iv.high)
    return record


def describe(record: Mapping[str, Any]) -> str:
    """One line: the metric of both models and the difference with its interval."""
    iv = ""
    if record.get("delta_low") is not None:
        iv = f" [{100 * record['delta_low']:+.2f}, {100 * record['delta_high']:+.2f}]"
    return (
        f"{record['metric']} on {record['examples']} rows: unpruned "
        f"{100 * record['unpruned']:.2f}, pruned {100 * record['pruned']:.2f}, "
        f"{100 * record['delta']:+.2f} points{iv}"
    )
