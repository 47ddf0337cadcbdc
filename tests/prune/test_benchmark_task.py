"""``python -m benchmarks.prune --task squad``: a QA model pruned at a fixed level with the
heal, its eval rows scored for the unpruned, unhealed and written models and for both int8
ONNX artifacts (ONNX Runtime, the QA head's start and end logits), recorded under
``tasks.squad`` of prune.json beside the SST-2 run, which is left as it was."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

import benchmarks.prune as bench
from tests.prune.conftest import squad


def test_squad_task_scores_the_onnx_artifacts_and_keeps_the_sst2_run(
    make_checkpoint: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "prune.json").write_text(json.dumps({"sst2": "kept as it was"}))
    monkeypatch.setattr(bench, "RESULTS", results)
    monkeypatch.setattr(bench, "render", lambda r: "rendered\n")  # the SST-2 part is absent
    src = make_checkpoint("tiny", head="question-answering")
    data, dev = squad(tmp_path / "train.json", 120), squad(tmp_path / "eval.json", 40)
    argv = ["--task", "squad", "--model", str(src), "--data", str(data), "--dev", str(dev)]
    argv += ["--ffn-keep", "0.5", "--heads-keep", "1", "--heal-steps", "2"]
    argv += ["--heal-batch-size", "8", "--work", str(tmp_path / "work")]
    assert bench.main(argv) == 0
    r = json.loads((results / "prune.json").read_text())
    assert r["sst2"] == "kept as it was"
    t = r["tasks"]["squad"]
    assert t["prune"]["kept"]["ffn_per_layer"] == 32 and t["prune"]["kept"]["heads_per_layer"] == 1
    assert t["prune"]["heal"]["steps"] == 2
    assert t["dev"]["written"]["metric"] == "f1" and t["dev"]["written"]["examples"] == 40
    for name in ("unpruned", "pruned"):
        assert t["onnx"]["artifacts"][name]["onnx_bytes"] > 0
        got = t["onnx"]["dev"][name]
        assert got["metric"] == "f1" and got["examples"] == 40
        assert abs(got["delta"]) <= 1  # a fraction: 1 = 100 points
    md = bench.render_task("squad", t, lambda name, v: f"| {name} | {v['examples']} |")
    text = "\n".join(md)
    assert "trained from scratch" in text and "--ffn-keep 0.5" in text
    assert "int8 ONNX pruned, eval.json" in text and "50 % of the FFN removed" in text
    assert "| choose rows, after heal |" in text  # shown whether the heal was kept or not
