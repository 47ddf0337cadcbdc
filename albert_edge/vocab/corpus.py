"""The text a vocabulary is trimmed for: any task file the task layer reads, or plain text.

A file :func:`albert_edge.tasks.detect_task` recognises is read by the task layer
(:func:`albert_edge.tasks.read_task_file`), and its text is what the model reads
(:func:`task_texts`): a GLUE .tsv's sentence (both sentences of a pair), a CoNLL file's
words joined by spaces, a SQuAD file's questions and contexts (each context once), SWAG /
RACE contexts, questions and choices. Anything else is plain text, one sentence a line,
except a tab-separated file with a header, which needs a text column (``sentence``,
``content``, ``text`` or ``sentence1``): one with none is refused by name instead of being
trimmed for its header and label digits. Encoding problems (UTF-16, binary, not UTF-8)
are named by :func:`albert_edge.data.read_text`.

The rows of a task file stay task data (:attr:`Corpus.fit_data`, :attr:`Corpus.held_data`)
so the held-out check can score the trimmed model in the task's own metric and the
healing fine-tune (:mod:`albert_edge.vocab.heal`) can read the same rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from albert_edge.data import TEXT_COLUMNS, DataError, read_text
from albert_edge.tasks.classification import text_columns

if TYPE_CHECKING:
    from albert_edge.tasks import TaskData

# Every HELD_OUT_EVERY-th row (the last of each block) is held out when no --held-out file
# is given: deterministic, spread over the file, never counted when choosing pieces.
HELD_OUT_EVERY = 10


@dataclass(frozen=True)
class Corpus:
    """Sentences to count pieces on (``fit``) and to measure the trim on (``held_out``).

    ``fit_data`` / ``held_data``: the same rows as task data where the file is a task file
    (``None`` for plain text); ``held_data`` is what the held-out check scores."""

    fit: list[str]
    held_out: list[str]
    sha256: str
    name: str
    held_out_from: str
    fit_data: TaskData | None = None
    held_data: TaskData | None = None


def task_texts(data: TaskData) -> list[str]:
    """The text of every example of ``data`` as the model reads it (empty strings dropped):
    both sentences of a pair, a CoNLL sentence's words joined by spaces, a SQuAD question
    and its context (each distinct context once: a paragraph asked ten questions is still
    one paragraph of text), a multiple-choice context, question and choices."""
    from albert_edge.tasks import (
        ChoiceExample,
        ClassificationExample,
        QAExample,
        TextExample,
        TokenExample,
    )

    out: list[str] = []
    contexts: set[str] = set()
    for ex in data.examples:
        if isinstance(ex, ClassificationExample):
            out += [ex.text, *([ex.text_pair] if ex.text_pair is not None else [])]
        elif isinstance(ex, TokenExample):
            out.append(" ".join(ex.words))
        elif isinstance(ex, QAExample):
            out.append(ex.question)
            if ex.context not in contexts:
                contexts.add(ex.context)
                out.append(ex.context)
        elif isinstance(ex, ChoiceExample):
            out += [ex.context, ex.question, *ex.choices]
        elif isinstance(ex, TextExample):
            out.append(ex.text)
    return [s.strip() for s in out if s and s.strip()]


def read_task_data(
    path: str | Path,
    what: str = "corpus",
    *,
    label2id: Mapping[str, int] | None = None,
    num_labels: int | None = None,
) -> TaskData | None:
    """``path`` as task data when the task layer recognises it, ``None`` for plain text
    (and for a tab-separated file with a text column but no label). A recognised file the
    task layer refuses is refused in its words, named as ``what``."""
    from albert_edge.tasks import detect_task, read_task_file

    p = Path(path)
    text = read_text(p, what)
    if detect_task(p, text) is None:
        return None
    try:
        return read_task_file(p, label2id=label2id, num_labels=num_labels)
    except DataError as exc:
        raise DataError(f"{what} {exc}") from None


def read_sentences(path: str | Path, what: str = "corpus") -> list[str]:
    """The sentences of a task file (:func:`task_texts`) or of plain text (one a line)."""
    p = Path(path)
    data = read_task_data(p, what)
    if data is not None:
        out = task_texts(data)
        if not out:
            raise DataError(f"{p}: {what} has no text in it")
        return out
    return _plain_sentences(p, read_text(p, what), what)


def _plain_sentences(p: Path, text: str, what: str) -> list[str]:
    """Lines of plain text; a tab-separated file's text column (header by name)."""
    first = text.splitlines()[0]
    if "\t" not in first:
        return [line.strip() for line in text.splitlines() if line.strip()]
    header = [h.strip().lower() for h in first.split("\t")]
    pair_cols, _, pair = text_columns(header)  # an unlabelled pair file: both sentences
    cols = pair_cols if pair else [i for i, h in enumerate(header) if h in TEXT_COLUMNS][:1]
    if not cols:
        found = ", ".join(repr(h[:30]) for h in header[:6])
        raise DataError(
            f"{p}: tab-separated {what} without a text column (the first line has {found}); "
            "name the text column 'sentence' (or 'text'/'content'), or pass plain text, one "
            "sentence a line"
        )
    # Split on tabs, not with the csv module: QUOTE_NONE splits the same way, and csv's
    # field_size_limit (128 KiB) failed every line longer than that with a traceback.
    rows = [line.split("\t") for line in text.splitlines()[1:]]
    out = [r[c].strip() for r in rows for c in cols if len(r) > c and r[c].strip()]
    if not out:
        raise DataError(f"{p}: {what} has a header but no sentences under it")
    return out


