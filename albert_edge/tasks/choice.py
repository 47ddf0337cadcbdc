"""Multiple choice (SWAG, RACE) and masked-token prediction: readers, encoding, accuracy.

Multiple choice feeds each candidate as its own sequence, ``[CLS] context [SEP] question
choice [SEP]`` (RACE's cloze questions have the choice put in for their ``_``), shaped
[batch, choices, seq] as AlbertForMultipleChoice takes it; the prediction is the choice
with the highest logit. Masked LM masks 15 % of each line's pieces (at least one) at
seeded positions, all replaced by ``[MASK]``, and scores the share of masked pieces the
model restores (masked-token accuracy).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.tasks.files import DataError, comma_rows
from albert_edge.tasks.types import (
    EXPECTED_FORMAT,
    ChoiceExample,
    Features,
    Metrics,
    Sniff,
    Task,
    TaskData,
    TaskKind,
    TextExample,
)

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.tokenizer import AlbertTokenizer

IGNORE = -100
MASK_RATE = 0.15
MASK_SEED = 0


def looks_like_swag(first_line: str) -> bool:
    h = [c.strip().lower() for c in first_line.split(",")]
    return "ending0" in h and ("sent1" in h or "startphrase" in h)


def read_swag(path: Path, text: str) -> TaskData:
    """SWAG's CSV: context ``sent1``, question ``sent2``, choices ``ending0..N``, ``label``."""
    rows = comma_rows(text)
    h = [c.strip().lower() for c in rows[0]]
    ends = sorted(
        (c for c in h if c.startswith("ending") and c[6:].isdigit()), key=lambda c: int(c[6:])
    )
    if "label" not in h or "sent1" not in h or len(ends) < 2:
        raise DataError(
            f"{path}: expected {EXPECTED_FORMAT[TaskKind.MULTIPLE_CHOICE]}; the header lacks "
            "'label', 'sent1' or the ending columns"
        )
    li, c1 = h.index("label"), h.index("sent1")
    c2 = h.index("sent2") if "sent2" in h else None
    cols = [h.index(c) for c in ends]
    out = []
    for n, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(h):
            raise DataError(f"{path}:{n}: {len(row)} columns where the header has {len(h)}")
        try:
            label = int(row[li])
        except ValueError:
            raise DataError(f"{path}:{n}: label {row[li][:20]!r} is not a choice index") from None
        if not 0 <= label < len(cols):
            raise DataError(f"{path}:{n}: label {label} is not one of 0..{len(cols) - 1}")
        question = row[c2] if c2 is not None else ""
        out.append(ChoiceExample(row[c1], question, tuple(row[c] for c in cols), label, n))
    if not out:
        raise DataError(f"{path}: no questions after the header")
    return TaskData(kind=TaskKind.MULTIPLE_CHOICE, path=path, format="swag-csv", examples=out)


def looks_like_race(obj: Any) -> bool:
    items = obj if isinstance(obj, list) else [obj]
    return bool(items) and all(
        isinstance(o, dict) and "article" in o and "options" in o for o in items[:5]
    )


