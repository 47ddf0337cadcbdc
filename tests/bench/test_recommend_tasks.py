"""``bench --recommend --data`` on task files: a CoNLL file judges the candidates in entity
F1, a SQuAD file in SQuAD F1, a pair file on both sentences; wrong data for the head is one
line before any model loads."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.depth.test_task_heads import conll, one_line, squad, tagger


def test_wrong_data_for_the_head_is_one_line_before_loading(
    make_checkpoint: Callable[..., Path],
    sst2_dev: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import albert_edge.checkpoint as checkpoint

    def no_load(*_a: object, **_k: object) -> None:
        raise AssertionError("the model was loaded before the data was judged")

    ner = tagger(make_checkpoint, tmp_path / "ner")
    data = conll(tmp_path / "dev.conll", 64)
    monkeypatch.setattr(checkpoint, "load_checkpoint", no_load)
    base = ["bench", "--recommend", "--candidates", "onnx:fp32", "--rounds", "2"]
    # an SST-2 file for a tagger
    line = one_line([*base, str(ner), "--data", str(sst2_dev)], capsys)
    assert str(sst2_dev) in line and "CoNLL" in line
    # a CoNLL file for a classifier
    line = one_line([*base, str(make_checkpoint("tiny")), "--data", str(data)], capsys)
    assert str(data) in line
    # a SQuAD file for a tagger
    sq = squad(tmp_path / "q.json", 2)
    line = one_line([*base, str(ner), "--data", str(sq)], capsys)
    assert "question-answering data" in line
    # dynamic exit is for single-sentence classifiers: said before the model loads
    line = one_line([*base, str(ner), "--data", str(data), "--exit-data", str(sst2_dev)], capsys)
    assert "--exit-data" in line and "token-classification data" in line
    # too few sentences to split in two
    small = conll(tmp_path / "small.conll", 40)
    line = one_line([*base, str(ner), "--data", str(small)], capsys)
    assert "split has 20 sentences" in line


def test_choose_splits_are_written_in_their_own_format(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    """What the static precisions calibrate on: the choose split, re-read as the same task."""
    from albert_edge.bench.recommend_data import read_splits, write_choose
    from albert_edge.tasks import read_task_file

    ner = tagger(make_checkpoint, tmp_path / "ner")
    splits = read_splits(conll(tmp_path / "dev.conll", 64), None, ner)
    assert splits is not None and splits["task"] == "token-classification"
    assert len(splits["choose"].examples) == 32 and "32 sentences" in splits["how"]
    back = read_task_file(write_choose(splits, tmp_path))
    assert [e.words for e in back.examples] == [e.words for e in splits["choose"].examples]
    assert [e.tags for e in back.examples] == [e.tags for e in splits["choose"].examples]
    qa = make_checkpoint("tiny", "question-answering", seed=2)
    splits = read_splits(squad(tmp_path / "dev-v1.1.json", 14), None, qa)
    assert splits is not None and splits["task"] == "question-answering"
    (tmp_path / "qa").mkdir()
    back = read_task_file(write_choose(splits, tmp_path / "qa"))
    want = splits["choose"].examples
    assert sorted((e.id, e.question, e.answers) for e in back.examples) == sorted(
        (e.id, e.question, e.answers) for e in want
    )


@pytest.mark.slow  # converts twice and times the candidates in child processes
def test_recommend_on_a_conll_file_reports_entity_f1(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    import subprocess

    ner = tagger(make_checkpoint, tmp_path / "ner")
    data = conll(tmp_path / "dev.conll", 64)
    out = tmp_path / "rec.json"
    cmd = [sys.executable, "-m", "albert_edge.cli", "bench", str(ner), "--recommend"]
    cmd += ["--candidates", "onnx:fp32,onnx:int8-dynamic", "--seq-lens", "16"]
    cmd += ["--threads", "1", "--rounds", "2", "--runs", "2", "--data", str(data)]
    cmd += ["-q", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["task"] == "token-classification" and result["metric"] == "f1"
    for r in result["candidates"]:
        assert r["metric"] == "f1" and r["examples"] == 32 and 0.0 <= r["accuracy"] <= 1.0
        assert set(r["delta_vs_checkpoint"]) == {"points", "low", "high"}
    fp32 = next(r for r in result["candidates"] if r["precision"] == "fp32")
    # fp32 ONNX tags as PyTorch does: the same F1, no difference
    assert fp32["accuracy"] == pytest.approx(fp32["reference_accuracy"], abs=1e-9)
    acc = result["accuracy"]
    assert acc["metric"] == "f1" and acc["checkpoint"]["examples"] == 32
    assert "entity F1 (Δ pts)" in proc.stdout and "f1 (the task metric)" in proc.stdout
    assert "report split (32 examples, not used to choose)" in proc.stdout


def test_candidates_are_scored_in_entity_f1_paired_with_the_checkpoint(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    """The scorer --recommend judges a CoNLL file with: an fp32 ONNX tagger scores the
    checkpoint's entity F1 on the choose split (no difference, a zero-width interval), and
    the figure is the task layer's F1 of transformers' own model on those sentences."""
    import numpy as np
    import torch
    import transformers

    from albert_edge.bench.recommend_data import read_splits
    from albert_edge.bench.recommend_tasks import TaskScorer
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions
    from albert_edge.tasks import encode, score

    ner = tagger(make_checkpoint, tmp_path / "ner")
    splits = read_splits(conll(tmp_path / "dev.conll", 64), None, ner)
    assert splits is not None
    convert(ner, tmp_path / "art", ConvertOptions(target="onnx", verify=False))
    scorer = TaskScorer(load_checkpoint(ner), splits, threads=1)
    got = scorer.candidate_fields(tmp_path / "art", "choose")
    assert got["metric"] == "f1" and got["examples"] == 32
    assert got["accuracy"] == pytest.approx(got["reference_accuracy"], abs=1e-9)
    assert got["delta_vs_checkpoint"] == {"points": 0.0, "low": 0.0, "high": 0.0}
    low, high = got["accuracy_interval"]
    assert low <= got["accuracy"] <= high
    # independently: transformers' model sentence by sentence, the task layer's F1
    data = splits["choose"]
    feats = encode(data, load_checkpoint(ner).tokenizer(), 512)
    model = transformers.AlbertForTokenClassification.from_pretrained(str(ner)).eval()
    logits: list[np.ndarray] = []
    for f in range(len(feats)):
        with torch.inference_mode():
            logits.append(model(input_ids=torch.tensor([feats.input_ids[f]])).logits[0].numpy())
    assert score(data, feats, {"logits": logits}).value == pytest.approx(
        scorer.checkpoint_value("choose"), abs=1e-9
    )