def held_out_split(n: int) -> tuple[list[int], list[int]]:
    """(fit, held-out) row indices: every :data:`HELD_OUT_EVERY`-th row held out."""
    held = [i for i in range(n) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1]
    fit = [i for i in range(n) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1]
    return fit, held


def read_corpus(
    path: str | Path,
    held_out: str | Path | None = None,
    *,
    scored: TaskData | None = None,
) -> Corpus:
    """The corpus split into fit and held-out sentences (``held_out``: a separate file).

    ``scored``: the file the held-out check scores (``held_out``, else the corpus), read as
    task data against the model (labels mapped through its config.json); its held-out rows
    become :attr:`Corpus.held_data`. ``None``: no metric is scored (plain text, or task
    data the model's head cannot be scored on)."""
    p = Path(path)
    data = read_task_data(p)
    sentences = task_texts(data) if data is not None else read_sentences(p)
    if not sentences:
        raise DataError(f"{p}: corpus has no text in it")
    fit_data, held_data = data, None
    if held_out is not None:
        other = read_task_data(held_out, "held-out")
        rest = task_texts(other) if other is not None else read_sentences(held_out, "held-out")
        fit, how, held_data = sentences, Path(held_out).name, scored
    elif data is not None and len(data.examples) >= HELD_OUT_EVERY:
        fit_idx, held_idx = held_out_split(len(data.examples))
        fit_data = data.subset(fit_idx)
        fit, rest = task_texts(fit_data), task_texts(data.subset(held_idx))
        how = f"every {HELD_OUT_EVERY}th row of the corpus (not counted when choosing pieces)"
        if scored is not None:
            held_data = scored.subset(held_idx)
    else:
        fit_idx, held_idx = held_out_split(len(sentences))
        fit = [sentences[i] for i in fit_idx]
        rest = [sentences[i] for i in held_idx]
        how = f"every {HELD_OUT_EVERY}th line of the corpus (not counted when choosing pieces)"
        if not rest:  # under 10 lines: measure on what was fitted, and say so
            rest, how = fit, "the corpus itself (fewer than 10 lines)"
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    return Corpus(
        fit=fit,
        held_out=rest,
        sha256=digest,
        name=p.name,
        held_out_from=how,
        fit_data=fit_data,
        held_data=held_data,
    )