def parse_json_or_lines(path: Path, text: str) -> Any:
    """A JSON document, or a list of the objects of a JSON Lines file; None if neither."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError:
        return None


def read_race(path: Path, obj: Any) -> TaskData:
    """RACE: per article ``article``, ``questions``, ``options`` (a list per question) and
    ``answers`` (letters); or one question per object (``question``, ``answer``)."""
    items = obj if isinstance(obj, list) else [obj]
    out = []
    for n, item in enumerate(items, start=1):
        questions = item.get("questions", [item.get("question")])
        options = item.get("options") if "questions" in item else [item.get("options")]
        answers = item.get("answers", [item.get("answer")])
        if not (
            isinstance(questions, list) and isinstance(options, list) and isinstance(answers, list)
        ):
            raise DataError(f"{path}: item {n}: questions, options and answers must be lists")
        if not len(questions) == len(options) == len(answers):
            raise DataError(
                f"{path}: item {n}: {len(questions)} questions, {len(options)} option lists "
                f"and {len(answers)} answers; they must match"
            )
        for q, opts, ans in zip(questions, options, answers, strict=True):
            if not isinstance(opts, list) or len(opts) < 2:
                raise DataError(f"{path}: item {n}: each question needs a list of options")
            label = "ABCDEFGH".find(str(ans).strip().upper()) if isinstance(ans, str) else ans
            if not isinstance(label, int) or not 0 <= label < len(opts):
                raise DataError(
                    f"{path}: item {n}: answer {ans!r} is not one of its {len(opts)} options"
                )
            out.append(
                ChoiceExample(str(item["article"]), str(q or ""), tuple(map(str, opts)), label, n)
            )
    if not out:
        raise DataError(f"{path}: no questions")
    width = {len(e.choices) for e in out}
    if len(width) != 1:
        raise DataError(f"{path}: questions have {sorted(width)} options; one count is needed")
    return TaskData(kind=TaskKind.MULTIPLE_CHOICE, path=path, format="race-json", examples=out)


def encode_choice(data: TaskData, tokenizer: AlbertTokenizer, max_len: int) -> Features:
    ids, types = [], []
    choices = len(data.examples[0].choices)
    for ex in data.examples:
        if len(ex.choices) != choices:
            raise DataError(f"{data.path}: questions with different numbers of choices")
        for c in ex.choices:
            second = (
                ex.question.replace("_", c) if "_" in ex.question else f"{ex.question} {c}".strip()
            )
            enc = tokenizer.encode(ex.context, second, max_length=max_len, padding="none")
            ids.append(enc.input_ids[0])
            types.append(enc.token_type_ids[0])
    return Features(
        kind=TaskKind.MULTIPLE_CHOICE,
        input_ids=ids,
        token_type_ids=types,
        example_index=list(range(len(data.examples))),
        labels=[ex.label for ex in data.examples],
        pad_id=tokenizer.pad_id,
        rows=choices,
    )


def score_choice(
    data: TaskData, features: Features, outputs: Mapping[str, Sequence[np.ndarray]]
) -> Metrics:
    import numpy as np

    pred = np.asarray([int(np.asarray(x).reshape(-1).argmax()) for x in outputs["logits"]])
    gold = np.asarray([ex.label for ex in data.examples])
    correct = (pred == gold).astype(np.float64)
    return Metrics(
        kind=TaskKind.MULTIPLE_CHOICE,
        values={"accuracy": float(correct.mean())},
        primary="accuracy",
        examples=len(gold),
        predictions=[int(p) for p in pred],
        resample=lambda idx: {"accuracy": correct[idx].mean(axis=1)},
    )


def read_lines(path: Path, text: str) -> TaskData:
    """Plain text for masked LM: one text per non-empty line."""
    out = [
        TextExample(line.strip(), n) for n, line in enumerate(text.splitlines(), 1) if line.strip()
    ]
    if not out:
        raise DataError(f"{path}: no text lines")
    return TaskData(kind=TaskKind.MASKED_LM, path=path, format="text", examples=out)


def encode_masked(
    data: TaskData, tokenizer: AlbertTokenizer, max_len: int, seed: int = MASK_SEED
) -> Features:
    """Each line's pieces (truncated to ``max_len``) with 15 % of them (at least one)
    replaced by ``[MASK]`` at positions drawn with ``seed``: the same masks every run."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ids_l, types_l, labels = [], [], []
    for ex in data.examples:
        pieces = tokenizer.tokenize_ids(ex.text)[: max_len - 2] or [tokenizer.unk_id]
        k = max(1, round(MASK_RATE * len(pieces)))
        where = set(rng.choice(len(pieces), size=k, replace=False).tolist())
        ids = [tokenizer.cls_id] + [
            tokenizer.mask_id if i in where else p for i, p in enumerate(pieces)
        ]
        lab = [IGNORE] + [p if i in where else IGNORE for i, p in enumerate(pieces)]
        ids_l.append([*ids, tokenizer.sep_id])
        labels.append([*lab, IGNORE])
        types_l.append([0] * (len(pieces) + 2))
    return Features(
        kind=TaskKind.MASKED_LM,
        input_ids=ids_l,
        token_type_ids=types_l,
        example_index=list(range(len(ids_l))),
        labels=labels,
        pad_id=tokenizer.pad_id,
    )


