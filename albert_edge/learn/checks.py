"""The refusals every ``albert-edge train`` run shares: settings that would train to NaN,
a loss or weight gone non-finite, ``--max-len`` past the model's positions.

Each says in one line what is wrong and what to pass instead; a diverged run is stopped
before anything is written.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from albert_edge.errors import ConfigError


def check_finite_hyperparameters(args: argparse.Namespace) -> None:
    """``--lr inf`` trains every tensor to NaN and used to exit 0: refuse it up front."""
    for flag in ("lr", "warmup", "weight_decay"):
        value = getattr(args, flag, None)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(
                f"--{flag.replace('_', '-')} {value}: not a finite number; pass a finite value"
            )


def check_max_len(max_len: int, positions: int, model: str) -> None:
    """Refuse ``--max-len`` past the model's ``max_position_embeddings``: a longer
    sentence would index past the position table and end the run in a traceback, and the
    output's ``tokenizer_config.json`` would promise lengths the model cannot take.
    Within it every sentence is truncated to ``--max-len`` tokens when encoded."""
    if max_len > positions:
        raise ConfigError(
            f"--max-len {max_len}: {model} has {positions} positions "
            f"(max_position_embeddings); pass --max-len {positions} or less"
        )


def check_finite_step(loss: Any, model: Any, epoch: int, step: int) -> None:
    """Stop at the first non-finite loss (or, after the last step, weight), naming the
    step: a diverged run must not be saved as a model that predicts NaN."""
    import torch

    if loss is not None and not bool(torch.isfinite(loss.detach()).all()):
        raise ConfigError(
            f"training diverged: the loss is {float(loss.detach())} at epoch {epoch}, step "
            f"{step}; lower --lr or check the data; nothing was written"
        )
    if loss is None:
        for name, param in model.named_parameters():
            if not bool(torch.isfinite(param.detach()).all()):
                raise ConfigError(
                    f"training diverged: weight {name} is not finite after step {step}; "
                    "lower --lr or check the data; nothing was written"
                )
