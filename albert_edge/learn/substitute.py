"""New full sentences for a teacher to label: a training sentence with one of its phrases
swapped for another training phrase seen between the same two words.

Why: a file whose rows are the phrases of its sentences (SST-2: 67,349 rows from about
8,500 sentences) gives a distilled student few sentences to read, and its teacher's
accuracy on full sentences is what the student does not reach (the recipe's students
match their teacher on held-out phrases and trail it most on the longest sentences).
Masking or replacing single words (:class:`albert_edge.learn.teacher.Augment`) keeps
every sentence's structure; this makes new sentences of the same kind, the way SUB2 (Shi
et al. 2021) substitutes a sentence's constituents with others of the same type. The
type here is not known (the file holds no parse), so a phrase's context stands in for it:
the word before it and the word after it in its sentence (or the sentence's start and
end). A phrase seen in the same context in another sentence takes its place. The
sentences and phrases come from the rows themselves
(:func:`albert_edge.tasks.phrases.phrase_groups`): a file where no row contains another
gives nothing to swap, and none is made. The teacher labels every new sentence; a
swapped phrase that turns the sentence's sentiment is the point, not an error.

Only the rows given are read: the caller passes the rows it trains on, never its
held-out rows, so no held-out phrase reaches the transfer set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from albert_edge.tasks.phrases import phrase_groups, phrase_key

START, END = "\x02", "\x03"  # a phrase's context at its sentence's start / end


@dataclass(frozen=True)
class Substitute:
    """``per_sentence`` new sentences made from each training sentence (fewer where its
    phrases have few stand-ins), seeded."""

    per_sentence: int = 0
    seed: int = 13


@dataclass(frozen=True)
class _Slot:
    sentence: int
    start: int
    end: int
    context: tuple[str, str]


def _slots(texts: Sequence[str]) -> tuple[list[list[str]], list[list[_Slot]]]:
    """(each sentence's words, each sentence's phrases as slots): a slot is where one of
    the sentence's own phrases sits in it (its first occurrence), shorter than the
    sentence."""
    groups = phrase_groups(texts)
    members: dict[int, list[list[str]]] = {}
    for text, g in zip(texts, groups, strict=True):
        if g >= 0:
            members.setdefault(g, []).append(phrase_key(text).split())
    sentences: list[list[str]] = []
    slots: list[list[_Slot]] = []
    for g in sorted(members):
        words = max(members[g], key=len)
        padded = f" {' '.join(words)} "
        s = len(sentences)
        mine: list[_Slot] = []
        seen: set[tuple[str, ...]] = set()
        for phrase in members[g]:
            key = tuple(phrase)
            if not phrase or len(phrase) >= len(words) or key in seen:
                continue
            seen.add(key)
            at = padded.find(f" {' '.join(phrase)} ")
            if at < 0:  # found by phrase_groups, so present; kept as a guard
                continue
            i = padded.count(" ", 0, at + 1) - 1
            j = i + len(phrase)
            left = words[i - 1] if i > 0 else START
            right = words[j] if j < len(words) else END
            mine.append(_Slot(s, i, j, (left, right)))
        sentences.append(words)
        slots.append(mine)
    return sentences, slots


def substitutions(texts: Sequence[str], sub: Substitute) -> list[str]:
    """New sentences (in :func:`~albert_edge.tasks.phrases.phrase_key` form: lower-cased
    words joined by one space): up to ``sub.per_sentence`` from each sentence of
    ``texts``, each with one of its phrases swapped for another phrase seen in the same
    context (in practice another sentence's). Deterministic for a seed; none repeats a row
    of ``texts`` (case and spacing ignored) or another new sentence."""
    import numpy as np

    if sub.per_sentence <= 0:
        return []
    sentences, slots = _slots(texts)
    found: dict[tuple[str, str], dict[tuple[str, ...], None]] = {}  # ordered sets
    for mine in slots:
        for sl in mine:
            phrase = tuple(sentences[sl.sentence][sl.start : sl.end])
            found.setdefault(sl.context, {})[phrase] = None
    stand_ins = {c: list(p) for c, p in found.items()}
    have = {phrase_key(t) for t in texts}
    rng = np.random.default_rng(sub.seed)
    out: list[str] = []
    for words, mine in zip(sentences, slots, strict=True):
        usable = [sl for sl in mine if len(stand_ins[sl.context]) > 1]
        made = tries = 0
        while usable and made < sub.per_sentence and tries < 4 * sub.per_sentence:
            tries += 1
            sl = usable[int(rng.integers(len(usable)))]
            pool = stand_ins[sl.context]
            phrase = pool[int(rng.integers(len(pool)))]
            if list(phrase) == words[sl.start : sl.end]:
                continue
            new = " ".join([*words[: sl.start], *phrase, *words[sl.end :]])
            if new in have:
                continue
            have.add(new)
            out.append(new)
            made += 1
    return out
