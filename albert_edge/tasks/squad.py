"""Extractive question answering: SQuAD v1.1 and v2.0, scored as the official script does.

Encoding follows the reference implementations (google-research/albert's SQuAD code,
transformers' ``run_qa.py``): the context is split on whitespace into words and its
pieces are those of the whole context (each word tokenized with the space before it,
equal to tokenizing the paragraph at once), each piece knowing its word; a
context longer than the model's window is cut into overlapping windows (``stride``
tokens of overlap), each ``[CLS] question [SEP] window [SEP]``. Post-processing takes
the best span over all windows: the ``n_best`` highest start and end logits of each
window, kept where both fall in the context, the end is not before the start, the span
is at most ``max_answer_length`` tokens and the start lies in the window where it has
the most context; the span's score is start + end logit, and its text runs from the
start word to the end word of the context. SQuAD v2.0's null answer scores the [CLS]
logits (the smallest over windows) and is predicted where it beats the best span by
more than a threshold, chosen to maximise F1 on held-out questions unless given.

EM and F1 are the official ones: answers normalised (lower case, punctuation and the
articles a/an/the removed, whitespace collapsed), token-overlap F1, the maximum over
the reference answers; an unanswerable question's only reference is the empty answer.
"""

from __future__ import annotations

import collections
import json
import re
import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.tasks.files import DataError
from albert_edge.tasks.types import (
    EXPECTED_FORMAT,
    Features,
    Metrics,
    QAExample,
    Sniff,
    Task,
    TaskData,
    TaskKind,
)

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.tokenizer import AlbertTokenizer

MAX_QUERY_LENGTH = 64
DEFAULT_STRIDE = 128
N_BEST = 20
MAX_ANSWER_LENGTH = 30


def looks_like_squad(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("data"), list)
        and any(isinstance(a, dict) and "paragraphs" in a for a in obj["data"][:5])
    )


def _is_space(c: str) -> bool:
    return c in " \t\r\n" or ord(c) == 0x202F


def split_words(context: str) -> tuple[list[str], list[int]]:
    """Whitespace-separated words of ``context`` and each one's character offset."""
    words: list[str] = []
    starts: list[int] = []
    prev_space = True
    for i, c in enumerate(context):
        if _is_space(c):
            prev_space = True
            continue
        if prev_space:
            words.append(c)
            starts.append(i)
        else:
            words[-1] += c
        prev_space = False
    return words, starts


def read_squad(path: Path, obj: Any) -> TaskData:
    """Questions of a SQuAD v1.1 / v2.0 JSON. An answer whose ``answer_start`` does not
    point at its ``text`` in the context is refused with the question's id."""
    if not looks_like_squad(obj):
        raise DataError(f"{path}: expected {EXPECTED_FORMAT[TaskKind.QUESTION_ANSWERING]}")
    v2 = str(obj.get("version", "")).startswith("v2") or any(
        "is_impossible" in q
        for a in obj["data"]
        for p in a.get("paragraphs", [])
        for q in p.get("qas", [])
    )
    examples: list[QAExample] = []
    for article in obj["data"]:
        for para in article.get("paragraphs", []):
            context = para.get("context")
            if not isinstance(context, str):
                raise DataError(
                    f"{path}: a paragraph without a 'context' string; expected SQuAD JSON"
                )
            words, starts = split_words(context)
            for qa in para.get("qas", []):
                qid = str(qa.get("id", len(examples)))
                impossible = bool(qa.get("is_impossible", False))
                answers = []
                for ans in [] if impossible else qa.get("answers", []):
                    text, start = ans.get("text"), ans.get("answer_start")
                    if not isinstance(text, str) or not isinstance(start, int):
                        raise DataError(
                            f"{path}: question {qid}: an answer needs 'text' and an integer "
                            "'answer_start'"
                        )
                    if start < 0 or context[start : start + len(text)] != text or not text:
                        raise DataError(
                            f"{path}: question {qid}: answer {text[:40]!r} is not in its context "
                            f"at answer_start {start}; fix the offset (characters into 'context')"
                        )
                    answers.append((text, start))
                if not impossible and not answers:
                    raise DataError(
                        f"{path}: question {qid} has no answers and is not marked "
                        "is_impossible; scoring needs reference answers"
                    )
                question = qa.get("question")
                if not isinstance(question, str):
                    raise DataError(f"{path}: question {qid} has no 'question' text")
                examples.append(
                    QAExample(
                        qid,
                        question,
                        context,
                        tuple(answers),
                        impossible,
                        tuple(words),
                        tuple(starts),
                    )
                )
    if not examples:
        raise DataError(f"{path}: no questions in this SQuAD file")
    return TaskData(
        kind=TaskKind.QUESTION_ANSWERING,
        path=path,
        format="squad-v2.0" if v2 else "squad-v1.1",
        examples=examples,
    )


