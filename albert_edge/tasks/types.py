"""The task layer's types: what a task file holds, its model inputs, and its scores.

One set of types for every task, so that ``verify`` and ``train`` drive any task the same
way: read a file into :class:`TaskData`, encode it into :class:`Features` (one or more
model inputs per example, with what post-processing needs to map outputs back to
examples), run a model over the features, and score the outputs into :class:`Metrics`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


class TaskKind(enum.StrEnum):
    """A task: the head that solves it and the metric that scores it."""

    CLASSIFICATION = "classification"  # single sentences or pairs; regression with 1 label
    TOKEN_CLASSIFICATION = "token-classification"  # CoNLL-2003 named entities
    QUESTION_ANSWERING = "question-answering"  # SQuAD v1.1 / v2.0 extractive QA
    MULTIPLE_CHOICE = "multiple-choice"  # SWAG / RACE
    MASKED_LM = "masked-lm"  # masked-token accuracy on plain text


# The ALBERT head (albert_edge.heads names) that each task needs.
TASK_HEADS: dict[TaskKind, str] = {
    TaskKind.CLASSIFICATION: "sequence-classification",
    TaskKind.TOKEN_CLASSIFICATION: "token-classification",
    TaskKind.QUESTION_ANSWERING: "question-answering",
    TaskKind.MULTIPLE_CHOICE: "multiple-choice",
    TaskKind.MASKED_LM: "masked-lm",
}
HEAD_TASKS: dict[str, TaskKind] = {head: kind for kind, head in TASK_HEADS.items()}
HEAD_TASKS["pretraining"] = TaskKind.MASKED_LM  # its prediction_logits are the MLM's

# The file layout each task reads, for "expected ..." messages.
EXPECTED_FORMAT: dict[TaskKind, str] = {
    TaskKind.CLASSIFICATION: (
        "a GLUE-style .tsv with a header: a label column (label, Quality, is_duplicate, "
        "score, gold_label) and 'sentence' or a pair of text columns (sentence1/sentence2, "
        "question/sentence, question1/question2, premise/hypothesis, #1 String/#2 String)"
    ),
    TaskKind.TOKEN_CLASSIFICATION: (
        "a CoNLL-2003 file: one 'WORD POS CHUNK NER' (or 'WORD NER') line per token, a "
        "blank line between sentences"
    ),
    TaskKind.QUESTION_ANSWERING: "a SQuAD v1.1 or v2.0 .json (data -> paragraphs -> qas)",
    TaskKind.MULTIPLE_CHOICE: (
        "a SWAG .csv (sent1, sent2, ending0..3, label) or a RACE .json/.jsonl "
        "(article, questions, options, answers)"
    ),
    TaskKind.MASKED_LM: "a plain text file, one text per line",
}


def task_kind(name: str | TaskKind) -> TaskKind:
    """A :class:`TaskKind` from its value or a head name (``--task`` accepts either)."""
    from albert_edge.tasks.files import DataError

    if isinstance(name, TaskKind):
        return name
    if name in HEAD_TASKS:
        return HEAD_TASKS[name]
    try:
        return TaskKind(name)
    except ValueError:
        choices = ", ".join(k.value for k in TaskKind)
        raise DataError(f"--task: unknown task {name!r}; choose one of: {choices}") from None


@dataclass(frozen=True)
class ClassificationExample:
    """One labelled row: ``text`` alone, or ``text`` and ``text_pair``; ``label`` is a class
    id (a float for a regression task); ``line`` its 1-based line in the file."""

    text: str
    text_pair: str | None
    label: float
    line: int


@dataclass(frozen=True)
class TokenExample:
    """One sentence: its words and their tags (IOB2, converted from IOB1 where the file
    was IOB1), ``line`` the line of its first word."""

    words: tuple[str, ...]
    tags: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class QAExample:
    """One SQuAD question. ``answers``: (text, character offset) pairs into ``context``;
    empty for a v2.0 unanswerable question. ``words``/``word_starts``: the context split
    on whitespace, as SQuAD's reference implementation splits it, with each word's offset."""

    id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]
    is_impossible: bool
    words: tuple[str, ...]
    word_starts: tuple[int, ...]

    def word_span_text(self, first: int, last: int) -> str:
        """The context from word ``first`` to the end of word ``last``."""
        start = self.word_starts[first]
        end = self.word_starts[last] + len(self.words[last])
        return self.context[start:end]


@dataclass(frozen=True)
class ChoiceExample:
    """One multiple-choice question: ``context`` and ``question`` (which may be empty)
    followed by each of ``choices``; ``label`` the index of the right one."""

    context: str
    question: str
    choices: tuple[str, ...]
    label: int
    line: int


@dataclass(frozen=True)
class TextExample:
    """One line of plain text (masked LM)."""

    text: str
    line: int


@dataclass
class TaskData:
    """A task file read and checked: its examples and what scoring them needs.

    ``format`` names the layout that was recognised (``glue-tsv``, ``cola-tsv``,
    ``conll``, ``squad-v1.1``, ``squad-v2.0``, ``swag-csv``, ``race-json``, ``text``);
    ``label_names`` are the class (or tag) names in id order, empty where there are none;
    ``glue_task`` the GLUE task the columns identify where that decides the metric
    (``mrpc``/``qqp``: F1 besides accuracy, ``cola``: Matthews, ``stsb``: correlations).
    """

    kind: TaskKind
    path: Path
    format: str
    examples: list[Any]
    label_names: tuple[str, ...] = ()
    glue_task: str | None = None
    pair: bool = False
    regression: bool = False
    columns: tuple[str, ...] = ()
    scheme: str = ""  # token classification: the tag scheme of the file, IOB1 or IOB2

    @property
    def label2id(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.label_names)}

    def describe(self) -> str:
        """One phrase: what was read (for reports and messages)."""
        return task_for(self.kind).describe(self)

    def subset(self, indices: Sequence[int]) -> TaskData:
        """The same data restricted to ``indices`` (in that order)."""
        import dataclasses

        return dataclasses.replace(self, examples=[self.examples[i] for i in indices])


@dataclass
class Features:
    """Model inputs for a :class:`TaskData`, one or more per example.

    Feature ``f`` covers example ``example_index[f]`` and holds ``rows`` sequences
    (``choices`` for multiple choice, else 1) at ``input_ids[f * rows : (f + 1) * rows]``.
    ``labels[f]`` is the training target: a class id or float (classification), one id
    per token with -100 where no loss applies (token classification, masked LM), a
    ``(start, end)`` token pair (QA; (0, 0), the [CLS] position, where the answer is not
    in the window), or the right choice (multiple choice). ``word_ids[f]``: per token, the
    word of the example it starts (token classification) or lies in (QA context), else -1.
    ``max_context[f]``: per token, whether this window is the one where the token has
    the most context on both sides (QA; a token in several windows is scored once).
    """

    kind: TaskKind
    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    example_index: list[int]
    labels: list[Any]
    pad_id: int = 0
    rows: int = 1
    word_ids: list[list[int]] = field(default_factory=list)
    max_context: list[list[bool]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.example_index)

    def length(self, f: int) -> int:
        """The longest sequence of feature ``f``."""
        r = self.rows
        return max(len(s) for s in self.input_ids[f * r : (f + 1) * r])

    def feeds(self, indices: Sequence[int]) -> dict[str, np.ndarray]:
        """``input_ids``/``attention_mask``/``token_type_ids`` of ``indices``, right-padded to
        the longest of them: [batch, seq], or [batch, choices, seq] for multiple choice."""
        import numpy as np

        r = self.rows
        seqs = [f * r + c for f in indices for c in range(r)]
        width = max(len(self.input_ids[s]) for s in seqs)
        ids = np.full((len(seqs), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(seqs), width), dtype=np.int64)
        types = np.zeros((len(seqs), width), dtype=np.int64)
        for row, s in enumerate(seqs):
            n = len(self.input_ids[s])
            ids[row, :n] = self.input_ids[s]
            mask[row, :n] = 1
            types[row, :n] = self.token_type_ids[s]
        shape = (
            (len(indices), r, width)
            if r > 1 or task_for(self.kind).choices
            else (
                len(indices),
                width,
            )
        )
        return {
            "input_ids": ids.reshape(shape),
            "attention_mask": mask.reshape(shape),
            "token_type_ids": types.reshape(shape),
        }

    def batches(self, batch_size: int = 32) -> Iterator[list[int]]:
        """Feature indices in batches of similar length (sorted by length, stable), so each
        batch pads little: the same outputs as one at a time, in a fraction of the time."""
        order = sorted(range(len(self)), key=self.length)
        for start in range(0, len(order), batch_size):
            yield order[start : start + batch_size]

    def per_token(self) -> bool:
        """Whether this task's outputs have a sequence axis (sliced back per feature)."""
        return task_for(self.kind).per_token

    def split_outputs(
        self, indices: Sequence[int], outputs: Mapping[str, np.ndarray]
    ) -> dict[str, list[np.ndarray]]:
        """A batch's outputs cut back into one array per feature of ``indices``, the
        padding removed from per-token outputs."""
        out: dict[str, list[np.ndarray]] = {}
        for name, value in outputs.items():
            if self.per_token():
                out[name] = [value[i, : self.length(f)] for i, f in enumerate(indices)]
            else:
                out[name] = [value[i] for i in range(len(indices))]
        return out


