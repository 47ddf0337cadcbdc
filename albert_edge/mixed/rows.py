"""The held-out examples a precision search scores its candidates on, for any task.

``--data`` is read as ``verify --data`` reads it (:func:`albert_edge.tasks.read_task_data`:
the task layer's reader, checked against the model's head, labels and tags before the
model loads), so a GLUE pair file is fed as pairs, a CoNLL file as tagged sentences and a
SQuAD file as question + context windows with verify's stride. ``--search-rows`` examples
(sentences, sentence pairs, questions) are drawn with the search's seed; each candidate's
outputs are scored with the task's own metric (accuracy, entity F1, SQuAD F1, ...) and
compared with the fp32 graph's on the same examples by the task layer's paired bootstrap
(:func:`albert_edge.tasks.paired_metric_interval`), so ``--max-drop`` is in that
metric's points.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import PrecisionPlanError

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.mixed.search import Settings
    from albert_edge.mixed.setup import Outcome, Setup
    from albert_edge.tasks import Features, Metrics, TaskData
    from albert_edge.tokenizer import AlbertTokenizer

# The metric each task's budget is counted in when the file alone is read (before the
# model's outputs say more, e.g. Matthews for CoLA): for messages only.
_UNIT = {
    "classification": "accuracy",
    "token-classification": "entity F1",
    "question-answering": "F1",
    "multiple-choice": "accuracy",
    "masked-lm": "masked-token accuracy",
}


def model_config(checkpoint: str | Path | Checkpoint | None) -> tuple[Path, dict[str, Any] | None]:
    """(the checkpoint's path, its config.json as verify reads it): from the file without
    loading the model, or from a loaded checkpoint; the config is None where there is no
    file to read (a TF1 checkpoint: judged once loaded)."""
    from albert_edge import tasks
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.torch_model import Checkpoint

    if isinstance(checkpoint, Checkpoint):
        return Path(checkpoint.path), tasks.checkpoint_config(checkpoint)
    path = Path(checkpoint) if checkpoint is not None else DEFAULT_MODEL
    return path, tasks.model_config(path)


def read_examples(data: str | Path, checkpoint: str | Path | Checkpoint | None) -> TaskData:
    """Every example of ``data``, read and checked against the model as ``verify --data``
    reads it; without a config.json to check against, the file as its content says."""
    from albert_edge.tasks import read_task_data

    path, config = model_config(checkpoint)
    if config is None:
        from albert_edge.tasks import read_task_file

        return read_task_file(data)
    return read_task_data(data, path, config)


def unit(data: TaskData) -> str:
    """The metric a budget on ``data`` is counted in, for messages."""
    return _UNIT.get(data.kind.value, "metric")


def held_out(
    data: str | Path, settings: Settings, checkpoint: str | Path | Checkpoint | None
) -> TaskData:
    """``settings.rows`` examples of ``data`` drawn with ``settings.seed`` (all of them
    when fewer), in file order; refused when fewer than
    :func:`~albert_edge.mixed.search.min_rows` for the budget, and (before the model
    loads) when the file does not fit the model's head, labels or tags."""
    import numpy as np

    from albert_edge.mixed.search import min_rows

    read = read_examples(data, checkpoint)
    n = len(read.examples)
    need = min_rows(settings.max_drop)
    what = unit(read)
    if n < need:
        raise PrecisionPlanError(
            f"{data}: {n} labelled rows are too few to judge a {settings.max_drop}-point "
            f"budget (one would move the {what} by up to {100 / max(1, n):.2f} points); give "
            f"at least {need} rows"
        )
    if settings.rows < need:
        raise PrecisionPlanError(
            f"--search-rows {settings.rows} is too few to judge a {settings.max_drop}-point "
            f"budget; draw at least {need} rows"
        )
    pick = np.random.default_rng(settings.seed).permutation(n)[: settings.rows]
    return read.subset(sorted(int(i) for i in pick.tolist()))


def max_length(ckpt: Checkpoint, target: str, seq_lens: tuple[int, ...] = ()) -> int:
    """The longest sequence the examples are encoded to: what verify encodes them to on
    the artifact (ONNX: the model's positions; TFLite: its longest signature; either way
    no longer than the length the checkpoint was fine-tuned at,
    :func:`albert_edge.torch_model.trained_length`)."""
    from albert_edge.torch_model import trained_length

    positions = int(ckpt.config.max_position_embeddings)
    limit = min(max(seq_lens), positions) if target == "tflite" and seq_lens else positions
    return min(limit, trained_length(ckpt) or limit)


@dataclass
class TaskScorer:
    """Scores a candidate's outputs on the held-out examples with the task's metric.

    The first outputs scored (:meth:`reference`) are the fp32 graph's: SQuAD v2.0's null
    threshold is chosen on them for the even-numbered questions and every candidate,
    the reference included, is scored with it on the odd ones, as verify does."""

    data: TaskData
    features: Features
    options: dict[str, Any] = field(default_factory=dict)

    def reference(self, out: Outcome) -> Metrics:
        from albert_edge.tasks import score_options

        self.options = score_options(self.data, self.features, out.outputs)
        return self(out)

    def __call__(self, out: Outcome) -> Metrics:
        from albert_edge.tasks import score

        return score(self.data, self.features, out.outputs, **self.options)

    def record(self, metric: str, examples: int) -> dict[str, Any]:
        """The plan's record of what the budget was measured on (``metric``: the task's
        primary metric; ``examples``: how many it was scored on)."""
        d = self.data
        rec: dict[str, Any] = {
            "kind": d.kind.value,
            "format": d.format,
            "metric": metric,
            "examples": examples,
            "features": len(self.features),
        }
        if d.kind.value == "classification":
            rec["pair"] = d.pair
            if d.pair:
                rec["columns"] = list(d.columns)
            if d.glue_task:
                rec["glue_task"] = d.glue_task
        if "null_threshold" in self.options:
            rec["null_threshold"] = self.options["null_threshold"]
            rec["null_threshold_chosen_on"] = "even-numbered questions (fp32 graph's outputs)"
        return rec


def encode_held_out(
    data: TaskData, tokenizer: AlbertTokenizer, max_len: int
) -> tuple[Features, tuple[dict[str, Any], ...]]:
    """The features of ``data`` and one feed per feature (batch 1 at its own length, the
    token type ids as the task encodes them: a pair's second sentence, a question's
    context)."""
    from albert_edge.tasks import encode

    feats = encode(data, tokenizer, max_len)
    return feats, tuple(feats.feeds([f]) for f in range(len(feats)))


def collect(setup: Setup, run: Any) -> dict[str, list[np.ndarray]]:
    """``run`` (feeds -> the head's outputs, in ``setup.outputs`` order or by name) over
    every feed: one array per feature per output, per-token outputs cut to the feed's
    length."""
    out: dict[str, list[np.ndarray]] = {n: [] for n in setup.outputs}
    for feeds in setup.feeds:
        got = run(feeds)
        values = [got[n] for n in setup.outputs] if isinstance(got, dict) else list(got)
        seq = int(feeds["input_ids"].shape[-1])
        for n, v in zip(setup.outputs, values, strict=True):
            out[n].append(v[0][:seq] if setup.per_token else v[0])
    return out
