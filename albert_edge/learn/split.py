"""The held-out split a fine-tune chooses its epoch on: seeded, disjoint, recorded.

Why a split of the training rows and not the dev file: the epoch (and later any depth or
threshold) is a choice, and a choice made on the rows it is then reported on overstates
what it keeps. ``--dev`` is scored for the record only.

The rule (:meth:`HeldOut.split`): ``--held-out F`` of ``N`` rows asks for ``round(N * F)``
rows. The epoch is chosen by an accuracy with a bootstrap interval, which needs
:data:`MIN_HELD_OUT` rows (:data:`albert_edge.depth.stats.MIN_BOOTSTRAP_ROWS` and a
margin), so a smaller ask is raised to that minimum, but only while the minimum is at
most :data:`MAX_RAISE` times the ask (200 rows at 0.1: 32 rows, not 20). Past that the
split would no longer be the one asked for (64 rows at 0.1 would hold out half), and the
run is refused in one line naming the fraction that holds out the minimum. At least
:data:`MIN_TRAIN` rows must stay to train on; a fraction leaving fewer is refused naming
the largest that leaves enough. The record (:meth:`HeldOut.record`) states what was held
out: rows and fraction, beside the asked fraction and seed that reproduce it.

Rows that share their words (:func:`~albert_edge.tasks.phrases.phrase_groups`): SST-2's
training rows are the phrases of its sentences, each sentence's phrases beside it, and a
row drawn alone is held out while the sentence around it, or the phrases inside it, are
trained on: 88 % of the rows a plain
draw holds out of SST-2 train occur word for word inside a trained row, and the held-out
accuracy (92-93 % for the distillation recipe's students) measures phrases recalled, not
sentences read (the same students on SST-2 dev's sentences: 83-84 %). Given the rows' texts,
:meth:`HeldOut.split` draws whole sentences, each with the rows found only inside it, so no
held-out row occurs inside a trained row, and identical rows go together. A row found inside
two or more sentences is common language and is always trained on, as a test sentence's
common phrases are. Where no row contains another and none repeats, the draw is the plain
one, row for row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from albert_edge.learn.errors import LearnError
from albert_edge.tasks.phrases import phrase_groups

MIN_HELD_OUT = 32  # a bootstrap interval needs 30 rows; fewer give nothing to choose on
MIN_TRAIN = 32
MAX_RAISE = 2.0  # the minimum may replace an ask at most this many times smaller
# what a record's "how" adds where rows were drawn by sentence (phrase_groups)
SENTENCE_DRAW = (
    "; by sentence: the permutation is of the sentences (albert_edge.tasks.phrases."
    "phrase_groups), each held out with the rows found only inside it, until the rows "
    "asked are held out (no held-out row occurs inside a trained row)"
)


@dataclass(frozen=True)
class HeldOut:
    """``fraction`` of the rows (raised to :data:`MIN_HELD_OUT` within :data:`MAX_RAISE`
    times the ask; the module docstring has the rule), drawn by ``seed``."""

    fraction: float = 0.1
    seed: int = 27

    def minimum_rows(self) -> int:
        """The fewest labelled rows a split can be made of."""
        return MIN_TRAIN + MIN_HELD_OUT

    def held_rows(self, n: int, where: str) -> int:
        """How many of ``n`` rows are held out; one line naming the numbers when no split
        of ``n`` rows is both close to the asked fraction and large enough."""
        f = self.fraction
        if not (math.isfinite(f) and 0.0 < f < 1.0):
            raise LearnError(f"--held-out {f}: give a fraction between 0 and 1 (exclusive)")
        if n < self.minimum_rows():
            # the fewest rows this --held-out accepts (the rules below), not the bare minimum:
            # "give at least 64" at --held-out 0.1 only led to the next refusal (320 needed)
            fewest = self.fewest_rows()
            other = (
                ""
                if fewest == self.minimum_rows()
                else f", or {self.minimum_rows()} with --held-out 0.5"
            )
            raise LearnError(
                f"{where}: {n} labelled rows are too few for a held-out split; give at least "
                f"{fewest} at --held-out {f:g} ({MIN_TRAIN} to train on, {MIN_HELD_OUT} held "
                f"out){other}"
            )
        asked = round(n * f)
        held = max(asked, MIN_HELD_OUT)
        if held > MAX_RAISE * asked:
            need = math.ceil(MIN_HELD_OUT / n * 100) / 100
            raise LearnError(
                f"{where}: --held-out {f} of {n} rows holds out {asked}, fewer than the "
                f"{MIN_HELD_OUT} the epoch choice needs, and {MIN_HELD_OUT} would be "
                f"{MIN_HELD_OUT / n:.0%} of the rows, not the {f * 100:g}% asked; pass "
                f"--held-out {need:g} "
                f"to hold out that many, or give at least {self.fewest_rows()} rows"
            )
        if n - held < MIN_TRAIN:
            most = math.floor((n - MIN_TRAIN) / n * 100) / 100
            raise LearnError(
                f"{where}: --held-out {f} of {n} rows holds out {held} and leaves "
                f"{n - held} to train on, fewer than {MIN_TRAIN}; pass --held-out {most:g} "
                "or less"
            )
        return held

    def fewest_rows(self) -> int:
        """The fewest labelled rows :meth:`held_rows` accepts at this fraction."""
        n = self.minimum_rows()
        while not self._fits(n):
            n += 1
        return n

    def _fits(self, n: int) -> bool:
        """Whether :meth:`held_rows` accepts ``n`` rows at this fraction."""
        asked = round(n * self.fraction)
        held = max(asked, MIN_HELD_OUT)
        return n >= self.minimum_rows() and held <= MAX_RAISE * asked and n - held >= MIN_TRAIN

    def split(
        self, n: int, where: str, texts: Sequence[str] | None = None
    ) -> tuple[list[int], list[int]]:
        """(train, held-out) row indices of ``n`` rows; disjoint by construction.

        ``texts`` (one per row): draw the groups of
        :func:`~albert_edge.tasks.phrases.phrase_groups` instead of rows,
        until at least the rows :meth:`held_rows` asks are held out."""
        import numpy as np

        held = self.held_rows(n, where)
        if texts is None:
            perm = np.random.default_rng(self.seed).permutation(n).tolist()
            return sorted(perm[held:]), sorted(perm[:held])
        if len(texts) != n:
            raise ValueError(f"{where}: {len(texts)} texts for {n} rows")
        groups = phrase_groups(texts)  # numbered by first row: the plain draw's order
        members: list[list[int]] = [[] for _ in range(max(groups, default=-1) + 1)]
        for i, g in enumerate(groups):
            if g >= 0:
                members[g].append(i)
        out: list[int] = []
        for g in np.random.default_rng(self.seed).permutation(len(members)).tolist():
            if len(out) >= held:
                break
            out.extend(members[g])
        if len(out) < held:
            raise LearnError(
                f"{where}: only {len(out)} of {n} rows can be held out without sharing "
                f"their words with a trained row, fewer than the {held} asked; pass "
                "--held-out with a smaller fraction"
            )
        taken = set(out)
        return [i for i in range(n) if i not in taken], sorted(out)

    def split_examples(
        self, examples: Sequence[Any], where: str
    ) -> tuple[list[int], list[int], str]:
        """(train, held-out, how drawn) of a task file's examples: the one place that
        chooses the draw, so no caller forgets the texts. Classification rows are drawn by
        sentence (``"sentence"``: :func:`example_texts`), tagging and QA rows alone
        (``"row"``)."""
        texts = example_texts(examples)
        train, held = self.split(len(examples), where, texts)
        return train, held, "row" if texts is None else "sentence"

    def record(self, n: int, held: int, trained: int, by: str = "row") -> dict[str, Any]:
        """What ``training.json`` says of the split: what was held out (``rows``,
        ``held_fraction``), what was asked (``fraction``, ``seed``: with the rows, what
        reproduces it), and the rows trained on (after ``--max-train-rows``)."""
        asked = round(n * self.fraction)
        return {
            "rows": held,
            "held_fraction": round(held / n, 6),
            "trained_rows": trained,
            "fraction": self.fraction,
            "seed": self.seed,
            "raised_to_minimum": held > asked,
            "how": "numpy default_rng(seed).permutation(rows): the first rows held out, the "
            f"rest trained on; round(rows * fraction) held out, raised to {MIN_HELD_OUT} (the "
            f"epoch choice's minimum) when that is at most {MAX_RAISE:g}x the ask; the epoch "
            "is chosen on the held-out rows" + (SENTENCE_DRAW if by == "sentence" else ""),
            "by": by,
        }


def example_texts(examples: Sequence[Any]) -> list[str] | None:
    """What :meth:`HeldOut.split` groups a task file's rows by: each classification row's
    text (a pair's two texts joined by a NUL word, so no
    pair's words run into the other text's), or None for tagging, QA and other rows,
    which are drawn alone. Why classification only: its files are where rows are phrases of
    one another (SST-2); a tagging file's rows are a document's sentences, and QA's split
    (:mod:`albert_edge.tasks.squad`) draws by article already."""
    from albert_edge.tasks.types import ClassificationExample

    if not examples or not all(isinstance(e, ClassificationExample) for e in examples):
        return None
    return [e.text if e.text_pair is None else f"{e.text} \x00 {e.text_pair}" for e in examples]
