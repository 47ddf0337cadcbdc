"""The task layer: what a model's data is, how it becomes model inputs, and how the
model's outputs are scored.

One package for every task an ALBERT head solves, so that every command that reads data
(``verify --data``, ``train``) reads it the same way::

    data = read_task_file(path, label2id=config.label2id, num_labels=config.num_labels)
    check_fits(data, head="sequence-classification", num_labels=2)  # before the model loads
    features = encode(data, tokenizer, max_len=128)
    outputs = run_features(features, model_fn)  # feeds -> {"logits": ...}, per feature
    metrics = score(data, features, outputs)  # metrics.values, metrics.primary

The file is recognised by its content and header (:func:`detect_task`): GLUE .tsv
(single sentences or pairs), CoNLL-2003, SQuAD v1.1/v2.0 JSON, SWAG .csv, RACE JSON; plain
text only as masked-LM data when asked for (``task="masked-lm"``), since any text file
would otherwise pass. Bad data is one :class:`DataError` line naming the file.

Each task is one :class:`Task` (``task_for(kind)``), registered once in :data:`TASKS`
(:mod:`albert_edge.tasks.registry`): detecting, reading, encoding, scoring and describing
dispatch through it, never through a chain of ``if kind is ...``.

"This file, for this model" is :func:`read_task_data`: the file read and checked against
a checkpoint's head, labels and tags from its config.json (:func:`model_config`, no
torch), so every lever that takes ``--data`` refuses a wrong file in one line before any
model loads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import UnsupportedError
from albert_edge.tasks.files import DataError, read_text
from albert_edge.tasks.registry import TASKS  # the registry, filled once on import
from albert_edge.tasks.stats import (
    Interval,
    metric_interval,
    paired_bootstrap,
    paired_metric_interval,
)
from albert_edge.tasks.types import (
    EXPECTED_FORMAT,
    HEAD_TASKS,
    TASK_HEADS,
    ChoiceExample,
    ClassificationExample,
    Features,
    Metrics,
    QAExample,
    Sniff,
    Task,
    TaskData,
    TaskKind,
    TextExample,
    TokenExample,
    run_features,
    task_for,
    task_kind,
)

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.tokenizer import AlbertTokenizer

__all__ = [
    "EXPECTED_FORMAT",
    "HEAD_TASKS",
    "TASKS",
    "TASK_HEADS",
    "ChoiceExample",
    "ClassificationExample",
    "DataError",
    "Features",
    "Interval",
    "Metrics",
    "QAExample",
    "Task",
    "TaskData",
    "TaskKind",
    "TextExample",
    "TokenExample",
    "check_fits",
    "checkpoint_config",
    "detect_task",
    "encode",
    "metric_interval",
    "model_config",
    "paired_bootstrap",
    "paired_metric_interval",
    "precheck_file",
    "read_task_data",
    "read_task_file",
    "run_features",
    "score",
    "score_options",
    "task_for",
    "task_kind",
]


def detect_task(path: str | Path, text: str | None = None) -> TaskKind | None:
    """The task a file's content and header identify, None for text no reader claims
    (which is masked-LM data only when asked for). Each registered :class:`Task` is asked
    in turn (:mod:`albert_edge.tasks.registry` says the order)."""
    from albert_edge.tasks.choice import parse_json_or_lines

    p = Path(path)
    text = read_text(p) if text is None else text
    head = text.lstrip()[:1]
    is_json = bool(head) and head in "{["
    sniff = Sniff(
        path=p,
        text=text,
        json=is_json,
        obj=parse_json_or_lines(p, text) if is_json else None,
        lines=() if is_json else text.splitlines(),
    )
    for task in TASKS.values():
        if task.looks(sniff):
            return task.kind
    return None


def read_task_file(
    path: str | Path,
    task: TaskKind | str | None = None,
    *,
    label2id: Mapping[str, int] | None = None,
    num_labels: int | None = None,
    head: str | None = None,
    finetuning_task: str | None = None,
    model: str | Path | None = None,
) -> TaskData:
    """Read ``path`` as the task its content identifies (``task`` where the file cannot
    tell, or to insist: a file of another task is refused naming both).

    ``label2id``/``num_labels``: the model's (config.json); class and tag names are mapped
    through them and anything the model lacks is refused with its line. Without them,
    labels get the conventional order (GLUE's, CoNLL-2003's, else sorted). ``head`` (and
    ``model``, its name in messages): the model's head, so a file of another task is named
    as what it is (a CoNLL file for a classifier) before its labels are judged against
    labels it was never meant for. ``finetuning_task``: the model's record of its input
    (config.json), so a pair file for a single-sentence model (or the reverse) is refused
    from its header, before its labels are.
    """
    p = Path(path)
    text = read_text(p)
    want = task_kind(task) if task is not None else None
    found = detect_task(p, text)
    labels: dict[str, Any] = {
        "label2id": label2id,
        "num_labels": num_labels,
        "finetuning_task": finetuning_task,
    }
    if found is None:
        if want is not None and not task_for(want).detectable:  # plain text, as asked
            return task_for(want).read(p, text)
        if want is TaskKind.CLASSIFICATION or (want is None and _tabular(text)):
            # the header is wrong: the classification reader says what it found
            return task_for(TaskKind.CLASSIFICATION).read(p, text, **labels)
        if want is not None:
            raise DataError(f"{p}: not {EXPECTED_FORMAT[want]}")
        raise DataError(
            f"{p}: not a task file albert-edge recognises; expected "
            + "; or ".join(t.expected for t in TASKS.values() if t.detectable)
            + " (plain text is read as masked-LM data with --task masked-lm)"
        )
    if head is not None and HEAD_TASKS.get(head) not in (None, found):
        _refuse_kind(p, found, head, model)
    if want is not None and found is not want:
        raise DataError(
            f"{p}: this is {found.value} data ({task_for(found).name}), but the task is "
            f"{want.value}: expected {EXPECTED_FORMAT[want]}"
        )
    return task_for(found).read(p, text, **labels)


def _refuse_kind(path: Path, found: TaskKind, head: str, model: str | Path | None) -> None:
    """One line: ``path`` is ``found`` data, which a ``head`` model cannot score."""
    who = f"{model} is" if model is not None else "the model is"
    need = HEAD_TASKS[head]
    raise DataError(
        f"{path}: {found.value} data ({task_for(found).name}), but {who} a {head} "
        f"model; it needs {EXPECTED_FORMAT[need]}"
    )


def _tabular(text: str) -> bool:
    first = text.splitlines()[0].lower()
    return "\t" in first or "label" in first


def check_fits(
    data: TaskData,
    head: str,
    *,
    num_labels: int | None = None,
    finetuning_task: str | None = None,
    model: str | Path | None = None,
) -> None:
    """Refuse data the model's head cannot be scored on, in one line naming the file and
    the format the head needs: a SQuAD file for a classifier, a pair file for a model
    fine-tuned on single sentences (config.json ``finetuning_task``), and so on."""
    need = HEAD_TASKS.get(head)
    who = f"{model} is" if model is not None else "the model is"
    if need is None:
        raise DataError(
            f"{data.path}: {who} a {head} model, which has no task head to score; "
            "drop --data or pass a checkpoint with a task head"
        )
    if need is not data.kind:
        _refuse_kind(data.path, data.kind, head, model)
    task_for(need).check_fits(data, num_labels, finetuning_task)


def encode(
    data: TaskData,
    tokenizer: AlbertTokenizer,
    max_len: int,
    stride: int | None = None,
) -> Features:
    """The model inputs of ``data`` (see :class:`Features`). ``stride``: SQuAD's window
    overlap in tokens (default 128, at most half a window); other tasks ignore it."""
    return task_for(data.kind).encode(data, tokenizer, max_len, stride)


def score(
    data: TaskData,
    features: Features,
    outputs: Mapping[str, Sequence[np.ndarray]],
    **options: Any,
) -> Metrics:
    """The task's metrics from a model's outputs (one array per feature, as
    :func:`run_features` returns them). ``options``: SQuAD's ``null_threshold``,
    ``eval_on``, ``n_best``, ``max_answer_length``."""
    return task_for(data.kind).score(data, features, outputs, **options)


def score_options(
    data: TaskData, features: Features, reference: Mapping[str, Sequence[np.ndarray]]
) -> dict[str, Any]:
    """The options :func:`score` takes that are chosen on a reference model's outputs
    (SQuAD v2.0: the null threshold, chosen on the even-numbered questions, every model
    then scored on the odd ones, as ``verify`` does); ``{}`` for every other task. Score
    the reference and each candidate with the same options."""
    return task_for(data.kind).score_options(data, features, reference)


def precheck_file(path: str | Path, task: TaskKind | str | None = None) -> None:
    """Read ``path`` as a task file now, without the model, so a missing, binary, UTF-16 or
    mislabelled file is refused in the first second. Plain text is left to the model's
    head to judge (masked-LM data for a masked-LM model): only its text is checked."""
    p = Path(path)
    text = read_text(p)
    if task is None and detect_task(p, text) is None and not _tabular(text):
        return
    read_task_file(p, task)


# --- this file, for this model ------------------------------------------------------


def model_config(ref_path: Path) -> dict[str, Any] | None:
    """The reference's config.json as plain JSON (no torch), or None where the checkpoint
    has none (a TF1 checkpoint: its head is known once it is loaded)."""
    import json

    cfg = Path(ref_path) / "config.json"
    if not cfg.is_file():
        return None
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # load_checkpoint names the problem
    return data if isinstance(data, dict) else None


def read_task_data(
    data: str | Path,
    ref_path: Path,
    config: dict[str, Any],
    *,
    task: str | None = None,
    max_examples: int | None = None,
) -> TaskData:
    """The examples a task metric is measured on, read and checked against the model's
    head, labels and tags (``config``: its config.json) before anything loads, so a wrong
    file or a wrong head fails first, in one line."""
    from albert_edge.heads import head_from_architectures

    head = head_from_architectures(config.get("architectures")).name
    if head not in HEAD_TASKS:
        raise UnsupportedError(
            f"{data}: a task metric needs a model with a task head ("
            + ", ".join(TASK_HEADS.values())
            + f"), but {ref_path} is {head}; drop --data"
        )
    # transformers leaves its default names (2 classes, LABEL_0/LABEL_1) out of config.json
    id2label = config.get("id2label") or {
        str(i): f"LABEL_{i}" for i in range(int(config.get("num_labels") or 2))
    }
    label2id = config.get("label2id") or {v: int(k) for k, v in id2label.items()}
    num_labels = len(id2label)
    # the head's own task decides where the file cannot tell (plain text: masked LM)
    want = task if task is not None else (None if detect_task(data) else HEAD_TASKS[head])
    out = read_task_file(
        data,
        want,
        label2id={str(k): int(v) for k, v in label2id.items()},
        num_labels=num_labels,
        head=head,
        finetuning_task=config.get("finetuning_task"),
        model=ref_path,
    )
    check_fits(
        out,
        head,
        num_labels=num_labels,
        finetuning_task=config.get("finetuning_task"),
        model=ref_path,
    )
    if max_examples is not None:
        out = out.subset(range(min(len(out.examples), max(0, max_examples))))
    return out


def checkpoint_config(ckpt: Any) -> dict[str, Any]:
    """What :func:`read_task_data` reads of a config.json, from a loaded checkpoint
    (:class:`albert_edge.checkpoint.Checkpoint`, taken as ``Any``: the task layer sits
    below the checkpoint): for a reference without a config.json (TF1), judged once it
    is loaded."""
    cfg = ckpt.config
    return {
        "architectures": [ckpt.head.hf_class],
        "id2label": {str(k): v for k, v in (getattr(cfg, "id2label", None) or {}).items()},
        "label2id": dict(getattr(cfg, "label2id", None) or {}),
        "num_labels": int(cfg.num_labels),
        "finetuning_task": getattr(cfg, "finetuning_task", None),
    }
