"""Dynamic (early) exit for ALBERT classifiers: one shared layer, stepped, stopped per row.

ALBERT stores one layer and runs it ``L`` times, so a sentence the model is already sure
about after layer ``k`` can stop there at no cost in bytes. This package adds, per depth,
a small exit head (the model's pooler shared, one linear layer each), the two standard
policies (confidence, PABEE patience), and runners that step the shared layer: ONNX
Runtime here, and the Android core's ``EarlyExit`` (Java) with the same policy code.
See ``docs/early-exit.md`` for when it pays and when it does not.
"""

from __future__ import annotations

from albert_edge.early_exit.artifact import build_early_exit_artifact
from albert_edge.early_exit.heads import ExitHeads, fit_exit_heads, pooled_features
from albert_edge.early_exit.policy import (
    Confidence,
    ExitPolicy,
    FixedDepth,
    Off,
    Patience,
    parse_policy,
    simulate,
)
from albert_edge.early_exit.runner import EarlyExitRunner, ExitResult

__all__ = [
    "Confidence",
    "EarlyExitRunner",
    "ExitHeads",
    "ExitPolicy",
    "ExitResult",
    "FixedDepth",
    "Off",
    "Patience",
    "build_early_exit_artifact",
    "fit_exit_heads",
    "parse_policy",
    "pooled_features",
    "simulate",
]
