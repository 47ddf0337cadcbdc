"""The held-out check of a trimmed (or healed) checkpoint, in the task's own metric.

A trimmed model reads unseen text in other pieces than its source did, so the question a
user asks is not "how many tokens kept" but "what did it cost in MY metric": accuracy (and
GLUE's F1 / Matthews) for a classifier, entity F1 for a CoNLL tagger, SQuAD F1 for a span
head. The untrimmed model (its own tokenizer) and the trimmed one (the trimmed tokenizer)
are scored on the same held-out examples by the task layer
(:func:`albert_edge.tasks.score`), and the difference gets the project's paired bootstrap
interval (:func:`albert_edge.tasks.paired_metric_interval`). ``--max-drop P`` is a budget
in that metric's points on the point estimate, the rule every ``--max-drop`` in
albert-edge applies (:class:`albert_edge.depth.choose.Rule`'s point loss).

The file is judged against the model's config.json before any model loads
(:func:`scored_data`): a SQuAD file for a classifier, tags the tagger lacks, a pair file for
a single-sentence model are refused in one line naming the file and the format.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import AlbertEdgeError

if TYPE_CHECKING:
    from albert_edge.checkpoint import Checkpoint
    from albert_edge.tasks import Metrics, TaskData


class DropError(AlbertEdgeError):
    """The trimmed model lost more than ``--max-drop`` points on the held-out rows."""


def checkpoint_path(checkpoint: str | Path | None) -> Path:
    """The directory a checkpoint argument names (``None``: the embedded model)."""
    from albert_edge.layout import DEFAULT_MODEL

    return Path(checkpoint) if checkpoint is not None else Path(DEFAULT_MODEL)


def scored_data(
    file: str | Path, checkpoint: str | Path | None, *, flag: str, required: bool
) -> tuple[TaskData | None, str]:
    """(task data the check scores, why none) for ``file`` against the model's head and
    labels, read before the model loads.

    ``required`` (``--held-out`` named the file): a task file the head cannot be scored on
    is refused in one line. Otherwise (the corpus's own held-out rows) it is simply not
    scored, and the reason says why. Plain text is never scored (it has no labels)."""
    from albert_edge.tasks import DataError, detect_task, model_config, read_task_data

    path = checkpoint_path(checkpoint)
    if detect_task(file) is None:
        return None, f"{Path(file).name} is plain text (no labels to score)"
    config = model_config(path)
    if config is None:
        return None, f"{path} has no config.json to judge the rows against"
    try:
        return read_task_data(file, path, config), ""
    except (DataError, AlbertEdgeError) as exc:
        if required:
            raise type(exc)(f"{flag} {exc}") from None
        return None, str(exc)


def max_len_of(ckpt: Checkpoint) -> int:
    """The length examples are encoded at: the checkpoint's fine-tuned length where its
    tokenizer_config.json records one, else its positions (as ``verify --data``)."""
    from albert_edge.torch_model import trained_length

    return trained_length(ckpt) or int(ckpt.config.max_position_embeddings)


def score_checkpoint(ckpt: Checkpoint, data: TaskData, max_len: int) -> Metrics:
    """The task's metrics of ``ckpt`` (PyTorch, its own tokenizer) on ``data``."""
    import torch

    import albert_edge.tasks as tasks
    from albert_edge.heads import head_by_name

    names = head_by_name(ckpt.head.name).outputs
    model = ckpt.model.eval()

    def run(feeds: dict[str, Any]) -> dict[str, Any]:
        with torch.no_grad():
            out = model(**{k: torch.from_numpy(v) for k, v in feeds.items()})
        return {n: getattr(out, n).float().numpy() for n in names}

    feats = tasks.encode(data, ckpt.tokenizer(), max_len)
    return tasks.score(data, feats, tasks.run_features(feats, run, batch_size=64))


def compare(
    trimmed: Checkpoint,
    reference: Checkpoint,
    data: TaskData,
    *,
    reference_metrics: Metrics | None = None,
) -> dict[str, Any]:
    """The trimmed model against the untrimmed one on ``data``: both metrics, their
    difference (fractions: 0.01 = 1 point) and its paired 95 % interval (None below
    :data:`albert_edge.tasks.stats.MIN_BOOTSTRAP_ROWS` examples)."""
    from albert_edge.tasks import paired_metric_interval
    from albert_edge.tasks.stats import MIN_BOOTSTRAP_ROWS

    max_len = max_len_of(reference)
    ref = reference_metrics or score_checkpoint(reference, data, max_len)
    new = score_checkpoint(trimmed, data, max_len)
    record: dict[str, Any] = {
        "file": Path(data.path).name,
        "task": data.kind.value,
        "metric": ref.primary,
        "examples": ref.examples,
        "max_len": max_len,
        "untrimmed": ref.value,
        "trimmed": new.value,
        "delta": new.value - ref.value,
        "low": None,
        "high": None,
    }
    if ref.examples >= MIN_BOOTSTRAP_ROWS:
        iv = paired_metric_interval(new, ref)
        record.update(
            delta=iv.delta,
            low=iv.low,
            high=iv.high,
            interval="paired bootstrap 95 % (albert_edge.tasks.paired_metric_interval)",
        )
    return record


def check_drop(record: dict[str, Any], max_drop: float | None, what: str) -> None:
    """Refuse (one line) a point loss over ``max_drop`` metric points."""
    if max_drop is None:
        return
    loss = -100.0 * float(record["delta"])
    if loss > max_drop + 1e-9:
        raise DropError(
            f"{what} loses {loss:.2f} {record['metric']} points on {record['examples']} "
            f"held-out examples of {record['file']} (untrimmed {100 * record['untrimmed']:.2f}, "
            f"trimmed {100 * record['trimmed']:.2f}), over --max-drop {max_drop}; keep more "
            "pieces (--keep / --coverage), heal (--heal) or raise --max-drop; nothing written"
        )


def describe(record: dict[str, Any]) -> str:
    """One line: the metric of both models and the difference with its interval."""
    iv = ""
    if record.get("low") is not None:
        iv = f" [{100 * record['low']:+.2f}, {100 * record['high']:+.2f}]"
    return (
        f"held-out {record['metric']} ({record['examples']} examples of {record['file']}): "
        f"untrimmed {100 * record['untrimmed']:.2f}, trimmed {100 * record['trimmed']:.2f}, "
        f"{100 * record['delta']:+.2f} points{iv}"
    )
