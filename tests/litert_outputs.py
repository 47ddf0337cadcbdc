"""One check shared by the TFLite pass tests: two files give the same outputs, bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np


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
