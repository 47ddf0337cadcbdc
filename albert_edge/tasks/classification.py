"""Sequence classification: GLUE-style .tsv files, single sentences or pairs.

Columns are found by the names GLUE writes in its headers, so a pair file is read as a
pair and never as its first sentence alone (which scores a different task). The metric follows GLUE: accuracy,
F1 of class 1 besides for MRPC and QQP, Matthews correlation for CoLA, Pearson and
Spearman correlation for a one-label regression head (STS-B).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.tasks.files import DataError, tsv_rows
from albert_edge.tasks.types import (
    EXPECTED_FORMAT,
    ClassificationExample,
    Features,
    Metrics,
    Sniff,
    Task,
    TaskData,
    TaskKind,
)

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.tokenizer import AlbertTokenizer

# Pairs of text columns by header name (lower-cased), most specific first, with the GLUE
# task they identify where the metric depends on it.
PAIR_COLUMNS: tuple[tuple[str, str, str | None], ...] = (
    ("#1 string", "#2 string", "mrpc"),
    ("question1", "question2", "qqp"),
    ("question", "sentence", "qnli"),
    ("premise", "hypothesis", None),
    ("sentence1", "sentence2", None),
)
# Single-sentence text columns (SST-2's "sentence"; copies that say "content"/"text").
TEXT_COLUMNS = ("sentence", "content", "text", "sentence1")
# Label columns by header name, in order of preference (MNLI dev has label1..5 and
# gold_label: the gold label is the one).
LABEL_COLUMNS = ("label", "gold_label", "quality", "is_duplicate", "score")
# Conventional class orders (HF datasets' GLUE), used when the caller gives no label2id.
KNOWN_ORDERS: tuple[tuple[str, ...], ...] = (
    ("entailment", "not_entailment"),
    ("entailment", "neutral", "contradiction"),
    ("not_duplicate", "duplicate"),
    ("negative", "positive"),
)


def is_header(cells: Sequence[str]) -> bool:
    """Whether a first row names GLUE classification columns."""
    h = [c.strip().lower() for c in cells]
    return any(c in LABEL_COLUMNS for c in h) and (
        any(c in TEXT_COLUMNS for c in h) or any(a in h and b in h for a, b, _ in PAIR_COLUMNS)
    )


def looks_like_cola(rows: Sequence[Sequence[str]]) -> bool:
    """GLUE's CoLA files have no header: ``source, label, original mark, sentence``."""
    first = rows[0]
    return (
        len(first) == 4
        and first[1].strip() in ("0", "1")
        and first[2].strip() in ("", "*", "?", "??")
    )


def text_columns(header: Sequence[str]) -> tuple[list[int], str | None, bool]:
    """(indices of the text columns, GLUE task they identify, is a pair)."""
    h = [c.strip().lower() for c in header]
    for a, b, glue in PAIR_COLUMNS:
        if a in h and b in h:
            return [h.index(a), h.index(b)], glue, True
    for name in TEXT_COLUMNS:
        if name in h:
            return [h.index(name)], ("sst2" if name == "sentence" else None), False
    return [], None, False


