"""The held-out split a fine-tune chooses its epoch on: seeded, disjoint, recorded.

Why a split of the training rows and not the dev file: the epoch (and later any depth or
threshold) is a choice, and a choice made on the rows it is then reported on overstates
what it keeps. ``--dev`` is scored for the record only.
"""

from __future__ import annotations

from dataclasses import dataclass

from albert_edge.learn.errors import LearnError

MIN_HELD_OUT = 32  # fewer rows give an interval too wide to choose anything on
MIN_TRAIN = 32


@dataclass(frozen=True)
class HeldOut:
    """``fraction`` of the rows (at least :data:`MIN_HELD_OUT`), drawn by ``seed``."""

    fraction: float = 0.1
    seed: int = 27

    def minimum_rows(self) -> int:
        """The fewest labelled rows a split can be made of."""
        return MIN_TRAIN + MIN_HELD_OUT

    def split(self, n: int, where: str) -> tuple[list[int], list[int]]:
        """(train, held-out) row indices of ``n`` rows; disjoint by construction."""
        import numpy as np

        if not 0.0 < self.fraction < 1.0:
            raise LearnError(f"--held-out {self.fraction}: give a fraction between 0 and 1")
        if n < self.minimum_rows():
            raise LearnError(
                f"{where}: {n} labelled rows are too few for a held-out split; give at least "
                f"{self.minimum_rows()} ({MIN_TRAIN} to train on, {MIN_HELD_OUT} held out)"
            )
        held = max(MIN_HELD_OUT, round(n * self.fraction))
        if n - held < MIN_TRAIN:
            raise LearnError(
                f"{where}: --held-out {self.fraction} of {n} rows leaves {n - held} to train "
                f"on; lower --held-out or give at least {held + MIN_TRAIN} rows"
            )
        perm = np.random.default_rng(self.seed).permutation(n).tolist()
        return sorted(perm[held:]), sorted(perm[:held])
