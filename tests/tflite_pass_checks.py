"""What the TFLite graph-pass tests share: a tiny model given a trained model's LayerNorm γ,
and the check that two files give the same outputs, bit for bit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def with_trained_gamma(model: Any) -> Any:
    """``model`` with every layer's LayerNorm γ moved off 1 (seeded), as training leaves it:
    the converter folds γ into the next layer's FCs, and storing each weight once puts one
    MUL by γ in front of Q, K and V, so they read one tensor."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("full_layer_layer_norm.weight"):
                p.add_(torch.randn_like(p) * 0.1)
    return model


def assert_same_bits(without: Path, with_: Path, lengths: tuple[int, ...] = (5, 16, 27)) -> None:
    """LiteRT (XNNPACK) outputs of both files equal bit for bit at each length, on a batch
    of one unpadded and one half-padded row (seeded ids)."""
    from albert_edge.tflite.runtime import LiteRTRunner

    a, b = LiteRTRunner(without), LiteRTRunner(with_)
    rng = np.random.default_rng(0)
    for seq in lengths:
        ids = rng.integers(5, 1000, (2, seq))
        mask = np.ones_like(ids)
        mask[1, seq // 2 :] = 0
        feeds = {"input_ids": ids, "attention_mask": mask}
        x, y = a.run(feeds), b.run(feeds)
        assert x.keys() == y.keys()
        assert all(np.array_equal(x[k], y[k]) for k in x), f"outputs differ at {seq} tokens"
