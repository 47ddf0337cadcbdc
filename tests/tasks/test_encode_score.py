"""Encoding and scoring: inputs as the models were trained on them, metrics equal to the
reference implementations (sklearn, scipy, seqeval, the official SQuAD script's rules)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from albert_edge.tasks import (
    encode,
    paired_bootstrap,
    paired_metric_interval,
    read_task_file,
    run_features,
    score,
)
from albert_edge.tasks.squad import f1, normalize_answer
from albert_edge.tokenizer import AlbertTokenizer


@pytest.fixture(scope="module")
def tok(spiece_path: Path) -> AlbertTokenizer:
    return AlbertTokenizer(spiece_path)


def one_hot(labels: list[int], width: int) -> list[np.ndarray]:
    return [np.eye(width)[i] for i in labels]


def test_pair_encoding_is_the_tokenizers_pair(tmp_path: Path, tok: AlbertTokenizer) -> None:
    p = tmp_path / "p.tsv"
    p.write_text("sentence1\tsentence2\tlabel\nA cat sat.\tA dog ran far away.\t1\n")
    feats = encode(read_task_file(p), tok, 12)
    want = tok.encode("A cat sat.", "A dog ran far away.", max_length=12, padding="none")
    assert feats.input_ids == want.input_ids and feats.token_type_ids == want.token_type_ids
    assert 1 in feats.token_type_ids[0]  # the second sentence is fed, as segment 1


def test_classification_metrics_equal_sklearn(tmp_path: Path, tok: AlbertTokenizer) -> None:
    from sklearn.metrics import f1_score, matthews_corrcoef

    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 60).tolist()
    pred = [g if rng.random() < 0.7 else 1 - g for g in gold]
    rows = "".join(f"{i}\t{i}\ts{i}\tt{i}\t{g}\n" for i, g in enumerate(gold))
    p = tmp_path / "qqp.tsv"
    p.write_text(
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n" + rows.replace("\ts", "\ts")
    )
    p.write_text("id\tqid1\tquestion1\tquestion2\tis_duplicate\n" + rows)
    data = read_task_file(p)
    feats = encode(data, tok, 16)
    m = score(data, feats, {"logits": one_hot(pred, 2)})
    assert m.values["accuracy"] == np.mean(np.asarray(gold) == np.asarray(pred))
    assert m.values["f1"] == pytest.approx(f1_score(gold, pred))
    assert m.resample(np.arange(60)[None, :])["f1"][0] == pytest.approx(f1_score(gold, pred))
    cola = tmp_path / "cola.tsv"
    cola.write_text(
        "".join(f"src\t{g}\t{'' if g else '*'}\tsentence {i}\n" for i, g in enumerate(gold))
    )
    data = read_task_file(cola)
    m = score(data, encode(data, tok, 16), {"logits": one_hot(pred, 2)})
    assert m.primary == "matthews" and m.value == pytest.approx(matthews_corrcoef(gold, pred))
    assert m.resample(np.arange(60)[None, :])["matthews"][0] == pytest.approx(m.value)


def test_regression_correlations_equal_scipy(tmp_path: Path, tok: AlbertTokenizer) -> None:
    from scipy.stats import pearsonr, spearmanr

    rng = np.random.default_rng(1)
    gold = rng.uniform(0, 5, 40)
    pred = gold + rng.normal(0, 1, 40)
    p = tmp_path / "sts.tsv"
    p.write_text(
        "sentence1\tsentence2\tscore\n" + "".join(f"a{i}\tb\t{g}\n" for i, g in enumerate(gold))
    )
    data = read_task_file(p, num_labels=1)
    m = score(data, encode(data, tok, 16), {"logits": [np.asarray([x]) for x in pred]})
    assert m.values["pearson"] == pytest.approx(pearsonr(pred, gold)[0])
    assert m.values["spearman"] == pytest.approx(spearmanr(pred, gold)[0])


def test_token_labels_on_first_piece(tmp_path: Path, tok: AlbertTokenizer) -> None:
    p = tmp_path / "c.txt"
    p.write_text("Blackburnshire B-LOC\nis O\n")
    data = read_task_file(p)
    feats = encode(data, tok, 32)
    pieces = tok.tokenize_ids("Blackburnshire")
    assert len(pieces) > 1
    ids = data.label2id
    assert feats.labels[0] == [-100, ids["B-LOC"]] + [-100] * (len(pieces) - 1) + [ids["O"], -100]
    assert feats.word_ids[0] == [-1, 0] + [-1] * (len(pieces) - 1) + [1, -1]


def test_long_sentence_split_at_word_boundaries(tmp_path: Path, tok: AlbertTokenizer) -> None:
    p = tmp_path / "c.txt"
    p.write_text("".join(f"word{i} O\n" for i in range(40)))
    data = read_task_file(p)
    feats = encode(data, tok, 16)
    assert len(feats) > 1 and all(len(x) <= 16 for x in feats.input_ids)
    seen = [w for ws in feats.word_ids for w in ws if w >= 0]
    assert seen == list(range(40))  # every word predicted exactly once


def test_seqeval_equality_on_iob1(tmp_path: Path, tok: AlbertTokenizer) -> None:
    """Entity F1 equals seqeval's default mode on the file's own IOB1 tags (conlleval)."""
    from seqeval.metrics import f1_score

    rng = np.random.default_rng(2)
    tags = ["O", "I-PER", "I-LOC", "B-LOC", "I-ORG"]
    sents = [[tags[i] for i in rng.integers(0, 5, rng.integers(2, 9))] for _ in range(30)]
    p = tmp_path / "c.txt"
    p.write_text("\n".join("".join(f"w{j} NN O {t}\n" for j, t in enumerate(s)) for s in sents))
    preds = [[t if rng.random() < 0.7 else tags[rng.integers(0, 5)] for t in s] for s in sents]
    data = read_task_file(p)
    feats = encode(data, tok, 32)
    names = list(data.label_names)
    from albert_edge.tasks.tokens import iob1_to_iob2

    logits = []
    for f, wids in enumerate(feats.word_ids):
        e = feats.example_index[f]
        x = np.zeros((len(wids), len(names)))
        for t, w in enumerate(wids):
            if w >= 0:
                x[t, names.index(iob1_to_iob2(preds[e])[w])] = 1
        logits.append(x)
    m = score(data, feats, {"logits": logits})
    assert m.values["f1"] == pytest.approx(f1_score(sents, preds), abs=1e-12)
    assert m.resample(np.arange(30)[None, :])["f1"][0] == pytest.approx(m.values["f1"])


def test_official_squad_normalisation() -> None:
    assert normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert f1("the Broncos of Denver", "Denver Broncos") == pytest.approx(0.8)
    assert f1("", "") == 1.0 and f1("x", "") == 0.0


def squad_file(tmp_path: Path, version: str = "1.1") -> Path:
    ctx = " ".join(f"filler{i}" for i in range(60)) + " The answer is Santa Clara, California."
    start = ctx.index("Santa Clara")
    qas = [
        {
            "id": "a",
            "question": "Where?",
            "answers": [
                {"text": "Santa Clara", "answer_start": start},
                {"text": "Santa Clara, California", "answer_start": start},
            ],
        },
    ]
    if version == "v2.0":
        qas.append({"id": "b", "question": "Who?", "answers": [], "is_impossible": True})
    p = tmp_path / "s.json"
    p.write_text(
        json.dumps(
            {
                "version": version,
                "data": [{"title": "t", "paragraphs": [{"context": ctx, "qas": qas}]}],
            }
        )
    )
    return p


def test_squad_windows_and_best_span(tmp_path: Path, tok: AlbertTokenizer) -> None:
    data = read_task_file(squad_file(tmp_path))
    feats = encode(data, tok, 48, stride=16)
    assert len(feats) > 2 and all(len(x) <= 48 for x in feats.input_ids)
    # the window holding the answer labels it; its tokens map back to the answer's words
    held = [f for f in range(len(feats)) if feats.labels[f] != (0, 0)]
    assert held
    a, b = feats.labels[held[0]]
    ex = data.examples[0]
    assert (
        ex.word_span_text(feats.word_ids[held[0]][a], feats.word_ids[held[0]][b]) == "Santa Clara,"
    )
    # logits pointing at the label span give EM 1 (the comma is punctuation)
    start = [np.full(len(x), -5.0) for x in feats.input_ids]
    end = [np.full(len(x), -5.0) for x in feats.input_ids]
    for f in held:
        s, e = feats.labels[f]
        start[f][s], end[f][e] = 5.0, 5.0
    m = score(data, feats, {"start_logits": start, "end_logits": end})
    assert m.values == {"exact_match": 1.0, "f1": 1.0} and m.predictions == ["Santa Clara,"]


def test_squad_v2_null_threshold(tmp_path: Path, tok: AlbertTokenizer) -> None:
    data = read_task_file(squad_file(tmp_path, "v2.0"))
    feats = encode(data, tok, 48, stride=16)
    start = [np.zeros(len(x)) for x in feats.input_ids]
    end = [np.zeros(len(x)) for x in feats.input_ids]
    for f in range(len(feats)):
        if data.examples[feats.example_index[f]].is_impossible:
            start[f][0] = end[f][0] = 9.0  # [CLS] wins: null
        elif feats.labels[f] != (0, 0):
            s, e = feats.labels[f]
            start[f][s] = end[f][e] = 9.0
    m = score(data, feats, {"start_logits": start, "end_logits": end}, null_threshold=0.0)
    assert m.predictions == ["Santa Clara,", ""]
    assert m.values["HasAns_exact"] == 1.0 and m.values["NoAns_exact"] == 1.0


def test_paired_metric_interval_is_paired_bootstrap_for_accuracy(
    tmp_path: Path, tok: AlbertTokenizer
) -> None:
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 2, 80).tolist()
    p = tmp_path / "d.tsv"
    p.write_text("label\tsentence\n" + "".join(f"{g}\ts{i}\n" for i, g in enumerate(gold)))
    data = read_task_file(p)
    feats = encode(data, tok, 16)
    a = [g if rng.random() < 0.8 else 1 - g for g in gold]
    b = [g if rng.random() < 0.6 else 1 - g for g in gold]
    ma = score(data, feats, {"logits": one_hot(a, 2)})
    mb = score(data, feats, {"logits": one_hot(b, 2)})
    iv = paired_metric_interval(ma, mb)
    ref = paired_bootstrap(np.equal(a, gold), np.equal(b, gold))
    assert iv.delta == pytest.approx(ref.delta)
    assert iv.low == pytest.approx(ref.low) and iv.high == pytest.approx(ref.high)


def test_run_features_slices_per_token_outputs(tmp_path: Path, tok: AlbertTokenizer) -> None:
    p = tmp_path / "c.txt"
    p.write_text("a O\n\nmuch O\nlonger O\nsentence O\nhere O\n")
    data = read_task_file(p)
    feats = encode(data, tok, 32)
    seen_widths = []

    def model(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        seen_widths.append(feeds["input_ids"].shape[1])
        return {"logits": feeds["input_ids"][..., None].astype(float)}

    out = run_features(feats, model, batch_size=8)
    assert [o[:, 0].tolist() for o in out["logits"]] == feats.input_ids


def test_squad_context_pieces_are_the_whole_contexts(tok: AlbertTokenizer) -> None:
    """A window's context pieces equal transformers' tokenizer on the whole paragraph
    (what ``run_qa.py`` and the pipelines feed), on real SQuAD dev paragraphs: a word that
    opens with a piece the tokenizer splits off ("(", '"', "-") keeps its lone "▁"."""
    from transformers import AlbertTokenizerFast

    sample = Path(__file__).resolve().parents[1] / "data" / "squad" / "dev-v1.1-sample.json"
    data = read_task_file(sample)
    fast = AlbertTokenizerFast(vocab_file=str(tok.path))
    feats = encode(data, tok, 512)
    seen: set[str] = set()
    opens_with_split_piece = 0
    for f, e in enumerate(feats.example_index):
        ex = data.examples[e]
        if ex.context in seen:
            continue
        seen.add(ex.context)
        ctx = [i for i, w in zip(feats.input_ids[f], feats.word_ids[f], strict=True) if w >= 0]
        assert ctx == fast(ex.context, add_special_tokens=False)["input_ids"], ex.context[:60]
        opens_with_split_piece += any(w[0] in '("-.' for w in ex.words[1:])
    assert len(seen) >= 3 and opens_with_split_piece >= 1
