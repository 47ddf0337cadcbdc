"""Word-level hidden states across tokenizers: where a teacher with its own tokenizer and
the student meet below ``[CLS]``.

Why: the teacher's logits (and its ``[CLS]``, Patient KD) say what the row means, not how
each word contributes to it; TinyBERT (Jiao et al. 2020) distils every position's hidden
state as well, which needs both models to read the same tokens. Two tokenizers
(MiniLM's WordPiece, ALBERT's SentencePiece) cut a word into different pieces, but both
keep the *words* of a whitespace-split text whole: a word is a run of pieces on either
side. So each model's state of a word is the mean of its pieces' states, and the
student's follows the teacher's word by word (:func:`~albert_edge.learn.distil.word_term`).

* Teacher side (:func:`teacher_word_states`): the teacher reads the row as its
  whitespace words (``is_split_into_words``: the same pieces as the plain text for a
  BERT tokenizer, whose first split is on whitespace); its ``word_ids`` give each
  piece's word.
* Student side (:func:`student_word_ids`): each word tokenized alone by the student's
  tokenizer (after a space, as it stands in the text: SentencePiece marks a word's start,
  and a lone ``.`` at a text's start is cut otherwise), concatenated, must equal the
  feature's pieces of the segment (truncation cuts its end); where it does not (a
  normalisation that joins or drops a word), the row has no word term rather than a
  wrong one.
* Layers (:func:`word_layers`): every second student layer, the last included, each
  paired with the teacher layer at the same relative depth
  (:func:`~albert_edge.learn.distil.layer_map`): half of TinyBERT's every-layer map, so
  the cached states take half the memory (a float16 ``[words, layers, H]`` per row).
* The teacher's states are standardised per layer and dimension over the transfer set
  (:func:`standardise`): a BERT's residual stream has a few dimensions tens of times
  larger than the rest, which would otherwise be all a squared error sees.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def word_layers(student_layers: int, teacher_layers: int) -> list[tuple[int, int]]:
    """(student layer, teacher layer) pairs, 1-based (0 is the embeddings): every second
    student layer ending at the last, each with its :func:`layer_map` teacher layer."""
    from albert_edge.learn.distil import layer_map

    mapped = layer_map(student_layers, teacher_layers)
    chosen = range(student_layers, 0, -2)
    return sorted((k, mapped[k - 1]) for k in chosen)


def teacher_word_states(
    word_ids: Sequence[int | None],
    sequence_ids: Sequence[int | None],
    states: Any,
    first_words: int,
    words: int,
) -> Any:
    """``[words, layers, H]`` float16: per word of the row (segment 0's words first, then
    segment 1's after ``first_words``), the mean of its pieces' states; ``states``: the
    row's ``[layers, T, H]`` hidden states. A word the teacher read as no piece (cut by its
    window, or a character its tokenizer drops) is NaN."""
    import numpy as np

    h = np.asarray(states, dtype=np.float32)
    out = np.zeros((words, h.shape[0], h.shape[-1]), dtype=np.float32)
    count = np.zeros(words, dtype=np.int64)
    for t, (w, s) in enumerate(zip(word_ids, sequence_ids, strict=True)):
        if w is None or s is None:
            continue
        g = w + (first_words if s == 1 else 0)
        if g < words:
            out[g] += h[:, t]
            count[g] += 1
    seen = count > 0
    out[seen] /= count[seen, None, None]
    out[~seen] = np.nan
    return out.astype(np.float16)


def student_word_ids(
    pieces: Sequence[int],
    types: Sequence[int],
    text: str,
    pair: str | None,
    tokenize: Callable[[str], list[int]],
) -> list[int] | None:
    """Per token of a student feature (``[CLS] a [SEP] (b [SEP])``), the whitespace word
    of the row it belongs to (segment 1's counted after segment 0's words), -1 for the
    special tokens; None where the words tokenized one by one do not give the feature's
    pieces (the row then has no word term). ``tokenize``: a text's piece ids (each word
    but a segment's first is given after a space, as it stands in the text)."""
    out = [-1] * len(pieces)
    a_len = sum(1 for t in types if t == 0) - 2
    segments = [(1, a_len, text, 0)]
    if pair is not None:
        segments.append((a_len + 2, len(pieces) - a_len - 3, pair, len(text.split())))
    for start, n, seg, offset in segments:
        got = pieces[start : start + n]
        ids: list[int] = []
        owner: list[int] = []
        for w, word in enumerate(seg.split()):
            if len(ids) >= n:
                break
            p = tokenize(word if w == 0 else " " + word)  # as it follows a space
            ids += p
            owner += [w + offset] * len(p)
        if ids[:n] != list(got):
            return None
        out[start : start + n] = owner[:n]
    return out


def word_tokenizer(tokenize: Callable[[str], list[int]]) -> Callable[[str], list[int]]:
    """``tokenize`` remembered per word: a transfer set repeats its vocabulary of a few
    ten thousand words over a million word positions."""
    seen: dict[str, list[int]] = {}

    def one(word: str) -> list[int]:
        got = seen.get(word)
        if got is None:
            got = seen[word] = list(tokenize(word))
        return got

    return one


def standardise(rows: Sequence[Any]) -> tuple[Any, Any]:
    """(mean, std), each ``[layers, H]`` float32, of the teacher's word states over
    ``rows`` (``[words, layers, H]`` each; NaN words skipped); std floored at 1e-6."""
    import numpy as np

    total = None
    square = None
    n = 0
    for r in rows:
        x = np.asarray(r, dtype=np.float32)
        x = x[~np.isnan(x).any(axis=(1, 2))]
        if not len(x):
            continue
        s, q = x.sum(0, dtype=np.float64), (x.astype(np.float64) ** 2).sum(0)
        total = s if total is None else total + s
        square = q if square is None else square + q
        n += len(x)
    if total is None or square is None:
        raise ValueError("no teacher word states")
    mean = total / n
    std = np.sqrt(np.maximum(square / n - mean**2, 0.0))
    return mean.astype(np.float32), np.maximum(std, 1e-6).astype(np.float32)
