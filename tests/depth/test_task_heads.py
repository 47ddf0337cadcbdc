"""Depth search, choose and truncate for token-classification and question-answering heads:
a per-depth head scored in the task's metric (entity F1, SQuAD F1) with paired intervals,
and a truncated checkpoint that loads as the task's ALBERT class and converts + verifies."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from albert_edge.cli import main

WORDS = ("the", "a", "cat", "dog", "sat", "ran", "far", "near", "house", "river", "old", "green")
TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def tagger(make_checkpoint: Callable[..., Path], dst: Path) -> Path:
    """A tiny random token classifier whose config.json names the CoNLL tags."""
    shutil.copytree(make_checkpoint("tiny", "token-classification", num_labels=9, seed=1), dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["id2label"] = {str(i): n for i, n in enumerate(TAGS)}
    cfg["label2id"] = {n: i for i, n in enumerate(TAGS)}
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def conll(path: Path, sentences: int, seed: int = 4) -> Path:
    """Synthetic CoNLL-2003 text (IOB1 tags): capitalised words are entities."""
    rng = np.random.default_rng(seed)
    lines = ["-DOCSTART- -X- -X- O", ""]
    ents = ["I-PER", "I-LOC", "I-ORG", "I-MISC"]
    for _ in range(sentences):
        for _ in range(int(rng.integers(3, 9))):
            w = WORDS[int(rng.integers(0, len(WORDS)))]
            if rng.random() < 0.3:
                lines.append(f"{w.title()} NNP B-NP {ents[int(rng.integers(0, 4))]}")
            else:
                lines.append(f"{w} NN I-NP O")
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def squad(path: Path, paragraphs: int, seed: int = 5) -> Path:
    """A tiny SQuAD v1.1 file: each answer is two words of its context."""
    rng = np.random.default_rng(seed)
    data = []
    for p in range(paragraphs):
        words = [WORDS[int(i)] for i in rng.integers(0, len(WORDS), 25)]
        ctx = " ".join(words) + " ."
        qas = []
        for q in range(5):
            w = int(rng.integers(0, 20))
            start = len(" ".join(words[:w])) + (1 if w else 0)
            question = " ".join(WORDS[int(i)] for i in rng.integers(0, len(WORDS), 4)) + "?"
            answer = {"text": " ".join(words[w : w + 2]), "answer_start": start}
            qas.append({"id": f"{p}-{q}", "question": question, "answers": [answer]})
        data.append({"context": ctx, "qas": qas})
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": data}]}))
    return path


def _search(ckpt: Path, data: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    args = ["depth", "search", str(ckpt), "--data", str(data), "-o", str(out), "-q"]
    args += [
        "--fit-rows",
        "40",
        "--held-out-rows",
        "32",
        "--epochs",
        "2",
        "--max-point-loss",
        "100",
    ]
    args += ["--min-lower-bound", "-100"]
    assert main(args) == 0
    return capsys.readouterr().out


def test_token_head_search_records_entity_f1_and_truncates(
    make_checkpoint: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from albert_edge.depth import load_search
    from albert_edge.tasks import encode, read_task_file, score
    from albert_edge.tasks.stats import paired_metric_interval

    ckpt = tagger(make_checkpoint, tmp_path / "ner")
    data = conll(tmp_path / "train.conll", 72)
    text = _search(ckpt, data, tmp_path / "search", capsys)
    assert "held-out f1 %" in text and "f1 " in text.split("Reference:")[1]
    search = load_search(tmp_path / "search")
    assert (
        search.reference["held_out_metric"]["name"] == "f1"
        and search.data["task"] == "token-classification"
    )
    assert search.data["held_out_rows"] == 32 and search.data["fit_rows"] == 40
    refit = {s.depth: s for s in search.scores if s.head == "refit"}
    assert set(refit) == {1, 2, 3} and all(s.metric == "f1" for s in refit.values())
    assert set(search.heads[1]) == {"classifier.weight", "classifier.bias"}
    # the own head at full depth IS the reference: no difference, a zero-width interval
    own3 = search.score(3, "own")
    assert own3.delta == 0.0 and own3.delta_low == 0.0 and own3.delta_high == 0.0
    assert own3.value == search.reference["held_out_metric"]["value"]
    # the heads were fitted: some depth's head differs from the model's own
    assert any(s.fit_metric != search.score(s.depth, "own").fit_metric for s in refit.values())

    # truncate at depth 1: a token classifier with one layer, the depth-1 head
    out = tmp_path / "d1"
    capsys.readouterr()
    args = ["depth", "truncate", str(ckpt), "--depth", "1", "--depth-search"]
    assert main([*args, str(tmp_path / "search"), "-o", str(out), "-q"]) == 0
    import transformers

    model = transformers.AlbertForTokenClassification.from_pretrained(str(out)).eval()
    assert model.config.num_hidden_layers == 1 and model.config.id2label[1] == "B-PER"
    assert bool((model.classifier.weight == search.heads[1]["classifier.weight"]).all())
    # independently: the truncated model's entity F1 on the held-out sentences equals the
    # search's figure for depth 1 (same examples, the task layer's scoring)
    from albert_edge.depth.search import split_rows
    from albert_edge.tokenizer import AlbertTokenizer

    td = read_task_file(data, label2id={n: i for i, n in enumerate(TAGS)})
    split = search.settings["split"]
    from albert_edge.depth import SplitSettings

    _, held = split_rows(len(td.examples), SplitSettings(**split))
    sub = td.subset(held)
    feats = encode(sub, AlbertTokenizer(out / "spiece.model"), int(split["max_length"]))
    outs: dict[str, list[np.ndarray]] = {"logits": []}
    ref: dict[str, list[np.ndarray]] = {"logits": []}
    full = transformers.AlbertForTokenClassification.from_pretrained(str(ckpt)).eval()
    import torch

    for f in range(len(feats)):
        ids = torch.tensor([feats.input_ids[f]])
        with torch.inference_mode():
            outs["logits"].append(model(input_ids=ids).logits[0].numpy())
            ref["logits"].append(full(input_ids=ids).logits[0].numpy())
    m, m_ref = score(sub, feats, outs), score(sub, feats, ref)
    assert m.value == pytest.approx(refit[1].value, abs=1e-9)
    assert m_ref.value == pytest.approx(search.reference["held_out_metric"]["value"], abs=1e-9)
    assert paired_metric_interval(m, m_ref).delta == pytest.approx(refit[1].delta, abs=1e-9)

    # convert → verify --data on the truncated tagger: the task's F1 is reported
    capsys.readouterr()
    art = tmp_path / "art"
    assert main(["convert", str(out), "-o", str(art), "-q"]) == 0
    assert main(["verify", str(art), "--reference", str(out), "--data", str(data), "-q"]) == 0
    manifest = json.loads((art / "manifest.json").read_text())
    assert (
        manifest["depth"]["layers"] == 1
        and manifest["depth"]["evidence"]["held_out_metric"]["name"] == "f1"
    )


def test_span_head_search_records_squad_f1_and_truncates(
    make_checkpoint: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from albert_edge.depth import load_search

    ckpt = make_checkpoint("tiny", "question-answering", seed=2)
    data = squad(tmp_path / "dev-v1.1.json", 15)
    text = _search(ckpt, data, tmp_path / "search", capsys)
    assert "held-out f1 %" in text and "questions" in text
    search = load_search(tmp_path / "search")
    assert search.data["task"] == "question-answering" and search.data["held_out_rows"] == 32
    assert set(search.heads[2]) == {"qa_outputs.weight", "qa_outputs.bias"}
    assert search.score(3, "own").delta == 0.0
    assert all(0.0 <= s.value <= 1.0 and s.metric == "f1" for s in search.scores)
    out = tmp_path / "d2"
    capsys.readouterr()
    args = ["depth", "truncate", str(ckpt), "--depth", "2", "--depth-search"]
    assert main([*args, str(tmp_path / "search"), "-o", str(out), "-q"]) == 0
    import transformers

    model = transformers.AlbertForQuestionAnswering.from_pretrained(str(out))
    assert model.config.num_hidden_layers == 2
    assert bool((model.qa_outputs.bias == search.heads[2]["qa_outputs.bias"]).all())


@pytest.mark.slow  # a second convert + verify (the token head's test runs one by default)
def test_a_truncated_span_model_converts_and_verifies_on_squad(
    make_checkpoint: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt = make_checkpoint("tiny", "question-answering", seed=2)
    data = squad(tmp_path / "dev-v1.1.json", 15)
    _search(ckpt, data, tmp_path / "search", capsys)
    out, art = tmp_path / "d2", tmp_path / "art"
    args = ["depth", "truncate", str(ckpt), "--depth", "2", "--depth-search"]
    assert main([*args, str(tmp_path / "search"), "-o", str(out), "-q"]) == 0
    assert main(["convert", str(out), "-o", str(art), "-q"]) == 0
    assert main(["verify", str(art), "--reference", str(out), "--data", str(data), "-q"]) == 0
    manifest = json.loads((art / "manifest.json").read_text())
    assert (
        manifest["depth"]["layers"] == 2
        and manifest["depth"]["evidence"]["held_out_metric"]["name"] == "f1"
    )


def one_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The CLI's stderr for ``args``: exactly one line, with a non-zero exit."""
    capsys.readouterr()
    code = main(args)
    err = [x for x in capsys.readouterr().err.strip().splitlines() if x]
    assert code != 0 and len(err) == 1, err
    return err[0]


