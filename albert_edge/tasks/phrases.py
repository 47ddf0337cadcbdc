"""Which rows of a task file are phrases of which sentence: what a held-out draw groups.

SST-2's training rows are the phrases of its sentences, each beside the sentence it came
from; a split that draws rows alone holds out phrases whose sentence is trained on (88 %
of SST-2's held-out rows drawn that way occur inside a trained row). :func:`phrase_groups`
names each row's sentence so a draw can take whole sentences
(:meth:`albert_edge.learn.split.HeldOut.split`). Why here, in the task layer: it reads
only texts, and every lever that splits a task file's rows sits above this package.
"""

from __future__ import annotations

from collections.abc import Sequence


def phrase_key(text: str) -> str:
    """``text`` as its lower-cased words joined by one space: what containment compares
    (and what :mod:`albert_edge.learn.substitute` compares its new sentences by)."""
    return " ".join(text.lower().split())


def phrase_groups(texts: Sequence[str]) -> list[int]:
    """Per row, the group it is held out with, or -1 for a row always trained on.

    A *sentence* is a row whose words occur inside no other row's (word boundaries,
    case and spacing ignored); each sentence is a group with every row found inside it and
    inside no other sentence (its phrases, and its copies). A row found inside two or more
    sentences gets -1. Rows are read longest first, each checked only against the
    sentences found so far that hold its rarest word (an index of word -> sentences), so
    SST-2's 67,349 rows take a few seconds. Groups are numbered by first row.

    Why: a held-out row inside a trained row (or a trained phrase of a held-out sentence
    that no other sentence has) is recalled, not read; the module docstring has SST-2's
    figures."""
    keys = [phrase_key(t) for t in texts]
    distinct = sorted(set(keys), key=lambda k: (-len(k.split()), k))
    sentences: list[str] = []
    index: dict[str, list[int]] = {}
    owners: dict[str, list[int]] = {}  # text -> up to 2 sentences it occurs inside

    def inside(key: str, words: set[str], limit: int) -> list[int]:
        if not words:
            return []
        rarest = min(words, key=lambda w: len(index.get(w, ())))
        padded = f" {key} "
        found: list[int] = []
        for s in index.get(rarest, ()):
            if padded in sentences[s]:
                found.append(s)
                if len(found) == limit:
                    break
        return found

    for key in distinct:
        words = set(key.split())
        found = inside(key, words, 2)
        if not found:  # a sentence: inside no longer row (checked against sentences only:
            found = [len(sentences)]  # a row inside a phrase is inside that phrase's sentence)
            sentences.append(f" {key} ")
            for w in words:
                index.setdefault(w, []).append(found[0])
        owners[key] = found
    first: dict[int, int] = {}  # sentence -> its group, numbered by first row
    out: list[int] = []
    for key in keys:
        own = owners[key]
        if len(own) != 1:
            out.append(-1)
            continue
        out.append(first.setdefault(own[0], len(first)))
    return out
