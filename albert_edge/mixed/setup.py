"""The types a precision-plan search shares: an :data:`Assignment`, the workers'
:class:`Setup`, an evaluation's :class:`Outcome` and the :class:`Executor` that runs many.

Why a module of their own: the evaluator (:mod:`albert_edge.mixed.evaluate`), the search
(:mod:`albert_edge.mixed.search`), the held-out rows (:mod:`albert_edge.mixed.rows`) and
the TFLite builder (:mod:`albert_edge.mixed.tflite`) all name them; defined here, below all
four, none of those imports another back for a type (no import circle, type-only
imports counted). :mod:`albert_edge.mixed.evaluate` re-exports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.data import Calibration
    from albert_edge.options import ConvertOptions
    from albert_edge.tasks import Features, TaskData

Assignment = tuple[tuple[str, str], ...]  # (unit tensor, precision), sorted by tensor


@dataclass(frozen=True)
class Setup:
    """What every worker needs: the fp32 graph (serialized), the build options, the
    held-out examples as model feeds (one per feature, batch 1) and the head's outputs
    to collect (``per_token``: outputs with a sequence axis, cut to each feed's length)."""

    model: bytes
    options: ConvertOptions
    feeds: tuple[dict[str, Any], ...]
    outputs: tuple[str, ...] = ("logits",)
    per_token: bool = False
    # the held-out examples and their features (what the parent scores outputs against)
    data: TaskData | None = None
    features: Features | None = None
    # int8-static: the calibration examples (any task's, albert_edge.data.Calibration) and
    # the tokenizer (spiece path, lower case, keep accents) that encodes them, in each worker
    calibration: Calibration | None = None
    tokenizer: tuple[str, bool, bool] | None = None
    # "tflite": ``model`` is the float flatbuffer, built and scored by albert_edge.mixed.tflite
    target: str = "onnx"
    calibration_feeds: Any = None  # TFLite int8-full: convert's feeds per signature


@dataclass(frozen=True)
class Outcome:
    """One evaluated assignment: the head's outputs (name -> one array per feature),
    serialized model bytes, and the wall time of one pass over the rows (this worker's
    machine)."""

    outputs: dict[str, list[np.ndarray]]
    model_bytes: int
    seconds: float


class Executor(Protocol):
    workers: int
    kind: str

    def map(self, assignments: Sequence[Assignment]) -> list[Outcome]: ...