def read_classification(
    path: Path,
    text: str,
    *,
    label2id: Mapping[str, int] | None = None,
    num_labels: int | None = None,
    finetuning_task: str | None = None,
) -> TaskData:
    """A GLUE-style .tsv: the header names the label and text columns (see the module
    docstring); CoLA's header-less files are recognised by their columns.

    ``finetuning_task``: the model's record of its input (config.json): a pair file for a
    single-sentence model, or the reverse, is refused from the header (:func:`refuse_input`)
    before any label is judged against the model's classes.

    ``label2id``: the model's label names → ids (config.json); a string label is mapped
    through it (case-insensitively) and one it lacks is refused with its line. Integer
    labels are ids; with ``num_labels`` an id outside ``range(num_labels)`` is refused.
    ``num_labels == 1`` (a regression head) reads the label as a number.
    """
    rows = tsv_rows(text)
    if looks_like_cola(rows):
        header, body, start = ["source", "label", "mark", "sentence"], rows, 1
        glue: str | None = "cola"
    else:
        header, body, start = rows[0], rows[1:], 2
        glue = None
    h = [c.strip().lower() for c in header]
    label_col = next((h.index(c) for c in LABEL_COLUMNS if c in h), None)
    cols, col_glue, pair = text_columns(header)
    glue = glue or col_glue
    if label_col is not None and h[label_col] == "score":
        glue = "stsb"
    if label_col is None or not cols:
        found = ", ".join(repr(c[:30]) for c in header[:6]) or "nothing"
        sep = (
            " (comma separated? it must be tab separated)"
            if "," in (header[0] if header else "")
            else ""
        )
        raise DataError(
            f"{path}: expected {EXPECTED_FORMAT[TaskKind.CLASSIFICATION]}, tab separated; "
            f"the first line has {found}{sep}"
        )
    if finetuning_task is not None:  # the input form first: its labels are another task's
        refuse_input(path, pair, tuple(header[c].strip() for c in cols), finetuning_task)
    regression = num_labels == 1 or (num_labels is None and glue == "stsb")
    raw: list[tuple[int, str, str | None, str]] = []
    for n, row in enumerate(body, start=start):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != len(header):  # a stray tab would silently cut the sentence short
            raise DataError(
                f"{path}:{n}: row has {len(row)} tab-separated columns but the header has "
                f"{len(header)}; remove the extra tabs (a tab inside a sentence?)"
            )
        second = row[cols[1]] if pair else None
        raw.append((n, row[cols[0]], second, row[label_col].strip()))
    if not raw:
        raise DataError(f"{path}: no labelled rows after the header")
    names, examples = _labels(path, raw, label2id, num_labels, regression)
    return TaskData(
        kind=TaskKind.CLASSIFICATION,
        path=path,
        format="cola-tsv" if glue == "cola" and start == 1 else "glue-tsv",
        examples=examples,
        label_names=names,
        glue_task=glue,
        pair=pair,
        regression=regression,
        columns=tuple(header[c].strip() for c in cols),
    )


