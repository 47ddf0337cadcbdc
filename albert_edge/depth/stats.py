"""Paired bootstrap intervals on accuracy differences, for the depth search and the
commands built on it.

One implementation for the whole project: :mod:`albert_edge.tasks.stats` (the task layer,
which also recomputes non-mean metrics such as F1 on each resample); this module keeps
the names the depth package and its callers import.
"""

from __future__ import annotations

from albert_edge.tasks.stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    MIN_BOOTSTRAP_ROWS,
    Interval,
    accuracy_interval,
    paired_bootstrap,
)

__all__ = [
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "MIN_BOOTSTRAP_ROWS",
    "Interval",
    "accuracy_interval",
    "paired_bootstrap",
]
