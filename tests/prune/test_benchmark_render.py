"""benchmarks/prune.py renders its Markdown from its JSON only (``--render``)."""

from __future__ import annotations

from benchmarks.prune import render


def _v(delta: float) -> dict:
    return {
        "examples": 2000,
        "unpruned": 0.8,
        "pruned": 0.8 + delta,
        "delta": delta,
        "delta_low": delta - 0.01,
        "delta_high": delta + 0.01,
        "metric": "accuracy",
    }


def test_render_names_the_level_the_evidence_and_the_failures() -> None:
    r = {
        "machine": {"cpu_family": "avx512_vnni", "processor": "x86_64", "cpus": 2,
                    "load_average_1_5_15": [9.0, 9.0, 9.0]},
        "model": "m",
        "shape": "6 layers",
        "max_drop": 0.5,
        "bytes": {"unpruned": 1000, "pruned": 600},
        "prune": {
            "data": {"file": "rest.tsv", "rows": 100, "fit_rows": 60, "choose_rows": 20,
                     "report_rows": 20},
            "kept": {"heads_per_layer": 3, "of_heads": 4, "ffn_per_layer": 32, "of_ffn": 512,
                     "pruned_heads": {"0": [2]}},
            "cost": {"encoder_flops_128": {"ratio": 0.447}},
            "importance": {"rows": 50},
            "heal": {"steps": 300, "kept": "healed"},
            "seconds": {"total": 1.0},
            "selection": {"evidence": [
                {"heads_keep": 3, "ffn_keep": 32, "flops_ratio": 0.447, "chosen": True,
                 "why_not": None, **_v(-0.001)},
                {"heads_keep": 2, "ffn_keep": 512, "flops_ratio": 0.8, "chosen": False,
                 "why_not": "point loss 0.90 > 0.5", **_v(-0.009)},
            ]},
            "report": {"before_heal": _v(-0.003), "after_heal": _v(0.003)},
        },
        "dev": {"before_heal": _v(-0.002), "written": _v(0.001), "written_is": "healed"},
        "onnx": {"artifacts": {"unpruned": {"onnx_bytes": 10, "w1_p50_ms": 2.0},
                               "pruned": {"error": "ConvertError: no"}}},
        "textpruner": {"ran": False, "version": "1.1", "why": "IndexError", "structure": "groups"},
    }  # fmt: skip
    md = render(r)
    assert "**3 of 4**" in md and "**32 of 512**" in md and "x0.447" in md
    assert "| 3 | 32 | 0.447 | -0.10 | [-1.10, +0.90] | **chosen** |" in md
    assert "point loss 0.90 > 0.5" in md
    assert "| report rows, after heal | 2,000 | 80.00 | 80.30 | +0.30 |" in md
    assert "pruned: conversion failed: `ConvertError: no`" in md
    assert "did not run: `IndexError`" in md and "Why: groups." in md