def run_features(
    features: Features,
    run: Callable[[dict[str, np.ndarray]], Mapping[str, np.ndarray]],
    *,
    batch_size: int = 32,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, list[np.ndarray]]:
    """``run`` (a model: feeds → named outputs) over every feature, in length-sorted
    batches; returns each output as one array per feature, in feature order."""
    collected: dict[str, list[Any]] = {}
    for idx in features.batches(batch_size):
        part = features.split_outputs(idx, run(features.feeds(idx)))
        for name, arrays in part.items():
            slot = collected.setdefault(name, [None] * len(features))
            for f, a in zip(idx, arrays, strict=True):
                slot[f] = a
        if on_batch is not None:
            on_batch(len(idx))
    return collected


@dataclass
class Metrics:
    """A task's scores on its examples.

    ``values``: every metric by name, as fractions (accuracy 0.5, F1 0.9; correlations in
    [-1, 1]); ``primary`` the one a comparison is judged on. ``predictions``: one per
    scored example (a class id, a float, a tag list, an answer text). ``resample(idx)``
    recomputes the metrics on resampled example indices ([R, n] integer array → one array
    of R values per name), for bootstrap intervals.
    """

    kind: TaskKind
    values: dict[str, float]
    primary: str
    examples: int
    predictions: list[Any]
    resample: Callable[[np.ndarray], dict[str, np.ndarray]] = field(repr=False)
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def value(self) -> float:
        return self.values[self.primary]

    def to_dict(self) -> dict[str, Any]:
        return {"primary": self.primary, "examples": self.examples, **self.values, **self.notes}


