"""Paired bootstrap intervals on metric differences (the project's one bootstrap).

Why paired: two models scored on the same examples differ far less than either metric
varies, and resampling examples (not the two metrics independently) keeps that pairing.
Why an interval at all: 872 SST-2 dev sentences give about ±1.7 points on an accuracy
difference, so a point estimate alone cannot tell a 0.5-point loss from noise.
Accuracy is a mean of 0/1 rows; F1, Matthews and the correlations are not means, so they
are recomputed on each resample of example indices (:func:`paired_metric_interval`),
with the same draws the accuracy interval makes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from albert_edge.errors import TooFewRowsError

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.tasks.types import Metrics

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 27

# The fewest rows a 95 % interval is computed on. Why 30: the resampled means of n 0/1
# rows take only n + 1 values, and below ~30 rows the percentile interval is too coarse
# and too narrow to be a 95 % interval (one row gives a zero-width interval that
# "proves" anything; the central-limit approximation the percentiles lean on is the
# usual n >= 30 rule). Every interval in albert-edge (depth search, bench --recommend's
# paired comparisons, exit policies chosen on a choose split, verify) goes through it.
MIN_BOOTSTRAP_ROWS = 30


@dataclass(frozen=True)
class Interval:
    """``delta`` = metric(candidate) − metric(reference), in fractions (0.01 = 1 point),
    with its percentile bootstrap interval ``[low, high]`` at ``level``."""

    delta: float
    low: float
    high: float
    level: float = 0.95

    def to_dict(self) -> dict[str, float]:
        return {"delta": self.delta, "low": self.low, "high": self.high, "level": self.level}


def resample_indices(n: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Chunks of bootstrap index rows ([chunk, n] each, ``resamples`` rows in all), drawn
    from one seeded generator; memory stays bounded for large ``n``."""
    import numpy as np

    if n < MIN_BOOTSTRAP_ROWS:
        raise TooFewRowsError(
            f"{n} rows cannot support a 95 % bootstrap interval; it needs at least "
            f"{MIN_BOOTSTRAP_ROWS} rows (give more labelled rows)"
        )
    rng = np.random.default_rng(seed)
    chunk = max(1, 2_000_000 // n)
    for lo in range(0, resamples, chunk):
        yield rng.integers(0, n, size=(min(resamples, lo + chunk) - lo, n))


def _interval(values: Any, resamples: int, seed: int) -> Interval:
    import numpy as np

    means = np.concatenate(
        [
            values[idx].mean(axis=1)
            for idx in resample_indices(int(values.shape[0]), resamples, seed)
        ]
    )
    low, high = np.percentile(means, [2.5, 97.5])
    return Interval(float(values.mean()), float(low), float(high))


def accuracy_interval(
    correct: Sequence[bool] | Any, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> Interval:
    """Accuracy of one 0/1 vector with its bootstrap interval (``delta`` is the accuracy)."""
    import numpy as np

    return _interval(np.asarray(correct, dtype=np.float64), resamples, seed)


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


def paired_metric_interval(
    candidate: Metrics,
    reference: Metrics,
    metric: str | None = None,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """``metric`` (default: the primary one) of ``candidate`` minus ``reference``, scored
    on the same examples, with a paired percentile bootstrap interval: each resample
    draws example indices once and recomputes both metrics on them. For accuracy this is
    :func:`paired_bootstrap` of the two correctness vectors, draw for draw."""
    import numpy as np

    name = metric or reference.primary
    if candidate.examples != reference.examples:
        raise ValueError(
            f"paired metrics need the same examples, got {candidate.examples} and "
            f"{reference.examples}"
        )
    diffs = [
        _pick(candidate.resample, idx, name) - _pick(reference.resample, idx, name)
        for idx in resample_indices(reference.examples, resamples, seed)
    ]
    low, high = np.percentile(np.concatenate(diffs), [2.5, 97.5])
    return Interval(candidate.values[name] - reference.values[name], float(low), float(high))


def metric_interval(m: Metrics, *, resamples: int, seed: int) -> tuple[float, float]:
    """The 95 % percentile bootstrap interval of ``m``'s primary metric over its examples
    (for accuracy: :func:`accuracy_interval`'s, draw for draw)."""
    import numpy as np

    values = np.concatenate(
        [m.resample(idx)[m.primary] for idx in resample_indices(m.examples, resamples, seed)]
    )
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def _pick(
    resample: Callable[[np.ndarray], dict[str, np.ndarray]], idx: np.ndarray, name: str
) -> Any:
    return resample(idx)[name]
