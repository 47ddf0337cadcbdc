"""``prune`` on every head: sequence classification (single sentences and pairs), token
classification (entity F1), question answering (SQuAD F1); the written directory loads in
transformers as written, and prune.json records what was pruned, on what data."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from albert_edge.checkpoint import load_checkpoint
from albert_edge.heads import head_by_name
from albert_edge.manifest import sha256_file
from albert_edge.prune import HealSettings, PruneOptions, load_pruned, prune
from tests.prune.conftest import conll, pairs, squad

FAST = dict(importance_rows=40, heal=HealSettings(steps=3, batch_size=8), max_len=48)


def _check(out: Path, data: Path, head: str, metric: str, rows: int) -> dict:
    rec = json.loads((out / "prune.json").read_text())
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["intermediate_size"] == rec["kept"]["ffn_per_layer"] == 32
    assert cfg["pruned_heads"] == rec["kept"]["pruned_heads"] and cfg["pruned_heads"]
    assert rec["data"]["sha256"] == sha256_file(data) and rec["data"]["rows"] == rows
    d = rec["data"]
    assert d["fit_rows"] + d["choose_rows"] + d["report_rows"] == rows
    assert rec["report"]["before_heal"]["metric"] == metric
    assert rec["report"]["before_heal"]["examples"] == d["report_rows"]
    assert rec["heal"]["steps"] == 3 and len(rec["heal"]["log"]) >= 1
    assert rec["loaded_back"]["max_abs_diff"] <= 1e-4
    for flat, layer in rec["layers"].items():
        assert len(layer["heads_kept"]) == 1 and len(layer["ffn_kept"]) == 32
        assert cfg["pruned_heads"][flat] == layer["heads_removed"]
        assert len(layer["head_importance_per_pass"]) == len(layer["runs_at_depths"])
    model = load_pruned(out, head_by_name(head))
    assert type(model).__name__ == head_by_name(head).hf_class
    ours = load_checkpoint(out)  # albert-edge's own loader (convert, verify) reads it too
    assert ours.model.config.intermediate_size == 32
    return rec


def test_single_sentence_classifier(
    make_checkpoint: Callable[..., Path], sst2_rows: Path, tmp_path: Path
) -> None:
    src = make_checkpoint("tiny-groups")  # 2 groups x 2 inner layers, E 16 != H 32
    out = tmp_path / "p"
    result = prune(src, sst2_rows, out, PruneOptions(heads_keep=1, ffn_keep=0.5, **FAST))
    rec = _check(out, sst2_rows, "sequence-classification", "accuracy", 160)
    assert result.record == rec | {"loaded_back": result.record["loaded_back"]}
    assert set(rec["layers"]) == {"0", "1", "2", "3"}
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json",
        "model.safetensors",
        "prune.json",
        "spiece.model",
    ]


def test_sentence_pairs(make_checkpoint: Callable[..., Path], tmp_path: Path) -> None:
    data = pairs(tmp_path / "pairs.tsv", 120)
    prune(
        make_checkpoint("tiny"),
        data,
        tmp_path / "p",
        PruneOptions(heads_keep=1, ffn_keep=32, **FAST),
    )
    _check(tmp_path / "p", data, "sequence-classification", "accuracy", 120)


def test_token_classifier(tagger: Path, tmp_path: Path) -> None:
    data = conll(tmp_path / "ner.txt", 120)
    prune(tagger, data, tmp_path / "p", PruneOptions(heads_keep=1, ffn_keep=0.5, **FAST))
    _check(tmp_path / "p", data, "token-classification", "f1", 120)


def test_question_answering(make_checkpoint: Callable[..., Path], tmp_path: Path) -> None:
    data = squad(tmp_path / "squad.json", 120)
    src = make_checkpoint("tiny", head="question-answering")
    prune(src, data, tmp_path / "p", PruneOptions(heads_keep=1, ffn_keep=0.5, **FAST))
    _check(tmp_path / "p", data, "question-answering", "f1", 120)


@pytest.mark.slow
def test_albert_base_shape(tmp_path: Path, spiece_path: Path, sst2_rows: Path) -> None:
    """albert-base's shape (12 layers, 1 group, 12 heads of 64, FFN 3072)."""
    from albert_edge.configs import make_config, make_random_checkpoint

    cfg = make_config("albert-base", num_hidden_layers=12)
    src = make_random_checkpoint(tmp_path / "m", cfg, spiece_model=spiece_path)
    prune(
        src,
        sst2_rows,
        tmp_path / "p",
        PruneOptions(heads_keep=8, ffn_keep=2048, importance_rows=16, heal=HealSettings(steps=1)),
    )
    cfg_out = json.loads((tmp_path / "p" / "config.json").read_text())
    assert cfg_out["intermediate_size"] == 2048 and len(cfg_out["pruned_heads"]["0"]) == 4