def _labels(
    path: Path,
    raw: list[tuple[int, str, str | None, str]],
    label2id: Mapping[str, int] | None,
    num_labels: int | None,
    regression: bool,
) -> tuple[tuple[str, ...], list[ClassificationExample]]:
    """Each row's label as an id (or a float for regression), and the class names."""
    if regression:
        out = []
        for n, a, b, lab in raw:
            try:
                value = float(lab)
            except ValueError:
                raise DataError(
                    f"{path}:{n}: label {lab[:40]!r} is not a number; a one-label "
                    "(regression) model scores numeric labels, as STS-B's 'score'"
                ) from None
            out.append(ClassificationExample(a, b, value, n))
        return (), out
    all_int = all(_is_int(lab) for _, _, _, lab in raw)
    model = dict(label2id or {})
    # transformers' default names (LABEL_0, ...) carry no class names: ids only.
    named = bool(model) and not all(k.upper().startswith("LABEL_") for k in model)
    if all_int and not (named and all(lab in model for _, _, _, lab in raw)):
        limit = num_labels if num_labels is not None else (len(model) or None)
        out = []
        for n, a, b, lab in raw:
            value = int(lab)
            if limit is not None and not 0 <= value < limit:
                raise DataError(
                    f"{path}:{n}: label {value} is not one of the model's class ids "
                    f"0..{limit - 1}; pass data for the task this model was trained on"
                )
            out.append(ClassificationExample(a, b, value, n))
        count = limit if limit is not None else max(int(e.label) for e in out) + 1
        id2name = {v: k for k, v in model.items()} if named else {}
        return tuple(id2name.get(i, str(i)) for i in range(count)), out
    if named:
        lower = {k.lower(): v for k, v in model.items()}
        limit = num_labels if num_labels is not None else max(model.values()) + 1
        # a file of class ids with a stray name (or of names with a stray id) reads each
        # row by what it is, so the row the model cannot read is the one blamed
        out = []
        for n, a, b, lab in raw:
            i = model.get(lab, lower.get(lab.lower()))
            if i is None and _is_int(lab) and 0 <= int(lab) < limit:
                i = int(lab)
            if i is None:
                known = ", ".join(sorted(model, key=lambda k: model[k]))
                raise DataError(
                    f"{path}:{n}: label {lab[:40]!r} is not one of the model's labels ({known}, "
                    f"config.json label2id) nor a class id 0..{limit - 1}; pass data for the "
                    "task this model was trained on"
                )
            out.append(ClassificationExample(a, b, i, n))
        id2name = {v: k for k, v in model.items()}
        return tuple(id2name.get(i, str(i)) for i in range(max(id2name) + 1)), out
    if model:  # string labels, but the model's classes have no names
        n, _, _, lab = next(r for r in raw if not _is_int(r[3]))
        raise DataError(
            f"{path}:{n}: label {lab[:40]!r} is a name, but the model's config.json names its "
            f"classes only {', '.join(sorted(model))}; write class ids in the label column or "
            "set id2label/label2id in config.json"
        )
    seen = sorted({lab for _, _, _, lab in raw})
    names = next((o for o in KNOWN_ORDERS if set(seen) <= set(o)), tuple(seen))
    ids = {name: i for i, name in enumerate(names)}
    return names, [ClassificationExample(a, b, ids[lab], n) for n, a, b, lab in raw]


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def encode_classification(data: TaskData, tokenizer: AlbertTokenizer, max_len: int) -> Features:
    """``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]``, truncated longest-first to
    ``max_len`` as transformers truncates pairs."""
    ids, types, labels = [], [], []
    for ex in data.examples:
        enc = tokenizer.encode(ex.text, ex.text_pair, max_length=max_len, padding="none")
        ids.append(enc.input_ids[0])
        types.append(enc.token_type_ids[0])
        labels.append(ex.label)
    return Features(
        kind=TaskKind.CLASSIFICATION,
        input_ids=ids,
        token_type_ids=types,
        example_index=list(range(len(ids))),
        labels=labels,
        pad_id=tokenizer.pad_id,
    )


def score_classification(
    data: TaskData, features: Features, outputs: Mapping[str, Sequence[np.ndarray]]
) -> Metrics:
    """Accuracy (and GLUE's F1 / Matthews) from ``logits``; Pearson/Spearman for a
    regression head. sklearn and scipy compute the headline values; the bootstrap
    resamples recompute them from per-example counts (the same numbers)."""
    import numpy as np

    logits = np.stack([np.asarray(x, dtype=np.float64) for x in outputs["logits"]])
    gold = np.asarray([ex.label for ex in data.examples], dtype=np.float64)
    if data.regression or logits.shape[-1] == 1:
        return _score_regression(logits.reshape(len(gold), -1)[:, 0], gold)
    pred = logits.argmax(-1)
    gold_i = gold.astype(np.int64)
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    values = {"accuracy": float(accuracy_score(gold_i, pred))}
    primary = "accuracy"
    # per-example counts: correct, tp, fp, fn, tn of class 1
    correct = pred == gold_i
    tp = (pred == 1) & (gold_i == 1)
    fp = (pred == 1) & (gold_i != 1)
    fn = (pred != 1) & (gold_i == 1)
    tn = (pred != 1) & (gold_i != 1)
    stats = np.stack([correct, tp, fp, fn, tn], axis=1).astype(np.float64)
    names = ["accuracy"]
    if data.glue_task in ("mrpc", "qqp"):
        values["f1"] = float(f1_score(gold_i, pred, pos_label=1, average="binary", zero_division=0))
        names.append("f1")
    if data.glue_task == "cola":
        values["matthews"] = float(matthews_corrcoef(gold_i, pred))
        names.append("matthews")
        primary = "matthews"

    def resample(idx: np.ndarray) -> dict[str, np.ndarray]:
        s = stats[idx].sum(axis=1)  # [R, 5]
        n = idx.shape[1]
        out = {"accuracy": s[:, 0] / n}
        t, p_, f_, t_n = s[:, 1], s[:, 2], s[:, 3], s[:, 4]
        if "f1" in names:
            den = 2 * t + p_ + f_
            out["f1"] = np.divide(2 * t, den, out=np.zeros_like(den), where=den > 0)
        if "matthews" in names:
            den = np.sqrt((t + p_) * (t + f_) * (t_n + p_) * (t_n + f_))
            num = t * t_n - p_ * f_
            out["matthews"] = np.divide(num, den, out=np.zeros_like(den), where=den > 0)
        return out

    return Metrics(
        kind=TaskKind.CLASSIFICATION,
        values=values,
        primary=primary,
        examples=len(gold),
        predictions=[int(p) for p in pred],
        resample=resample,
    )


