"""The search, truncation and conversion end to end on albert-base shapes (random init).

Accuracy means nothing here (random weights, a few dozen rows); what is checked is the
plumbing and the byte accounting: a truncated artifact verifies against the truncated
PyTorch model, stores every kept weight once (size ÷ floor ≈ 1.00 at fp32), and a model
with 2 hidden groups loses exactly the dropped group's bytes — from the file and from
the floor alike. Slow: albert-base exports are tens of MB.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from albert_edge.depth import SplitSettings, convert_at_depth, search_depths
from albert_edge.depth.features import FitSettings
from albert_edge.errors import UnsupportedError
from albert_edge.facts import floor_bytes
from albert_edge.options import ConvertOptions

pytestmark = pytest.mark.slow
SPLIT = SplitSettings(fit_rows=30, held_out_rows=30, max_length=32, resamples=100)


def _layer_params(h: int, i: int) -> int:
    return 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h


@pytest.mark.parametrize("groups", [1, 2])
def test_albert_base_shapes_end_to_end(tmp_path, spiece_path, small_tsv: Path, groups) -> None:
    from albert_edge.configs import make_config, make_random_checkpoint

    cfg = make_config("albert-base", num_hidden_groups=groups)
    ckpt = make_random_checkpoint(tmp_path / "ckpt", cfg, spiece_model=spiece_path)
    search = search_depths(ckpt, small_tsv, split=SPLIT, fit=FitSettings(epochs=1))
    want = [1, 2, 3, 4, 5, 6, 11, 12] if groups == 2 else list(range(1, 13))
    assert search.representable == want == sorted(search.heads)
    full_cfg = json.loads((ckpt / "config.json").read_text())
    full_floor = floor_bytes(full_cfg, "sequence-classification", "fp32")
    assert full_floor is not None
    m = convert_at_depth(ckpt, tmp_path / "d6", ConvertOptions(precision="fp32"), search, 6)
    assert m["verification"]["passed"] is True
    assert m["depth"]["num_hidden_groups"] == 1 and m["depth"]["layer_groups"] == [0] * 6
    sizes = m["sizes"]
    assert 0.999 < sizes["ratio_to_floor"] < 1.01  # every kept weight once
    dropped = (groups - 1) * 4 * _layer_params(768, 3072)  # group 1's bytes, fp32
    assert sizes["floor_bytes"] == full_floor - dropped
    if groups == 2:
        with pytest.raises(UnsupportedError, match="choose one of: 1, 2, 3, 4, 5, 6, 11, 12"):
            convert_at_depth(ckpt, tmp_path / "d8", ConvertOptions(), search, 8)
        m11 = convert_at_depth(
            ckpt, tmp_path / "d11", ConvertOptions(precision="int8-dynamic"), search, 11
        )
        assert m11["depth"]["num_hidden_groups"] == 2 and m11["verification"]["passed"]
        assert m11["sizes"]["ratio_to_floor"] < 1.06
