"""Reading evaluation and calibration data.

The single-sentence readers every SST-2 command uses, on top of the task layer
(:mod:`albert_edge.tasks`): the same file checks, the same GLUE column names, and a
sentence-pair file refused in one line instead of read as its first sentence alone; and
the calibration examples of int8-static / int8-full (:func:`read_calibration`), read from
plain text, an SST-2 .tsv or any task file and encoded as the task encodes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.tasks import ClassificationExample, TaskData, TaskKind
from albert_edge.tasks.classification import TEXT_COLUMNS as _TASK_TEXT_COLUMNS
from albert_edge.tasks.classification import text_columns
from albert_edge.tasks.files import DataError, tsv_rows
from albert_edge.tasks.files import read_text as _task_read_text

if TYPE_CHECKING:
    from albert_edge.tasks import Features
    from albert_edge.tokenizer import AlbertTokenizer

__all__ = [
    "FALLBACK_SENTENCES",
    "TEXT_COLUMNS",
    "Calibration",
    "DataError",
    "config_head",
    "input_file_record",
    "input_record_of",
    "load_calibration_texts",
    "read_calibration",
    "read_sst2",
    "read_text",
]


def _read_text(path: Path, what: str) -> str:
    return _task_read_text(path, what)


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of ``path``, or a :class:`DataError` naming it (binary, UTF-16, not
    UTF-8, empty, missing); ``what`` names the file's role in the message."""
    return _task_read_text(Path(path), what)


TEXT_COLUMNS = _TEXT_COLUMNS = _TASK_TEXT_COLUMNS


def read_sst2(path: str | Path, labels: range | None = None) -> list[tuple[int, str]]:
    """Labelled sentences from a GLUE SST-2 style file: header row, ``label<TAB>sentence``.

    Columns are found by header name, so GLUE's ``sentence<TAB>label`` order and copies
    that call the text column ``content`` or ``text`` read the same. ``labels``: the class
    ids the caller's model has (``range(2)`` for SST-2); a row outside it is refused with
    its line number instead of failing deep inside a loss function. A sentence-pair file
    (``sentence1``/``sentence2``, MRPC's ``#1 String``/``#2 String``, ...) is refused:
    its first sentence alone is a different task.
    """
    p = Path(path)
    text = _read_text(p, "data")
    rows = tsv_rows(text)
    header = [h.strip().lower() for h in rows[0]]
    cols, _, pair = text_columns(rows[0])
    if pair:
        names = "/".join(rows[0][c].strip() for c in cols)
        raise DataError(
            f"{p}: a sentence-pair file ({names} columns); this command reads single "
            "sentences (SST-2 style: label, sentence), and the first sentence alone is a "
            "different task; `albert-edge verify --data` scores pairs"
        )
    if "label" not in header or not cols:
        found = ", ".join(repr(h[:30]) for h in header[:6]) or "nothing"
        first = rows[0][0] if rows[0] else ""
        sep = " (comma separated? it must be tab separated)" if "," in first else ""
        raise DataError(
            f"{p}: expected a header with a 'label' column and a 'sentence' (or 'content'/'text') "
            f"column, tab separated, as in GLUE SST-2; the first line has {found}{sep}"
        )
    li, si = header.index("label"), cols[0]
    out = []
    for n, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(header):  # a stray tab would silently cut the sentence short
            raise DataError(
                f"{p}:{n}: row has {len(row)} tab-separated columns but the header has "
                f"{len(header)}; remove the extra tabs (a tab inside a sentence?)"
            )
        try:
            label = int(row[li])
        except (ValueError, IndexError):
            raise DataError(
                f"{p}:{n}: label {row[li][:40]!r} is not a class id; expected {_label_set(labels)}"
            ) from None
        if labels is not None and label not in labels:
            raise DataError(f"{p}:{n}: label {label} is not one of {_label_set(labels)}")
        out.append((label, row[si]))
    if not out:
        raise DataError(f"{p}: no labelled rows after the header")
    return out


def input_record_of(path: str | Path) -> str:
    """The ``finetuning_task`` a classifier trained on the SST-2 style file ``path``
    records in config.json: ``sst2`` for GLUE's ``sentence`` column, ``single-sentence``
    for another text column (:func:`albert_edge.tasks.classification.header_input_record`;
    docs/inputs.md, "What a checkpoint reads")."""
    from albert_edge.tasks.classification import header_input_record

    text = _read_text(Path(path), "data")
    return header_input_record(tsv_rows(text.splitlines()[0])[0])


def _label_set(labels: range | None) -> str:
    if labels is None:
        return "an integer class id (SST-2: 0 = negative, 1 = positive)"
    if labels == range(2):
        return "the labels 0 (negative) and 1 (positive) of SST-2"
    return f"the integer class ids {labels.start}..{labels.stop - 1}"