def _score_regression(pred: np.ndarray, gold: np.ndarray) -> Metrics:
    import numpy as np
    from scipy.stats import pearsonr, spearmanr

    def corr(p: np.ndarray, g: np.ndarray) -> tuple[float, float]:
        if np.ptp(p) == 0 or np.ptp(g) == 0:
            return 0.0, 0.0  # a constant has no correlation (scipy warns and gives NaN)
        return float(pearsonr(p, g)[0]), float(spearmanr(p, g)[0])

    pearson, spearman = corr(pred, gold)

    def resample(idx: np.ndarray) -> dict[str, np.ndarray]:
        pairs = [corr(pred[row], gold[row]) for row in idx]
        return {
            "pearson": np.asarray([a for a, _ in pairs]),
            "spearman": np.asarray([b for _, b in pairs]),
        }

    return Metrics(
        kind=TaskKind.CLASSIFICATION,
        values={"pearson": pearson, "spearman": spearman},
        primary="pearson",
        examples=len(gold),
        predictions=[float(p) for p in pred],
        resample=resample,
    )


# config.json ``finetuning_task`` values that say which input a classifier reads: GLUE's
# task names, and the two forms ``train`` records for a file that names no GLUE task.
SINGLE_TASKS = frozenset({"sst2", "cola", "single", "singlesentence"})
PAIR_TASKS = frozenset(
    {"mrpc", "qqp", "qnli", "rte", "wnli", "mnli", "stsb", "pair", "sentencepair"}
)
SINGLE_SENTENCE = "single-sentence"
SENTENCE_PAIR = "sentence-pair"


def reads_pairs(finetuning_task: str | None) -> bool | None:
    """Whether a classifier whose config.json records ``finetuning_task`` reads sentence
    pairs (True), single sentences (False), or None where the record says neither (no
    record: a checkpoint from before albert-edge recorded it, or another task's name)."""
    task = str(finetuning_task or "").lower().replace("-", "").replace("_", "")
    if task in SINGLE_TASKS:
        return False
    if task in PAIR_TASKS:
        return True
    return None


def input_record(data: TaskData) -> str:
    """The ``finetuning_task`` a classifier trained on ``data`` records in config.json: the
    GLUE task its columns name where that task reads the same input (``sst2``, ``mrpc``,
    ``qnli``, ...), else ``single-sentence`` or ``sentence-pair``. Every command that scores
    data reads it back (:func:`reads_pairs`) and refuses the other input before the model
    loads (docs/inputs.md, "What a checkpoint reads")."""
    glue = data.glue_task
    if glue is not None and reads_pairs(glue) is data.pair:
        return glue
    return SENTENCE_PAIR if data.pair else SINGLE_SENTENCE


def header_input_record(header: Sequence[str]) -> str:
    """:func:`input_record` of a GLUE-style .tsv from its header alone (the SST-2 recipe
    reads (label, sentence) rows, not :class:`TaskData`)."""
    _, glue, pair = text_columns(header)
    if glue is not None and reads_pairs(glue) is pair:
        return glue
    return SENTENCE_PAIR if pair else SINGLE_SENTENCE


