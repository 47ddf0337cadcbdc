"""Paired bootstrap intervals on accuracy differences.

Why paired: every depth is scored on the same held-out sentences as full depth, so the
difference of their accuracies varies far less than either accuracy; resampling
sentences (not the two accuracies independently) keeps that pairing. Why an interval at
all: 872 SST-2 dev sentences give about ±1.7 points on a difference, so a point estimate
alone cannot tell a 0.5-point loss from noise (issue 27).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from albert_edge.errors import TooFewRowsError

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 27

# The fewest rows a 95 % interval is computed on. Why 30: the resampled means of n 0/1
# rows take only n + 1 values, and below ~30 rows the percentile interval is too coarse
# and too narrow to be a 95 % interval (one row gives a zero-width interval that
# "proves" anything; the central-limit approximation the percentiles lean on is the
# usual n >= 30 rule). Every interval in albert-edge (depth search, bench --recommend's
# paired comparisons, exit policies chosen on a choose split) goes through this check.
MIN_BOOTSTRAP_ROWS = 30


@dataclass(frozen=True)
class Interval:
    """``delta`` = accuracy(candidate) − accuracy(reference), in fractions (0.01 = 1 point),
    with its percentile bootstrap interval ``[low, high]`` at ``level``."""

    delta: float
    low: float
    high: float
    level: float = 0.95

    def to_dict(self) -> dict[str, float]:
        return {"delta": self.delta, "low": self.low, "high": self.high, "level": self.level}


def accuracy_interval(
    correct: Sequence[bool] | Any, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> Interval:
    """Accuracy of one 0/1 vector with its bootstrap interval (``delta`` is the accuracy)."""
    import numpy as np

    c = np.asarray(correct, dtype=np.float64)
    return _interval(c, resamples, seed)


def paired_bootstrap(
    candidate: Sequence[bool] | Any,
    reference: Sequence[bool] | Any,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """The candidate's accuracy minus the reference's on the same rows, with a paired
    percentile bootstrap interval (fixed ``seed``: the same inputs give the same interval)."""
    import numpy as np

    a = np.asarray(candidate, dtype=np.float64)
    b = np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired vectors must have one equal length, got {a.shape} {b.shape}")
    return _interval(a - b, resamples, seed)


def _interval(values: Any, resamples: int, seed: int) -> Interval:
    import numpy as np

    n = int(values.shape[0])
    if n < MIN_BOOTSTRAP_ROWS:
        raise TooFewRowsError(
            f"{n} rows cannot support a 95 % bootstrap interval; it needs at least "
            f"{MIN_BOOTSTRAP_ROWS} rows (give more labelled rows)"
        )
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    chunk = max(1, 2_000_000 // n)  # bounded memory for large held-out splits
    for lo in range(0, resamples, chunk):
        hi = min(resamples, lo + chunk)
        idx = rng.integers(0, n, size=(hi - lo, n))
        means[lo:hi] = values[idx].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Interval(float(values.mean()), float(low), float(high))
