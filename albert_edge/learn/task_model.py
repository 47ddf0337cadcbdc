"""The model a task run trains: built from the task's data, from scratch or from ``--init``.

The head and labels come from the data (:func:`label_config`): AlbertForSequenceClassification
with the file's labels (one regression output for a score), AlbertForTokenClassification with
its tag set, AlbertForQuestionAnswering with start/end. From scratch the config is the small
default (:data:`albert_edge.learn.scratch.DEFAULTS`, ``--config`` on top); from ``--init``
the checkpoint's model is kept where its head and labels are the task's, else its encoder
goes under a new head, and a note says so (:class:`Built`).
"""

from __future__ import annotations

import argparse
import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from albert_edge.learn.errors import LearnError

if TYPE_CHECKING:
    from albert_edge.tasks.types import TaskData


@dataclass
class Built:
    """The model to train and how it came to be."""

    model: Any
    head: str
    notes: list[str] = field(default_factory=list)
    init: Any = None  # the --init Checkpoint, or None
    overrides: dict[str, Any] = field(default_factory=dict)


def label_config(data: TaskData) -> tuple[int, dict[int, str]]:
    """(num_labels, id2label) of the head ``data`` needs."""
    kind = data.kind.value
    if kind == "question-answering":
        return 2, {0: "start", 1: "end"}
    if data.regression:
        return 1, {0: "score"}
    names = list(data.label_names)
    return len(names), dict(enumerate(names))


def _head_for(data: TaskData) -> Any:
    from albert_edge.heads import head_by_name
    from albert_edge.tasks.types import TASK_HEADS

    return head_by_name(TASK_HEADS[data.kind])


def _set_labels(config: Any, data: TaskData, head: Any) -> None:
    n, id2label = label_config(data)
    config.num_labels = n
    config.id2label = id2label
    config.label2id = {v: k for k, v in id2label.items()}
    config.architectures = [head.hf_class]
    from albert_edge.tasks.classification import input_record

    # the input form every command that scores data holds it to (docs/inputs.md); another
    # head's record (an --init classifier's) would claim an input this head never reads
    config.finetuning_task = input_record(data) if data.kind.value == "classification" else None


def build_scratch(args: argparse.Namespace, data: TaskData) -> Built:
    """A fresh model of the default small config (``--config`` on top), head from data."""
    from transformers import AlbertConfig

    from albert_edge.checkpoint import build_model
    from albert_edge.learn.scratch import DEFAULTS, config_overrides

    overrides = config_overrides(args)
    head = _head_for(data)
    config = AlbertConfig(**{**DEFAULTS, **overrides})
    _set_labels(config, data, head)
    return Built(build_model(config, head), head.name, overrides=overrides)


def build_from_init(ckpt: Any, data: TaskData) -> Built:
    """The init's model when its head and labels are the task's; else the init's encoder
    under a new head for the task (the notes say which and why)."""
    from albert_edge.checkpoint import build_model

    head = _head_for(data)
    n, id2label = label_config(data)
    have = [str(v) for _, v in sorted((getattr(ckpt.config, "id2label", None) or {}).items())]
    want = [id2label[i] for i in range(n)]
    same_labels = head.name == "question-answering" or have == want
    if ckpt.head.name == head.name and int(ckpt.config.num_labels) == n and same_labels:
        model = copy.deepcopy(ckpt.model)
        _set_labels(model.config, data, head)
        return Built(model, head.name, init=ckpt)
    config = copy.deepcopy(ckpt.config)
    _set_labels(config, data, head)
    model = build_model(config, head)
    src = ckpt.model.albert if hasattr(ckpt.model, "albert") else ckpt.model
    missing, unexpected = model.albert.load_state_dict(src.state_dict(), strict=False)
    stray = [k for k in [*missing, *unexpected] if not k.startswith("pooler.")]
    if stray:
        raise LearnError(
            f"--init {ckpt.path}: its encoder does not fit a {head.hf_class} "
            f"({', '.join(stray[:3])}); pass an ALBERT checkpoint"
        )
    what = f"{ckpt.head.name} ({ckpt.config.num_labels} labels: {', '.join(have[:6])})"
    note = (
        f"head rebuilt: the checkpoint's head is {what}, the task needs {head.name} "
        f"({n} labels: {', '.join(want[:9])}); the encoder is the checkpoint's, the new "
        "head starts from random weights"
    )
    if "pooler.dense.weight" in missing:
        note += "; the pooler, which the checkpoint lacks, too"
    return Built(model, head.name, notes=[note], init=ckpt)
