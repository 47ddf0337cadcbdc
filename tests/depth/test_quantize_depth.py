"""``quantize`` of a truncated fp32 artifact drops the ``depth`` block (docs/depth.md: its
held-out evidence was measured at fp32, not at the new precision) and the card's Depth
section with it; ``convert --depth`` at the wanted precision is the way to carry it."""

from __future__ import annotations

import json
from pathlib import Path

from albert_edge.depth import SplitSettings, convert_at_depth, search_depths
from albert_edge.depth.features import FitSettings
from albert_edge.onnx.quant.artifact import quantize_artifact
from albert_edge.options import ConvertOptions


def test_quantize_drops_the_depth_block(make_checkpoint, small_tsv: Path, tmp_path: Path) -> None:
    ckpt = make_checkpoint("tiny")
    split = SplitSettings(fit_rows=48, held_out_rows=32, max_length=16, resamples=100)
    search = search_depths(ckpt, small_tsv, split=split, fit=FitSettings(epochs=0))
    fp32 = tmp_path / "fp32"
    convert_at_depth(ckpt, fp32, ConvertOptions(verify=False), search, 1)
    assert "depth" in json.loads((fp32 / "manifest.json").read_text())
    q = tmp_path / "int8"
    quantize_artifact(fp32, q, ConvertOptions(precision="int8-dynamic", verify=False))
    manifest = json.loads((q / "manifest.json").read_text())
    assert "depth" not in manifest and manifest["precision"] == "int8-dynamic"
    card = next(q.glob("*.md"), None)
    assert card is None or "## Depth" not in card.read_text()
