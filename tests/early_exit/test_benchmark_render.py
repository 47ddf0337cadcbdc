"""benchmarks/results/early_exit.md is what benchmarks/early_exit.py renders from its JSON."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.early_exit import to_markdown

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_results_markdown_is_rendered_from_the_json():
    report = json.loads((RESULTS / "early_exit.json").read_text())
    assert (RESULTS / "early_exit.md").read_text() == to_markdown(report)
    for name in ("fp32", "int8-dynamic"):
        section = report["precisions"][name]
        assert section["off_vs_full_depth"] == "logits bitwise equal on 872/872 dev sentences"
        assert section["dev"]["off"]["diff_vs_full"] == 0.0
    assert report["cpu"] and report["timing"]["rounds"] >= 1