def _word_of(ex: QAExample, char: int) -> int:
    """The word holding character ``char`` (the previous word for a space)."""
    import bisect

    return max(0, bisect.bisect_right(ex.word_starts, char) - 1)


def encode_squad(
    data: TaskData,
    tokenizer: AlbertTokenizer,
    max_len: int,
    stride: int | None = None,
    max_query_length: int = MAX_QUERY_LENGTH,
) -> Features:
    """Windows over each context (see the module docstring). ``stride``: tokens of overlap
    between consecutive windows, default 128 and at most half a window. Training labels
    are the first answer's (start, end) tokens where the window holds it, else (0, 0)."""
    ids_l, types_l, labels, word_ids, max_ctx, owners = [], [], [], [], [], []
    pieces_of: dict[str, tuple[list[int], list[int]]] = {}  # a context's questions share it
    for e, ex in enumerate(data.examples):
        q = tokenizer.tokenize_ids(ex.question)[: max(1, min(max_query_length, max_len // 2))]
        if ex.context not in pieces_of:
            doc: list[int] = []
            tok_word: list[int] = []
            for w, word in enumerate(ex.words):
                # a word after the first is tokenized with the space before it, so the
                # pieces are those of the whole context (a word opening with a piece the
                # tokenizer splits off, "(" or '"', keeps the lone "▁" before it)
                text = word if w == 0 else " " + word
                pieces = tokenizer.tokenize_ids(text) or [tokenizer.unk_id]
                doc += pieces
                tok_word += [w] * len(pieces)
            pieces_of[ex.context] = (doc, tok_word)
        doc, tok_word = pieces_of[ex.context]
        window = max_len - len(q) - 3
        if window < 1:
            raise DataError(
                f"{data.path}: question {ex.id}: the question takes {len(q)} of "
                f"{max_len} tokens; no room for its context"
            )
        overlap = min(DEFAULT_STRIDE if stride is None else stride, window // 2)
        step = max(1, window - overlap)
        spans: list[tuple[int, int]] = []
        start = 0
        while True:
            length = min(window, len(doc) - start)
            spans.append((start, length))
            if start + length >= len(doc):
                break
            start += step
        ans_tokens = _answer_tokens(ex, tok_word)
        home = _best_windows(spans, len(doc))
        for k, (s, length) in enumerate(spans):
            ids = [tokenizer.cls_id, *q, tokenizer.sep_id]
            offset = len(ids)
            ids += [*doc[s : s + length], tokenizer.sep_id]
            types = [0] * offset + [1] * (length + 1)
            wid = [-1] * offset + tok_word[s : s + length] + [-1]
            best = [False] * offset
            best += [home[s + i] == k for i in range(length)] + [False]
            label = (0, 0)
            if ans_tokens is not None:
                a, b = ans_tokens
                if s <= a and b < s + length:
                    label = (a - s + offset, b - s + offset)
            ids_l.append(ids)
            types_l.append(types)
            labels.append(label)
            word_ids.append(wid)
            max_ctx.append(best)
            owners.append(e)
    return Features(
        kind=TaskKind.QUESTION_ANSWERING,
        input_ids=ids_l,
        token_type_ids=types_l,
        example_index=owners,
        labels=labels,
        pad_id=tokenizer.pad_id,
        word_ids=word_ids,
        max_context=max_ctx,
    )


def _answer_tokens(ex: QAExample, tok_word: Sequence[int]) -> tuple[int, int] | None:
    """First and last context token of the first answer, None if unanswerable."""
    if not ex.answers:
        return None
    text, start = ex.answers[0]
    first_w, last_w = _word_of(ex, start), _word_of(ex, start + len(text) - 1)
    first = tok_word.index(first_w)
    last = len(tok_word) - 1 - tok_word[::-1].index(last_w)
    return first, last


def _best_windows(spans: Sequence[tuple[int, int]], n: int) -> list[int]:
    """For each of ``n`` context tokens, the window where it has the most context (BERT's
    ``_check_is_max_context``: the largest min of left and right context, plus a small
    bias to longer windows; the first such window on a tie)."""
    best = [-1] * n
    score = [0.0] * n
    for k, (s, length) in enumerate(spans):
        end = s + length - 1
        for pos in range(s, s + length):
            v = min(pos - s, end - pos) + 0.01 * length
            if best[pos] < 0 or v > score[pos]:
                best[pos], score[pos] = k, v
    return best


def best_spans(
    data: TaskData,
    features: Features,
    outputs: Mapping[str, Sequence[np.ndarray]],
    *,
    n_best: int = N_BEST,
    max_answer_length: int = MAX_ANSWER_LENGTH,
) -> list[tuple[str, float, float]]:
    """Per example: (best span's text, its score, the null score); text "" and score
    -inf where no window has a valid span."""
    import numpy as np

    best: list[tuple[str, float, float]] = [("", -np.inf, np.inf)] * len(data.examples)
    for f in range(len(features)):
        e = features.example_index[f]
        ex = data.examples[e]
        start = np.asarray(outputs["start_logits"][f], dtype=np.float64)
        end = np.asarray(outputs["end_logits"][f], dtype=np.float64)
        wid, ctx = features.word_ids[f], features.max_context[f]
        text, score, null = best[e]
        null = min(null, float(start[0] + end[0]))
        starts = np.argsort(-start, kind="stable")[:n_best]
        ends = np.argsort(-end, kind="stable")[:n_best]
        for s in starts:
            if wid[s] < 0 or not ctx[s]:
                continue
            for t in ends:
                if wid[t] < 0 or t < s or t - s + 1 > max_answer_length:
                    continue
                cand = float(start[s] + end[t])
                if cand > score:
                    score, text = cand, ex.word_span_text(wid[s], wid[t])
        best[e] = (text, score, null)
    return best


# --- the official evaluation (SQuAD v2.0 evaluate script; v1.1's agrees on answerable
# questions) -------------------------------------------------------------------------


def normalize_answer(s: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def exact_match(prediction: str, truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(truth))


def f1(prediction: str, truth: str) -> float:
    pred = normalize_answer(prediction).split()
    gold = normalize_answer(truth).split()
    if not pred or not gold:
        return float(pred == gold)
    common = collections.Counter(pred) & collections.Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def answer_scores(ex: QAExample, prediction: str) -> tuple[float, float]:
    """(EM, F1) of ``prediction``: the maximum over ``ex``'s references."""
    truths = [t for t, _ in ex.answers] or [""]
    return max(exact_match(prediction, t) for t in truths), max(f1(prediction, t) for t in truths)


def held_out_split(n: int) -> tuple[list[int], list[int]]:
    """(questions a v2.0 null threshold is chosen on, questions it is scored on): the
    even-numbered and the odd-numbered ones, so both halves span every article."""
    return list(range(0, n, 2)), list(range(1, n, 2))


def choose_null_threshold(
    data: TaskData, spans: Sequence[tuple[str, float, float]], indices: Sequence[int]
) -> float:
    """The threshold on (null score − best span score) that maximises F1 over
    ``indices`` (the official script's best_f1_thresh): null is predicted above it."""
    import numpy as np

    diffs = np.asarray([spans[i][2] - spans[i][1] for i in indices], dtype=np.float64)
    span_f1 = np.asarray([answer_scores(data.examples[i], spans[i][0])[1] for i in indices])
    null_f1 = np.asarray([float(data.examples[i].is_impossible) for i in indices])
    if not len(diffs):
        return 0.0
    finite = np.where(np.isfinite(diffs), diffs, np.sign(diffs) * 1e30)
    order = np.argsort(finite, kind="stable")
    d = finite[order]
    # a threshold below every diff predicts null everywhere; each higher one answers the
    # questions whose diff is at most it
    total = float(null_f1.sum())
    best_total, best_thr = total, float(d[0]) - 1.0
    cur = total
    # predicting null iff diff > thr: with thr = d[j], questions order[: j + 1] answer
    for j, i in enumerate(order):
        cur += span_f1[i] - null_f1[i]
        if (j + 1 == len(d) or d[j + 1] > d[j]) and cur > best_total + 1e-12:
            best_total, best_thr = cur, float(d[j])
    return best_thr


def score_squad(
    data: TaskData,
    features: Features,
    outputs: Mapping[str, Sequence[np.ndarray]],
    *,
    null_threshold: float | None = None,
    eval_on: Sequence[int] | None = None,
    n_best: int = N_BEST,
    max_answer_length: int = MAX_ANSWER_LENGTH,
) -> Metrics:
    """Official EM and F1 (fractions), with HasAns/NoAns splits for v2.0.

    v2.0 without ``null_threshold``: the threshold is chosen on the even-numbered
    questions of these outputs and the metrics are the odd-numbered ones'
    (:func:`held_out_split`); ``eval_on`` scores a given subset instead.
    """
    import numpy as np

    spans = best_spans(data, features, outputs, n_best=n_best, max_answer_length=max_answer_length)
    v2 = data.format == "squad-v2.0"
    notes: dict[str, Any] = {}
    if v2:
        if null_threshold is None:
            choose, held = held_out_split(len(data.examples))
            null_threshold = choose_null_threshold(data, spans, choose)
            eval_on = held if eval_on is None else eval_on
            notes["null_threshold_chosen_on"] = f"{len(choose)} even-numbered questions"
        notes["null_threshold"] = null_threshold
    idx = list(range(len(data.examples))) if eval_on is None else list(eval_on)
    if not idx:
        raise DataError(f"{data.path}: no questions left to score")
    preds: list[str] = []
    for i in idx:
        text, score, null = spans[i]
        if v2 and null_threshold is not None and null - score > null_threshold:
            text = ""
        preds.append(text)
    em_f1 = np.asarray(
        [answer_scores(data.examples[i], p) for i, p in zip(idx, preds, strict=True)],
        dtype=np.float64,
    ).reshape(-1, 2)
    has = np.asarray([not data.examples[i].is_impossible for i in idx])
    values = {"exact_match": float(em_f1[:, 0].mean()), "f1": float(em_f1[:, 1].mean())}
    if v2:
        for name, mask in (("HasAns", has), ("NoAns", ~has)):
            if mask.any():
                values[f"{name}_exact"] = float(em_f1[mask, 0].mean())
                values[f"{name}_f1"] = float(em_f1[mask, 1].mean())

    def resample(rows: np.ndarray) -> dict[str, np.ndarray]:
        return {"exact_match": em_f1[rows, 0].mean(axis=1), "f1": em_f1[rows, 1].mean(axis=1)}

    return Metrics(
        kind=TaskKind.QUESTION_ANSWERING,
        values=values,
        primary="f1",
        examples=len(idx),
        predictions=preds,
        resample=resample,
        notes=notes,
    )


def load_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None


class QATask(Task):
    """Extractive question answering: SQuAD v1.1 / v2.0, scored in SQuAD's F1 and exact
    match over windows."""

    kind = TaskKind.QUESTION_ANSWERING
    name = "a SQuAD .json"
    unit = "questions"
    per_token = True

    def looks(self, sniff: Sniff) -> bool:
        return sniff.json and looks_like_squad(sniff.obj)

    def read(
        self,
        path: Path,
        text: str,
        *,
        label2id: Mapping[str, int] | None = None,
        num_labels: int | None = None,
        finetuning_task: str | None = None,
    ) -> TaskData:
        return read_squad(path, load_json(path, text))

    def encode(
        self, data: TaskData, tokenizer: Any, max_len: int, stride: int | None = None
    ) -> Features:
        return encode_squad(data, tokenizer, max_len, stride)

    def score(
        self,
        data: TaskData,
        features: Features,
        outputs: Mapping[str, Sequence[np.ndarray]],
        **options: Any,
    ) -> Metrics:
        return score_squad(data, features, outputs, **options)

    def score_options(
        self, data: TaskData, features: Features, reference: Mapping[str, Sequence[np.ndarray]]
    ) -> dict[str, Any]:
        """SQuAD v2.0: the null threshold chosen on the reference's outputs for the
        even-numbered questions, every model scored on the odd ones (as ``verify`` does)."""
        if data.format != "squad-v2.0":
            return {}
        choose, held = held_out_split(len(data.examples))
        thr = choose_null_threshold(data, best_spans(data, features, reference), choose)
        return {"null_threshold": thr, "eval_on": held}

    def describe(self, data: TaskData) -> str:
        return f"{len(data.examples)} questions ({data.format})"

    def learned_nothing(
        self, metrics: Metrics, id2label: Mapping[Any, Any] | None, rows: str
    ) -> str | None:
        if metrics.values.get("exact_match") != 0.0:
            return None
        n = int(metrics.examples)
        return f"learned nothing: exact match is 0 on the {n:,} {rows} questions (no answer exactly right)"
