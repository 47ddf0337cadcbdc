"""``verify --data`` through the task layer, end to end on converted ONNX artifacts: the
metric it reports equals one computed independently, with transformers' own classes and
the reference metric libraries, on the same rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

WORDS = [
    *("the", "a", "cat", "dog", "sat", "ran", "far", "near"),
    *("house", "river", "green", "old", "quickly", "slowly", "over", "under"),
]
CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def sentence(rng: np.random.Generator, n: int) -> str:
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), n)) + " ."


def converted(ckpt: Path, out: Path) -> Path:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    convert(ckpt, out, ConvertOptions(target="onnx", verify=False))
    return out


def with_labels(src: Path, dst: Path, names: list[str]) -> Path:
    """A copy of checkpoint ``src`` whose config.json names its classes ``names``."""
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["id2label"] = {str(i): n for i, n in enumerate(names)}
    cfg["label2id"] = {n: i for i, n in enumerate(names)}
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def centred(src: Path, dst: Path, pairs: list[tuple[str, str]], tok: Any) -> Path:
    """A copy of classifier ``src`` whose class-1 bias puts the decision at the median
    pair-fed logit difference: a random model's logits barely move with its input (every
    row gets one class), this one predicts both classes, by its whole input."""
    import torch
    from transformers import AlbertForSequenceClassification

    model = AlbertForSequenceClassification.from_pretrained(str(src)).eval()
    with torch.inference_mode():
        diffs = [
            float((lambda x: x[0, 1] - x[0, 0])(model(**tok(a, b, return_tensors="pt")).logits))
            for a, b in pairs
        ]
    with torch.no_grad():
        # midway between two neighbouring differences: no row sits on the boundary
        mid = float(np.mean(np.sort(diffs)[len(diffs) // 2 - 1 : len(diffs) // 2 + 1]))
        model.classifier.bias[1] -= mid
    model.save_pretrained(str(dst))
    shutil.copyfile(src / "spiece.model", dst / "spiece.model")
    return dst


def test_verify_pair_file_feeds_both_sentences(
    make_checkpoint: Any, spiece_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The must-show of issue 44: a GLUE pair file is scored on both sentences, and the
    accuracy equals a pair-fed evaluation with AlbertForSequenceClassification itself (was:
    sentence1 alone, a different task, reported with exit 0)."""
    import torch
    from transformers import AlbertForSequenceClassification, AlbertTokenizerFast

    from albert_edge.verify import verify

    rng = np.random.default_rng(0)
    pairs = [(sentence(rng, 6), sentence(rng, 9)) for _ in range(48)]
    hf_tok = AlbertTokenizerFast(vocab_file=str(spiece_path))
    ckpt = centred(make_checkpoint("tiny", seed=3), tmp_path / "ckpt", pairs, hf_tok)
    model = AlbertForSequenceClassification.from_pretrained(str(ckpt)).eval()

    def predict(a: str, b: str | None) -> int:
        enc = hf_tok(a, b, return_tensors="pt")
        with torch.inference_mode():
            return int(model(**enc).logits.argmax(-1))

    pair_pred = [predict(a, b) for a, b in pairs]
    first_pred = [predict(a, None) for a, _ in pairs]
    assert pair_pred != first_pred  # the second sentence changes predictions: the test can fail
    labels = [p if i % 3 else 1 - p for i, p in enumerate(pair_pred)]
    pair_acc = float(np.mean(np.equal(pair_pred, labels)))
    first_acc = float(np.mean(np.equal(first_pred, labels)))
    assert pair_acc != first_acc
    data = tmp_path / "dev.tsv"
    data.write_text(
        "index\tsentence1\tsentence2\tlabel\n"
        + "".join(f"{i}\t{a}\t{b}\t{y}\n" for i, ((a, b), y) in enumerate(zip(pairs, labels)))
    )
    art = converted(ckpt, tmp_path / "art")
    report = verify(art, reference=ckpt, data=data, seq_lens=(8,), progress=False)
    acc = report.accuracy
    assert acc is not None and report.passed, report.failures()
    assert acc["accuracy_reference"] == pair_acc and acc["accuracy_artifact"] == pair_acc
    assert acc["pair"] == "sentence1/sentence2" and acc["examples"] == 48
    iv = acc["interval_points"]
    assert iv["low"] <= acc["delta_points"] <= iv["high"]
    # MRPC's own layout (BOM, Quality, #1/#2 String) reads the same pairs, with F1 besides
    mrpc = tmp_path / "mrpc.tsv"
    mrpc.write_bytes(
        b"\xef\xbb\xbf"
        + (
            "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
            + "".join(
                f"{y}\t{i}\t{i}\t{a}\t{b}\n" for i, ((a, b), y) in enumerate(zip(pairs, labels))
            )
        ).encode()
    )
    from albert_edge.cli import main

    args = ["verify", str(art), "--reference", str(ckpt), "--data", str(mrpc), "--seq-lens", "8"]
    assert main([*args, "--json", "--quiet"]) == 0
    d = json.loads(capsys.readouterr().out)["accuracy"]
    assert d["accuracy_reference"] == pair_acc
    from sklearn.metrics import f1_score

    assert d["metrics_reference"]["f1"] == pytest.approx(f1_score(labels, pair_pred))