def check_fits_classifier(data: TaskData, num_labels: int, finetuning_task: str | None) -> None:
    """Refuse data a classifier cannot be scored on, naming the file: a regression file for
    a classifier, a pair file for a model fine-tuned on single sentences, or single
    sentences for a pair model. config.json's ``finetuning_task`` tells which
    (:func:`reads_pairs`): a GLUE task name (``sst2``, ``mrpc``, ...), or
    ``single-sentence`` / ``sentence-pair``; a checkpoint without it is not judged."""
    refuse_input(data.path, data.pair, data.columns, finetuning_task)
    if data.glue_task == "stsb" and num_labels != 1:
        raise DataError(
            f"{data.path}: STS-B style similarity scores, but the model has {num_labels} "
            "classes; a one-label (regression) head scores them"
        )


def refuse_input(
    path: Path, pair: bool, columns: Sequence[str], finetuning_task: str | None
) -> None:
    """One line naming ``path`` and the fix where its input form (single sentences or
    pairs) is not the one the model records (:func:`reads_pairs`); nothing without a
    record."""
    pairs = reads_pairs(finetuning_task)
    if pair and pairs is False:
        raise DataError(
            f"{path}: a sentence-pair file ({'/'.join(columns)}), but the model was "
            f"fine-tuned on {finetuning_task} (single sentences), as its config.json records; "
            "pass a single-sentence file (label and sentence columns, as SST-2's)"
        )
    if not pair and pairs is True:
        raise DataError(
            f"{path}: single sentences, but the model was fine-tuned on {finetuning_task} "
            "(sentence pairs), as its config.json records; pass a pair file "
            "(sentence1/sentence2 columns, as RTE's)"
        )


class ClassificationTask(Task):
    """Sequence classification, single sentences or pairs (GLUE-style .tsv)."""

    kind = TaskKind.CLASSIFICATION
    name = "a GLUE-style .tsv"

    def looks(self, sniff: Sniff) -> bool:
        if sniff.json:
            return False
        first = sniff.lines[0]
        return is_header(first.split("\t")) or looks_like_cola([first.split("\t")])

    def read(
        self,
        path: Path,
        text: str,
        *,
        label2id: Mapping[str, int] | None = None,
        num_labels: int | None = None,
        finetuning_task: str | None = None,
    ) -> TaskData:
        return read_classification(
            path, text, label2id=label2id, num_labels=num_labels, finetuning_task=finetuning_task
        )

    def check_fits(
        self, data: TaskData, num_labels: int | None, finetuning_task: str | None
    ) -> None:
        if num_labels is not None:
            check_fits_classifier(data, num_labels, finetuning_task)

    def encode(
        self, data: TaskData, tokenizer: Any, max_len: int, stride: int | None = None
    ) -> Features:
        return encode_classification(data, tokenizer, max_len)

    def score(
        self,
        data: TaskData,
        features: Features,
        outputs: Mapping[str, Sequence[np.ndarray]],
        **options: Any,
    ) -> Metrics:
        return score_classification(data, features, outputs)

    def describe(self, data: TaskData) -> str:
        what = "sentence pairs" if data.pair else "sentences"
        cols = "/".join(data.columns)
        glue = ", " + data.glue_task if data.glue_task else ""
        return f"{len(data.examples)} {what} ({cols}{glue})"

    def learned_nothing(
        self, metrics: Metrics, id2label: Mapping[Any, Any] | None, rows: str
    ) -> str | None:
        from albert_edge.tasks.learned import one_class_note

        preds = metrics.predictions
        if not preds or not all(isinstance(p, int) and not isinstance(p, bool) for p in preds):
            return None  # a regression (STS-B) predicts numbers, not classes
        classes = set(preds)
        if len(classes) != 1:
            return None
        (only,) = classes
        accuracy = metrics.values.get("accuracy", 0.0)
        return one_class_note(int(metrics.examples), only, accuracy, id2label, rows=rows)