def load_calibration_texts(path: str | Path, limit: int | None = None) -> list[str]:
    """Sentences for calibration: an SST-2 style .tsv (sentence column) or plain lines.

    Deterministic: the first ``limit`` sentences in file order (SST-2 train is already
    shuffled), so two runs calibrate on the same data. Any task's file:
    :func:`read_calibration`.
    """
    cal = read_calibration(path, limit)
    texts = cal.sentences()
    if texts is None:
        raise DataError(
            f"{path}: {cal.describe()}; this command calibrates on sentences (plain text, one "
            "per line, or an SST-2 style .tsv)"
        )
    return texts


# What each head's inputs are, for the calibration refusal of sentences.
_INPUTS = {
    "question-answering": "a question and a context window (token_type_ids 1 on the context)",
    "multiple-choice": "a context paired with each choice (token_type_ids 1 on the choice)",
    "sentence-pair": "two sentences (token_type_ids 1 on the second)",
}


@dataclass(frozen=True)
class Calibration:
    """The examples int8-static (ONNX) and int8-full (TFLite) calibrate on, read from one
    file by the task layer, and encoded as the task encodes them for the model.

    ``sentences`` (plain text, one per line, or a single-sentence .tsv such as SST-2's) are
    fed one sentence each, as a single-sentence classifier, a tagger or a masked LM reads
    text; a task file is fed as its task's model inputs: a GLUE pair with its token type
    ids, SQuAD question + context windows, CoNLL sentences (words tokenized one by one, as
    the tagger sees them), SWAG/RACE choices. ``default``: the packaged SST-2 sample,
    read because no ``--calibration`` was given."""

    path: Path
    data: TaskData
    default: bool = False
    max_len: int | None = None  # the length the model was fine-tuned at, where recorded

    @property
    def task(self) -> str:
        """``sentences``, ``sentence-pairs``, or the task of a non-classification file."""
        if self.data.kind is TaskKind.CLASSIFICATION:
            return "sentence-pairs" if self.data.pair else "sentences"
        return self.data.kind.value

    def __len__(self) -> int:
        return len(self.data.examples)

    def sentences(self) -> list[str] | None:
        """The text of single-sentence calibration, None for a task file's inputs."""
        if self.task != "sentences":
            return None
        return [ex.text for ex in self.data.examples]

    def describe(self) -> str:
        return f"{self.data.describe()} ({self.task})"

    def encode(self, tokenizer: AlbertTokenizer, max_len: int) -> Features:
        """The model inputs, at most ``max_len`` (and :attr:`max_len`) tokens long (QA:
        windows with the task layer's default stride, as verify encodes them)."""
        from albert_edge.tasks import encode

        return encode(self.data, tokenizer, min(max_len, self.max_len or max_len))

    def record(self) -> dict[str, Any]:
        """The manifest's record beside the file's name and sha256: what was read."""
        return {"task": self.task, "format": self.data.format, "examples": len(self)}

    def check_fits(
        self,
        head: str,
        *,
        finetuning_task: str | None = None,
        num_labels: int | None = None,
        model: str | Path | None = None,
    ) -> None:
        """Refuse, in one line naming the file and the format the head needs, calibration
        inputs the model never sees: a task file of another task (a SQuAD file for a
        classifier), a pair file for a single-sentence model and sentences for a pair
        model; and sentences for a question-answering or multiple-choice head, whose
        second segment (and, for QA, long windows) sentences never calibrate. A base model
        or a masked LM reads any text."""
        from albert_edge.tasks import EXPECTED_FORMAT, HEAD_TASKS, check_fits
        from albert_edge.tasks.classification import check_fits_classifier

        need = HEAD_TASKS.get(head)
        if need is None or need is TaskKind.MASKED_LM:
            return
        who = f"{model} is" if model is not None else "the model is"
        pair_model = need is TaskKind.CLASSIFICATION and _pair_task(finetuning_task)
        if self.task == "sentences" and (
            need in (TaskKind.QUESTION_ANSWERING, TaskKind.MULTIPLE_CHOICE) or pair_model
        ):
            inputs = _INPUTS["sentence-pair" if pair_model else head]
            given = (
                "no --calibration: the packaged default is SST-2 single sentences"
                if self.default
                else "single sentences"
            )
            raise DataError(
                f"{self.path}: {given}, but {who} a {head} model whose inputs are {inputs}, "
                f"which sentences never calibrate; pass --calibration FILE: "
                f"{EXPECTED_FORMAT[need]}"
            )
        if self.task == "sentences" and need is not TaskKind.CLASSIFICATION:
            return  # a tagger reads sentences
        check_fits(self.data, head, model=model)
        if need is TaskKind.CLASSIFICATION:
            check_fits_classifier(self.data, num_labels or 2, finetuning_task)

    def check_config(self, config: Mapping[str, Any] | None, model: str | Path | None) -> None:
        """:meth:`check_fits` against a config.json read without torch (none: nothing to
        judge yet, the loaded model is judged)."""
        fits = config_head(config)
        if fits is not None:
            head, task, labels = fits
            self.check_fits(head, finetuning_task=task, num_labels=labels, model=model)


