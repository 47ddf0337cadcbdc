"""benchmarks/prune_speed.py: the pruned / unpruned ratios are of the same format and
statistic, and the Markdown names the CPU, every artifact and what was not built."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.prune_speed import FORMATS, kept, ratios, render


def _s(p50: float, lo: float) -> dict:
    return {"p50": p50, "min": lo, "runs": 900}


def _timing() -> dict:
    onnx, tfl, peer = FORMATS
    return {
        "threads": 2,
        "load": [[0.5, 0.5, 0.5], [0.6, 0.5, 0.5]],
        "W1": {
            f"unpruned | {onnx}": _s(1.4, 1.2),
            f"pruned | {onnx}": _s(0.98, 0.9),
            f"unpruned | {peer}": _s(2.0, 1.9),
            f"pruned | {peer}": _s(1.5, 1.0),
            f"pruned | {tfl}": _s(1.0, 0.9),  # no unpruned TFLite: no ratio
        },
        "W2": {f"unpruned | {onnx}": _s(0.4, 0.3), f"pruned | {onnx}": _s(0.3, 0.3)},
    }


def test_ratios_pair_each_model_with_the_unpruned_of_its_format() -> None:
    got = {(r["workload"], r["format"]): r for r in ratios(_timing(), ["unpruned", "pruned"])}
    onnx, _tfl, peer = FORMATS
    assert set(got) == {("W1", onnx), ("W1", peer), ("W2", onnx)}
    assert abs(got[("W1", onnx)]["p50"] - 0.7) < 1e-9
    assert abs(got[("W1", onnx)]["min"] - 0.75) < 1e-9
    assert abs(got[("W1", peer)]["min"] - 1.0 / 1.9) < 1e-9


def test_render_names_the_cpu_the_rows_and_what_was_not_built() -> None:
    t = _timing()
    t["ratios"] = ratios(t, ["unpruned", "pruned"])
    r = {
        "command": "python -m benchmarks.prune_speed UNPRUNED PRUNED --threads 2",
        "created": "2026-12-02 07:00 UTC",
        "cpu": {"model": "AMD EPYC", "cores": 2, "flag": "avx2"},
        "models": {"unpruned": "heads 4/4, FFN 512", "pruned": "heads 3/4, FFN 32"},
        "sentences": 300,
        "rounds": 3,
        "timings": [t],
        "not_built": ["unpruned tflite int8-dynamic"],
    }
    md = render(r)
    assert "AMD EPYC" in md and "`avx2`" in md
    assert "| pruned | onnx int8-dynamic | 0.980 | 0.900 | 0.300 | 0.300 |" in md
    assert "| pruned | litert-torch int8 | 1.500 | 1.000 | – | – |" in md
    assert "| W1 | pruned | onnx int8-dynamic | 0.700x | 0.750x |" in md
    assert "Not built: unpruned tflite int8-dynamic" in md


def test_kept_reads_heads_and_ffn_from_the_config(tmp_path: Path) -> None:
    cfg = {"num_attention_heads": 4, "intermediate_size": 32, "num_hidden_groups": 2,
           "inner_group_num": 1, "pruned_heads": {"0": [2], "1": [2]}}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert kept(tmp_path) == "heads 3/4, FFN 32"
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "pruned_heads": {"1": [0, 2, 3]}}))
    assert kept(tmp_path) == "heads 4+1/4, FFN 32"
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "pruned_heads": {}}))
    assert kept(tmp_path) == "heads 4/4, FFN 32"
