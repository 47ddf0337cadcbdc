"""A small model's per-op overhead on LiteRT: int8 artifacts no longer run the attention mask's
``BROADCAST_TO`` (``implicit_broadcast`` for every precision) — outputs equal bit for bit
with and without that pass, on the real LiteRT interpreter with XNNPACK."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from albert_edge.options import ConvertOptions
from albert_edge.tflite import flatbuffer as fb
from albert_edge.tflite.passes import ImplicitBroadcastPass, run_passes
from albert_edge.tflite.passes.base import op_name

SEQ_LENS = (16, 32)


@pytest.fixture(scope="module")
def int8_pair(make_checkpoint: Callable[..., Path], tmp_path_factory: Any) -> dict[str, Path]:
    """The int8-dynamic file as the pipeline writes it, and the same without
    ``implicit_broadcast`` (one export, both pass lists)."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.tflite.pipeline import tflite_passes
    from converters.tflite_export import export_litert_torch

    ckpt = load_checkpoint(make_checkpoint("tiny"))
    opts = ConvertOptions(target="tflite", precision="int8-dynamic", seq_lens=SEQ_LENS)
    raw = export_litert_torch(ckpt.model, ckpt.head, SEQ_LENS)
    out = tmp_path_factory.mktemp("overhead")
    files = {}
    for name, drop in (("with", False), ("without", True)):
        model = fb.read_model(raw)
        passes = tflite_passes(ckpt, opts, SEQ_LENS)
        if drop:
            passes = [p for p in passes if not isinstance(p, ImplicitBroadcastPass)]
        log = run_passes(model, passes)
        removed = [r for r in log if r["name"] == "implicit_broadcast"]
        assert bool(removed) != drop
        assert not removed or removed[0]["broadcast_to_removed"] == len(SEQ_LENS)
        files[name] = out / f"{name}.tflite"
        files[name].write_bytes(fb.write_model(model))
    return files


def _ops(path: Path) -> list[str]:
    model = fb.read_model(path.read_bytes())
    return [op_name(model, op) for op in model.subgraphs[0].operators]


def test_int8_drops_the_mask_broadcast_bit_for_bit(int8_pair: dict[str, Path]) -> None:
    from albert_edge.tflite.runtime import LiteRTRunner

    assert "BROADCAST_TO" in _ops(int8_pair["without"])
    assert "BROADCAST_TO" not in _ops(int8_pair["with"])
    a, b = LiteRTRunner(int8_pair["without"]), LiteRTRunner(int8_pair["with"])
    rng = np.random.default_rng(0)
    for seq in (5, 16, 27):
        ids = rng.integers(5, 1000, (2, seq))
        mask = np.ones_like(ids)
        mask[1, seq // 2 :] = 0  # a padded row: the mask's values reach the scores
        feeds = {"input_ids": ids, "attention_mask": mask}
        x, y = a.run(feeds), b.run(feeds)
        assert x.keys() == y.keys()
        assert all(np.array_equal(x[k], y[k]) for k in x)