def test_verify_refuses_wrong_data_before_loading(make_checkpoint: Any, tmp_path: Path) -> None:
    from albert_edge.tasks import DataError
    from albert_edge.verify import verify

    ckpt = make_checkpoint("tiny", seed=3)
    art = converted(ckpt, tmp_path / "art")
    squad = tmp_path / "squad.json"
    squad.write_text(
        json.dumps(
            {
                "data": [
                    {
                        "paragraphs": [
                            {
                                "context": "x y",
                                "qas": [
                                    {
                                        "id": "1",
                                        "question": "q",
                                        "answers": [{"text": "y", "answer_start": 2}],
                                    }
                                ],
                            }
                        ]
                    }
                ]
            }
        )
    )
    with pytest.raises(
        DataError, match=r"squad\.json: question-answering data .* sequence-classification model"
    ):
        verify(art, reference=ckpt, data=squad)
    rte = tmp_path / "rte.tsv"
    rte.write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")
    with pytest.raises(DataError, match=r"rte\.tsv:2: label 'entailment' is a name"):
        verify(art, reference=ckpt, data=rte)


def hf_outputs(cls_name: str, ckpt: Path, feats: Any) -> list[dict[str, np.ndarray]]:
    """Each feature run alone (no padding) through transformers' own head class."""
    import torch
    import transformers

    model = getattr(transformers, cls_name).from_pretrained(str(ckpt)).eval()
    out = []
    for f in range(len(feats)):
        ids = torch.tensor([feats.input_ids[f]])
        types = torch.tensor([feats.token_type_ids[f]])
        with torch.inference_mode():
            o = model(input_ids=ids, token_type_ids=types, attention_mask=torch.ones_like(ids))
        out.append({k: v[0].numpy() for k, v in o.items() if k.endswith("logits")})
    return out