# --- one Task per kind ---------------------------------------------------------------


@dataclass(frozen=True)
class Sniff:
    """What :func:`albert_edge.tasks.detect_task` shows each task's :meth:`Task.looks`: the
    file's text, and either its parsed JSON (``json``: the text opens with ``{``/``[``) or
    its lines."""

    path: Path
    text: str
    json: bool
    obj: Any
    lines: Sequence[str]


class Task:
    """One task: how its file is recognised (:meth:`looks`) and read (:meth:`read`), how
    it becomes model inputs (:meth:`encode`), how the outputs are scored (:meth:`score`,
    with :meth:`score_options` chosen on a reference's outputs), and how it is named in
    messages. One instance per :class:`TaskKind`, registered once in :data:`TASKS` (by
    :mod:`albert_edge.tasks.registry`); every caller dispatches through :func:`task_for`
    instead of branching on the kind.
    """

    kind: TaskKind
    name: str  # the file layout in a phrase ("a CoNLL file"), for refusals
    unit: str = "rows"  # what one example is, for messages ("sentences", "questions")
    per_token: bool = False  # outputs with a sequence axis (sliced back per feature)
    choices: bool = False  # inputs with a choices axis: [batch, choices, seq]
    detectable: bool = True  # recognised by its content (plain text is read only when asked)

    @property
    def head(self) -> str:
        """The ALBERT head (:mod:`albert_edge.heads` name) that solves the task."""
        return TASK_HEADS[self.kind]

    @property
    def expected(self) -> str:
        """The file layout the task reads, for "expected ..." messages."""
        return EXPECTED_FORMAT[self.kind]

    def looks(self, sniff: Sniff) -> bool:
        """Whether the file's content and header are this task's (plain text is no task's
        unless asked for)."""
        return False

    def read(
        self,
        path: Path,
        text: str,
        *,
        label2id: Mapping[str, int] | None = None,
        num_labels: int | None = None,
        finetuning_task: str | None = None,
    ) -> TaskData:
        """The file's examples (see :func:`albert_edge.tasks.read_task_file`)."""
        raise NotImplementedError

    def check_fits(
        self, data: TaskData, num_labels: int | None, finetuning_task: str | None
    ) -> None:
        """Refuse data the model's own head of this task cannot score (its classes, its
        single/pair input); nothing to check by default."""

    def encode(
        self, data: TaskData, tokenizer: Any, max_len: int, stride: int | None = None
    ) -> Features:
        """The model inputs of ``data`` (``stride``: SQuAD's window overlap)."""
        raise NotImplementedError

    def score(
        self,
        data: TaskData,
        features: Features,
        outputs: Mapping[str, Sequence[np.ndarray]],
        **options: Any,
    ) -> Metrics:
        """The task's metrics from a model's outputs, one array per feature."""
        raise NotImplementedError

    def score_options(
        self, data: TaskData, features: Features, reference: Mapping[str, Sequence[np.ndarray]]
    ) -> dict[str, Any]:
        """Scoring options chosen on a reference model's outputs, with which the reference
        and every candidate are then scored (SQuAD v2.0's null threshold); none by default."""
        return {}

    def describe(self, data: TaskData) -> str:
        """One phrase: what was read."""
        return f"{len(data.examples)} {self.unit}"

    def learned_nothing(
        self, metrics: Metrics, id2label: Mapping[Any, Any] | None, rows: str
    ) -> str | None:
        """One phrase saying why ``metrics`` show a model that learned nothing, or None."""
        return None


# Every task, by kind, in the order :func:`albert_edge.tasks.detect_task` asks them:
# filled once by albert_edge.tasks.registry (imported by the package, so before any use).
TASKS: dict[TaskKind, Task] = {}


def task_for(kind: TaskKind | str) -> Task:
    """The :class:`Task` of ``kind`` (a kind, its value or a head name)."""
    return TASKS[task_kind(kind)]