def score_masked(
    data: TaskData, features: Features, outputs: Mapping[str, Sequence[np.ndarray]]
) -> Metrics:
    """Masked-token accuracy, pooled over every masked piece."""
    import numpy as np

    name = "logits" if "logits" in outputs else "prediction_logits"
    stats = np.zeros((len(data.examples), 2))
    preds = []
    for f, logits in enumerate(outputs[name]):
        lab = np.asarray(features.labels[f])
        pred = np.asarray(logits).argmax(-1)
        m = lab != IGNORE
        stats[features.example_index[f]] += ((pred[m] == lab[m]).sum(), m.sum())
        preds.append(pred[m].tolist())

    def resample(idx: np.ndarray) -> dict[str, np.ndarray]:
        s = stats[idx].sum(axis=1)
        return {"masked_accuracy": s[:, 0] / np.maximum(s[:, 1], 1)}

    return Metrics(
        kind=TaskKind.MASKED_LM,
        values={"masked_accuracy": float(stats[:, 0].sum() / max(stats[:, 1].sum(), 1))},
        primary="masked_accuracy",
        examples=len(data.examples),
        predictions=preds,
        resample=resample,
        notes={"masked_tokens": int(stats[:, 1].sum())},
    )


class ChoiceTask(Task):
    """Multiple choice: SWAG .csv or RACE .json/.jsonl, scored in accuracy."""

    kind = TaskKind.MULTIPLE_CHOICE
    name = "SWAG/RACE"
    unit = "questions"
    choices = True

    def looks(self, sniff: Sniff) -> bool:
        if sniff.json:
            return looks_like_race(sniff.obj)
        return looks_like_swag(sniff.lines[0])

    def read(
        self,
        path: Path,
        text: str,
        *,
        label2id: Mapping[str, int] | None = None,
        num_labels: int | None = None,
        finetuning_task: str | None = None,
    ) -> TaskData:
        if text.lstrip()[:1] in "{[":
            return read_race(path, parse_json_or_lines(path, text))
        return read_swag(path, text)

    def encode(
        self, data: TaskData, tokenizer: Any, max_len: int, stride: int | None = None
    ) -> Features:
        return encode_choice(data, tokenizer, max_len)

    def score(
        self,
        data: TaskData,
        features: Features,
        outputs: Mapping[str, Sequence[np.ndarray]],
        **options: Any,
    ) -> Metrics:
        return score_choice(data, features, outputs)

    def describe(self, data: TaskData) -> str:
        return f"{len(data.examples)} questions ({data.format})"


class MaskedLMTask(Task):
    """Masked-token accuracy on plain text: read only when asked for (any text file would
    otherwise pass), so it recognises no file by itself."""

    kind = TaskKind.MASKED_LM
    name = "plain text"
    unit = "lines of text"
    per_token = True
    detectable = False

    def read(
        self,
        path: Path,
        text: str,
        *,
        label2id: Mapping[str, int] | None = None,
        num_labels: int | None = None,
        finetuning_task: str | None = None,
    ) -> TaskData:
        return read_lines(path, text)

    def encode(
        self, data: TaskData, tokenizer: Any, max_len: int, stride: int | None = None
    ) -> Features:
        return encode_masked(data, tokenizer, max_len)

    def score(
        self,
        data: TaskData,
        features: Features,
        outputs: Mapping[str, Sequence[np.ndarray]],
        **options: Any,
    ) -> Metrics:
        return score_masked(data, features, outputs)