def test_verify_ner_entity_f1(make_checkpoint: Any, spiece_path: Path, tmp_path: Path) -> None:
    from seqeval.metrics import f1_score

    from albert_edge.tasks import encode, read_task_file
    from albert_edge.tokenizer import AlbertTokenizer
    from albert_edge.verify import verify

    base = make_checkpoint("tiny", "token-classification", num_labels=9, seed=1)
    ckpt = with_labels(base, tmp_path / "ner", CONLL_TAGS)
    rng = np.random.default_rng(4)
    iob1 = ["O", "O", "I-PER", "I-LOC", "I-ORG", "B-LOC", "I-MISC"]
    lines = ["-DOCSTART- -X- -X- O", ""]
    for _ in range(40):
        for _ in range(rng.integers(3, 12)):
            lines.append(
                f"{WORDS[rng.integers(0, len(WORDS))].title()} NNP B-NP {iob1[rng.integers(0, 7)]}"
            )
        lines.append("")
    data = tmp_path / "eng.testa"
    data.write_text("\n".join(lines))
    art = converted(ckpt, tmp_path / "art")
    report = verify(art, reference=ckpt, data=data, seq_lens=(8,), progress=False)
    acc = report.accuracy
    assert acc is not None and report.passed, report.failures()
    assert acc["task"] == "token-classification" and acc["metric"] == "f1"
    # independently: transformers' model per sentence, first-piece argmax, seqeval on the
    # file's own IOB1 tags (conlleval's counting)
    td = read_task_file(data, label2id={n: i for i, n in enumerate(CONLL_TAGS)})
    feats = encode(td, AlbertTokenizer(spiece_path), 128)
    outs = hf_outputs("AlbertForTokenClassification", ckpt, feats)
    gold_raw = [
        [ln.split()[-1] for ln in block.splitlines()]
        for block in "\n".join(lines[2:]).split("\n\n")
        if block.strip()
    ]
    pred = [["O"] * len(g) for g in gold_raw]
    for f, o in enumerate(outs):
        for t, w in enumerate(feats.word_ids[f]):
            if w >= 0:
                pred[feats.example_index[f]][w] = CONLL_TAGS[int(o["logits"][t].argmax())]
    want = f1_score(gold_raw, pred)
    assert acc["metric_reference"] == pytest.approx(want, abs=1e-12)
    assert acc["metric_artifact"] == pytest.approx(want, abs=1e-12)


def test_verify_squad_f1(make_checkpoint: Any, spiece_path: Path, tmp_path: Path) -> None:
    from albert_edge.tasks import encode, read_task_file
    from albert_edge.tasks.squad import answer_scores
    from albert_edge.tokenizer import AlbertTokenizer
    from albert_edge.verify import verify

    ckpt = make_checkpoint("tiny", "question-answering", seed=2)
    rng = np.random.default_rng(5)
    paragraphs = []
    for p in range(8):
        ctx = sentence(rng, 25)
        qas = []
        for q in range(5):
            start_word = int(rng.integers(0, 20))
            words = ctx.split(" ")
            start = len(" ".join(words[:start_word])) + (1 if start_word else 0)
            text = " ".join(words[start_word : start_word + 2])
            qas.append(
                {
                    "id": f"{p}-{q}",
                    "question": sentence(rng, 4) + "?",
                    "answers": [{"text": text, "answer_start": start}],
                }
            )
        paragraphs.append({"context": ctx, "qas": qas})
    data = tmp_path / "dev-v1.1.json"
    data.write_text(
        json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]})
    )
    art = converted(ckpt, tmp_path / "art")
    report = verify(art, reference=ckpt, data=data, seq_lens=(8,), progress=False)
    acc = report.accuracy
    assert acc is not None and report.passed, report.failures()
    assert acc["task"] == "question-answering" and acc["examples"] == 40
    # independently: transformers per window (each context fits one), the best span by
    # brute force over every start <= end within 30 tokens in the context, official F1
    td = read_task_file(data)
    feats = encode(td, AlbertTokenizer(spiece_path), 128)
    assert len(feats) == 40
    outs = hf_outputs("AlbertForQuestionAnswering", ckpt, feats)
    f1s, ems = [], []
    for f, o in enumerate(outs):
        ex = td.examples[feats.example_index[f]]
        ctx = [t for t, w in enumerate(feats.word_ids[f]) if w >= 0]
        s, e = max(
            ((s, e) for s in ctx for e in ctx if s <= e < s + 30),
            key=lambda se: o["start_logits"][se[0]] + o["end_logits"][se[1]],
        )
        em, f1 = answer_scores(ex, ex.word_span_text(feats.word_ids[f][s], feats.word_ids[f][e]))
        ems.append(em)
        f1s.append(f1)
    assert acc["metric_reference"] == pytest.approx(np.mean(f1s), abs=1e-12)
    assert acc["metrics_reference"]["exact_match"] == pytest.approx(np.mean(ems), abs=1e-12)
    assert acc["metric_artifact"] == pytest.approx(acc["metric_reference"], abs=1e-12)
