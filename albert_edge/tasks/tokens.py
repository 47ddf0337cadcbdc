"""Token classification: CoNLL-2003 named entities, scored at the entity level.

The file: one token per line, ``WORD POS CHUNK NER`` or ``WORD NER`` (spaces or tabs), a
blank line between sentences, ``-DOCSTART-`` lines skipped. The original release tags
in IOB1 (an entity starts with ``I-``; ``B-`` only between two adjacent entities of one
type); tags are converted to IOB2 on reading, which is lossless, and IOB2 files pass
unchanged. The model's label is put on each word's first piece (its other pieces get
-100, no loss, no prediction), and entity F1 is seqeval's default mode on IOB2 tags,
which counts entities as the CoNLL shared task's conlleval script does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.tasks.files import DataError
from albert_edge.tasks.types import (
    EXPECTED_FORMAT,
    Features,
    Metrics,
    Sniff,
    Task,
    TaskData,
    TaskKind,
    TokenExample,
)

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.tokenizer import AlbertTokenizer

IGNORE = -100
_TAG = re.compile(r"^(O|[BIES]-\S+)$")
# HF datasets' conll2003 order, used when the caller gives no label2id and the tags fit.
CONLL_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")


def looks_like_conll(lines: Sequence[str]) -> bool:
    """Whether the first sentence's lines are ``WORD ... TAG`` lines (or the file holds
    only CoNLL's ``-DOCSTART-`` lines: a CoNLL file with no sentences, which its reader
    refuses as such rather than any other reader as a malformed file of its own kind)."""
    seen = 0
    docstart = False
    for line in lines[:50]:
        if line.startswith("-DOCSTART-"):
            docstart = True
            continue
        if not line.strip():
            continue
        cells = line.split()
        if len(cells) < 2 or not _TAG.match(cells[-1]):
            return False
        seen += 1
    if seen or not docstart:
        return seen > 0
    return all(not ln.strip() or ln.startswith("-DOCSTART-") for ln in lines)


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB2 tags: every entity starts with ``B-`` (an ``I-X`` after anything but ``X``
    becomes ``B-X``). Unchanged for tags already IOB2."""
    out: list[str] = []
    prev = "O"
    for tag in tags:
        if tag.startswith("I-") and (prev == "O" or prev[2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
        prev = tag
    return out


def read_conll(path: Path, text: str, *, label2id: Mapping[str, int] | None = None) -> TaskData:
    """Sentences of a CoNLL-2003 file, their tags in IOB2 (see the module docstring).

    ``label2id``: the model's tags; a tag the model lacks is refused in one line. A model
    trained on raw IOB1 tags (it has ``I-X`` but no ``B-X``) keeps the file's own tags.
    """
    sentences: list[TokenExample] = []
    words: list[str] = []
    tags: list[str] = []
    first = 0
    width = 0
    iob1 = False
    lines = text.splitlines()
    for n, line in enumerate([*lines, ""], start=1):
        if not line.strip() or line.startswith("-DOCSTART-"):
            if words:
                converted = iob1_to_iob2(tags)
                iob1 = iob1 or converted != tags
                sentences.append(TokenExample(tuple(words), tuple(converted), first))
                words, tags = [], []
            continue
        cells = line.split()
        if len(cells) < 2 or not _TAG.match(cells[-1]):
            raise DataError(
                f"{path}:{n}: {line[:60]!r} is not a 'WORD ... TAG' line; expected "
                f"{EXPECTED_FORMAT[TaskKind.TOKEN_CLASSIFICATION]}"
            )
        if width and len(cells) != width:
            raise DataError(
                f"{path}:{n}: {len(cells)} columns where the file's lines have {width}; "
                "expected one 'WORD POS CHUNK NER' (or 'WORD NER') line per token"
            )
        width = len(cells)
        if not words:
            first = n
        words.append(cells[0])
        tags.append(cells[-1])
    if not sentences:
        raise DataError(
            f"{path}: a CoNLL file with no sentences (only -DOCSTART- lines and blank lines); "
            f"expected {EXPECTED_FORMAT[TaskKind.TOKEN_CLASSIFICATION]}"
        )
    scheme = "IOB1" if iob1 else "IOB2"
    names = _tag_names(path, sentences, label2id, lines)
    if names is None:  # a model trained on the file's raw IOB1 tags
        sentences = _raw_tags(lines, sentences)
        names = tuple(sorted(label2id or {}, key=lambda k: (label2id or {})[k]))
    return TaskData(
        kind=TaskKind.TOKEN_CLASSIFICATION,
        path=path,
        format="conll",
        examples=sentences,
        label_names=names,
        scheme=scheme,
    )


def _tag_names(
    path: Path,
    sentences: list[TokenExample],
    label2id: Mapping[str, int] | None,
    lines: Sequence[str],
) -> tuple[str, ...] | None:
    seen = {t for s in sentences for t in s.tags}
    if not label2id:
        if seen <= set(CONLL_LABELS):
            return CONLL_LABELS
        return ("O", *sorted(seen - {"O"}))
    model = dict(label2id)
    if not any(_TAG.match(k) for k in model) and not all(
        k.upper().startswith("LABEL_") for k in model
    ):
        raise DataError(
            f"{path}: a CoNLL token file (one 'WORD ... TAG' line per word), but the model's "
            f"labels ({', '.join(sorted(model, key=lambda k: model[k]))}) are classes, not "
            "entity tags: it scores whole sentences; pass its own task's file (a classifier "
            f"reads {EXPECTED_FORMAT[TaskKind.CLASSIFICATION].split(':')[0]})"
        )
    if all(k.upper().startswith("LABEL_") for k in model):
        raise DataError(
            f"{path}: the model's config.json names its tags only {', '.join(sorted(model))}; "
            "set id2label/label2id to the tag names (B-PER, I-PER, ...) it was trained on"
        )
    missing = sorted(seen - set(model))
    if not missing:
        return tuple(sorted(model, key=lambda k: model[k]))
    raw = {ln.split()[-1] for ln in lines if ln.strip() and not ln.startswith("-DOCSTART-")}
    if raw <= set(model):
        return None
    for s in sentences:
        for i, (w, t) in enumerate(zip(s.words, s.tags, strict=True)):
            if t in missing:
                raise DataError(
                    f"{path}:{s.line + i}: tag {t!r} (word {w!r}) is not one "
                    f"of the model's tags ({', '.join(sorted(model, key=lambda k: model[k]))}); "
                    "pass data for the tags this model was trained on"
                )
    return None  # unreachable: a missing tag is in some sentence


def _raw_tags(lines: Sequence[str], sentences: list[TokenExample]) -> list[TokenExample]:
    """The sentences with the file's own tags (no IOB2 conversion)."""
    out = []
    for s in sentences:
        tags: list[str] = []
        n = s.line - 1
        while len(tags) < len(s.words):
            tags.append(lines[n].split()[-1])
            n += 1
        out.append(TokenExample(s.words, tuple(tags), s.line))
    return out


def encode_tokens(data: TaskData, tokenizer: AlbertTokenizer, max_len: int) -> Features:
    """Each word tokenized on its own; a sentence longer than ``max_len`` pieces is cut
    into consecutive windows at word boundaries, so every word is predicted exactly once.
    The label of a word goes on its first piece; the rest get -100."""
    ids2 = data.label2id
    budget = max_len - 2
    input_ids, types, labels, word_ids, owners = [], [], [], [], []
    for e, ex in enumerate(data.examples):
        pieces = [tokenizer.tokenize_ids(w) or [tokenizer.unk_id] for w in ex.words]
        w = 0
        while w < len(pieces):
            ids, lab, wid = [tokenizer.cls_id], [IGNORE], [-1]
            while w < len(pieces) and (len(ids) - 1 + len(pieces[w]) <= budget or len(ids) == 1):
                p = pieces[w][:budget]
                ids += p
                lab += [ids2.get(ex.tags[w], IGNORE)] + [IGNORE] * (len(p) - 1)
                wid += [w] + [-1] * (len(p) - 1)
                w += 1
            ids.append(tokenizer.sep_id)
            lab.append(IGNORE)
            wid.append(-1)
            input_ids.append(ids)
            types.append([0] * len(ids))
            labels.append(lab)
            word_ids.append(wid)
            owners.append(e)
    return Features(
        kind=TaskKind.TOKEN_CLASSIFICATION,
        input_ids=input_ids,
        token_type_ids=types,
        example_index=owners,
        labels=labels,
        pad_id=tokenizer.pad_id,
        word_ids=word_ids,
    )


def predict_tags(
    data: TaskData, features: Features, outputs: Mapping[str, Sequence[np.ndarray]]
) -> list[list[str]]:
    """Each sentence's predicted tag per word (the argmax on the word's first piece)."""
    import numpy as np

    pred: list[list[str]] = [["O"] * len(ex.words) for ex in data.examples]
    names = data.label_names
    for f, logits in enumerate(outputs["logits"]):
        arg = np.asarray(logits).argmax(-1)
        e = features.example_index[f]
        for t, w in enumerate(features.word_ids[f]):
            if w >= 0:
                pred[e][w] = names[int(arg[t])] if int(arg[t]) < len(names) else "O"
    return pred


def score_tokens(
    data: TaskData, features: Features, outputs: Mapping[str, Sequence[np.ndarray]]
) -> Metrics:
    """Entity-level precision, recall and F1 (seqeval, default mode, on IOB2 tags: the
    conlleval counts) and token accuracy. Resamples recompute F1 from per-sentence
    entity counts, which sum to seqeval's micro totals."""
    import numpy as np
    from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score

    gold = [iob1_to_iob2(ex.tags) for ex in data.examples]
    pred = [iob1_to_iob2(p) for p in predict_tags(data, features, outputs)]
    values = {
        "f1": float(f1_score(gold, pred)),
        "precision": float(precision_score(gold, pred, zero_division=0)),
        "recall": float(recall_score(gold, pred, zero_division=0)),
        "token_accuracy": float(accuracy_score(gold, pred)),
    }
    stats = np.asarray([entity_counts(g, p) for g, p in zip(gold, pred, strict=True)], dtype=float)

    def resample(idx: np.ndarray) -> dict[str, np.ndarray]:
        s = stats[idx].sum(axis=1)
        tp, npred, ngold = s[:, 0], s[:, 1], s[:, 2]
        den = npred + ngold
        f1 = np.divide(2 * tp, den, out=np.zeros_like(den), where=den > 0)
        prec = np.divide(tp, npred, out=np.zeros_like(den), where=npred > 0)
        rec = np.divide(tp, ngold, out=np.zeros_like(den), where=ngold > 0)
        return {"f1": f1, "precision": prec, "recall": rec}

    return Metrics(
        kind=TaskKind.TOKEN_CLASSIFICATION,
        values=values,
        primary="f1",
        examples=len(gold),
        predictions=pred,
        resample=resample,
    )


def entity_counts(gold: Sequence[str], pred: Sequence[str]) -> tuple[int, int, int]:
    """(correct entities, predicted entities, gold entities) of one sentence, as seqeval
    extracts them."""
    from seqeval.metrics.sequence_labeling import get_entities

    g = set(get_entities(list(gold)))
    p = set(get_entities(list(pred)))
    return len(g & p), len(p), len(g)


class TokenTask(Task):
    """Token classification: CoNLL-2003 named entities, scored in entity F1."""

    kind = TaskKind.TOKEN_CLASSIFICATION
    name = "a CoNLL file"
    unit = "sentences"
    per_token = True

    def looks(self, sniff: Sniff) -> bool:
        return not sniff.json and looks_like_conll(sniff.lines)

    def read(
        self,
        path: Path,
        text: str,
        *,
        label2id: Mapping[str, int] | None = None,
        num_labels: int | None = None,
        finetuning_task: str | None = None,
    ) -> TaskData:
        return read_conll(path, text, label2id=label2id)

    def encode(
        self, data: TaskData, tokenizer: Any, max_len: int, stride: int | None = None
    ) -> Features:
        return encode_tokens(data, tokenizer, max_len)

    def score(
        self,
        data: TaskData,
        features: Features,
        outputs: Mapping[str, Sequence[np.ndarray]],
        **options: Any,
    ) -> Metrics:
        return score_tokens(data, features, outputs)

    def describe(self, data: TaskData) -> str:
        return f"{len(data.examples)} sentences ({data.scheme} tags)"

    def learned_nothing(
        self, metrics: Metrics, id2label: Mapping[Any, Any] | None, rows: str
    ) -> str | None:
        if metrics.values.get("f1") != 0.0:
            return None
        n = int(metrics.examples)
        return (
            f"learned nothing: entity F1 is 0 on the {n:,} {rows} sentences (no entity found right)"
        )
