"""The one error type of :mod:`albert_edge.learn`."""

from __future__ import annotations

from albert_edge.errors import AlbertEdgeError


class LearnError(AlbertEdgeError):
    """A fine-tune, distillation or QAT run cannot start or continue (bad flag, bad
    checkpoint, incompatible teacher, too few rows, diverged loss, stale resume state)."""