def _pair_task(finetuning_task: str | None) -> bool:
    from albert_edge.tasks.classification import reads_pairs

    return reads_pairs(finetuning_task) is True


def read_calibration(
    path: str | Path, limit: int | None = None, *, default: bool = False
) -> Calibration:
    """The calibration examples of ``path``: plain text (one sentence per line), an SST-2
    style .tsv, or any task file the task layer reads (GLUE pairs, CoNLL-2003, SQuAD,
    SWAG/RACE). Deterministic: the first ``limit`` examples in file order (sentences,
    pairs, tagged sentences, questions: a long context's windows each calibrate), so two
    runs calibrate on the same data. Refused in one line naming the file when it is
    unreadable or holds nothing."""
    from albert_edge.tasks import detect_task, read_task_file

    p = Path(path)
    text = _read_text(p, "calibration")
    first = [h.strip() for h in text.splitlines()[0].lower().split("\t")]
    labelled = "label" in first and any(h in _TEXT_COLUMNS for h in first)
    if labelled or text_columns(first)[2] or detect_task(p, text) is not None:
        data = read_task_file(p)
    else:  # plain text: one sentence per line
        lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)]
        data = TaskData(
            kind=TaskKind.CLASSIFICATION,
            path=p,
            format="text",
            examples=[ClassificationExample(t, None, 0, n) for n, t in lines if t],
            columns=("text",),
        )
    if not data.examples:
        raise DataError(f"{p}: calibration file has no sentences")
    if limit:
        data = data.subset(range(min(limit, len(data.examples))))
    return Calibration(p, data, default)


def precheck_calibration(
    path: str | Path | None, limit: int, model: str | Path | None
) -> str | None:
    """Read the calibration file (``path``, else the packaged SST-2 sample) and judge it
    against ``model``'s config.json (a checkpoint or artifact directory, or a model file
    in one; None: the embedded SST-2 model) before torch loads.
    Returns the one line to print when the packaged sentences calibrate a model whose
    own inputs they only approximate (a tagger, a masked LM, a base model)."""
    import json

    from albert_edge.layout import DEFAULT_MODEL
    from albert_edge.options import DEFAULT_CALIBRATION

    cal = read_calibration(path or DEFAULT_CALIBRATION, limit, default=path is None)
    m = Path(model) if model is not None else DEFAULT_MODEL
    config = None
    for folder in (m, m.parent, m.parent.parent):
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            break
        except (OSError, ValueError):
            continue
    cal.check_config(config, m)
    fits = config_head(config)
    if cal.default and fits is not None and fits[0] != "sequence-classification":
        return (
            f"note: no --calibration: calibrating the {fits[0]} model {m} on the packaged "
            "SST-2 train sentences; pass --calibration FILE with its own task's data (e.g. "
            "its CoNLL-2003 train file) for ranges from the inputs it will see"
        )
    return None


def config_head(config: Mapping[str, Any] | None) -> tuple[str, str | None, int] | None:
    """(head, finetuning_task, number of labels) of a config.json, read without torch;
    None without one (a TF1 checkpoint: judged once loaded)."""
    if not isinstance(config, Mapping):
        return None
    from albert_edge.errors import UnsupportedError
    from albert_edge.heads import head_from_architectures

    try:
        head = head_from_architectures(config.get("architectures")).name
    except UnsupportedError:
        return None  # the load names it
    id2label, n = config.get("id2label"), config.get("num_labels")
    labels = len(id2label) if isinstance(id2label, Mapping) and id2label else n
    ft = config.get("finetuning_task")
    return head, ft if isinstance(ft, str) else None, labels if isinstance(labels, int) else 2


# Used where no SST-2 file is at hand (bench inputs, verify of static precisions).
FALLBACK_SENTENCES = (
    "a warm , funny and ultimately moving film about two brothers who never quite grew up .",
    "the plot is thin and the jokes land with a dull thud .",
    "an engaging cast keeps the story moving even when the script runs out of ideas .",
    "it is too long , too loud and far too pleased with itself .",
    "a small , honest picture that earns every one of its quiet surprises .",
    "the performances are fine but the film never finds a reason to exist .",
    "smart , tender and often very funny , this is the rare comedy with a heart .",
    "nothing in it feels new , and little of it feels alive .",
)


def input_file_record(path: str | Path) -> dict[str, str]:
    """How an artifact names an input file it was built from: its file name and sha256.

    Never the path: an artifact must not carry the build machine's directories (a user's
    home, a CI workspace), and the hash identifies the file better than its location did.
    """
    from albert_edge.manifest import sha256_file

    p = Path(path)
    return {"file": p.name, "sha256": sha256_file(p)}