def test_wrong_data_or_head_is_one_line_before_the_model_loads(
    make_checkpoint: Callable[..., Path],
    small_tsv: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ckpt = tagger(make_checkpoint, tmp_path / "ner")
    out = tmp_path / "search"
    # an SST-2 file for a tagger: the format the head needs is named
    line = one_line(
        ["depth", "search", str(ckpt), "--data", str(small_tsv), "-o", str(out)], capsys
    )
    assert str(small_tsv) in line and "CoNLL" in line and not out.exists()
    # a SQuAD file for a tagger
    sq = squad(tmp_path / "q.json", 2)
    line = one_line(["depth", "search", str(ckpt), "--data", str(sq), "-o", str(out)], capsys)
    assert "question-answering data" in line and not out.exists()
    # a head the search does not serve
    mc = make_checkpoint("tiny", "multiple-choice")
    line = one_line(["depth", "search", str(mc), "--data", str(small_tsv), "-o", str(out)], capsys)
    assert "depth search serves sequence-classification, token-classification" in line
    assert "multiple-choice" in line and not out.exists()


def test_squad_v2_threshold_is_chosen_on_the_full_depth_model_and_held_for_every_depth(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    """SQuAD v2.0: the null threshold is chosen once, on the full-depth model's outputs for
    the even-numbered held-out questions; every depth is scored on the odd ones."""
    from albert_edge.depth import FitSettings, SplitSettings, search_depths

    data = squad(tmp_path / "v2.json", 16)
    doc = json.loads(data.read_text())
    doc["version"] = "v2.0"
    for p in doc["data"][0]["paragraphs"]:
        for i, qa in enumerate(p["qas"]):
            qa["is_impossible"] = i % 3 == 0
            if qa["is_impossible"]:
                qa["answers"] = []
    data.write_text(json.dumps(doc))
    ckpt = make_checkpoint("tiny", "question-answering", seed=2)
    from albert_edge.errors import TooFewRowsError

    with pytest.raises(TooFewRowsError, match="scores the other 20, fewer than the 30"):
        search_depths(ckpt, data, split=SplitSettings(fit_rows=40, held_out_rows=40))
    split = SplitSettings(fit_rows=20, held_out_rows=60, max_length=64)
    search = search_depths(ckpt, data, split=split, fit=FitSettings(epochs=0))
    assert search.data["format"] == "squad-v2.0" and "null_threshold" in search.reference
    assert search.data["scored_examples"] == 30  # the odd-numbered half of 60
    assert {"HasAns_f1", "NoAns_f1"} <= set(search.reference["held_out_metrics"])
    own3 = search.score(3, "own")
    assert own3.delta == 0.0 and own3.value == search.reference["held_out_metric"]["value"]
