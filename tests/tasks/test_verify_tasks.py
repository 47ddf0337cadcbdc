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


@pytest.fixture(scope="module")
def plain(make_checkpoint: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a random tiny classifier, its fp32 ONNX artifact), shared by the refusal tests."""
    ckpt = make_checkpoint("tiny", seed=3)
    return ckpt, converted(ckpt, tmp_path_factory.mktemp("plain") / "art")


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


def test_verify_refuses_wrong_data_before_loading(plain: tuple[Path, Path], tmp_path: Path) -> None:
    from albert_edge.tasks import DataError
    from albert_edge.verify import verify

    ckpt, art = plain
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


def test_verify_squad_v2_threshold_held_out(make_checkpoint: Any, tmp_path: Path) -> None:
    """v2.0: the null threshold is chosen on the reference's even-numbered questions and
    both models are scored with it on the odd-numbered ones."""
    from albert_edge.verify import verify

    ckpt = make_checkpoint("tiny", "question-answering", seed=2)
    rng = np.random.default_rng(6)
    qas = []
    ctx = sentence(rng, 20)
    for q in range(64):
        if q % 3 == 0:
            qas.append(
                {"id": str(q), "question": sentence(rng, 3), "answers": [], "is_impossible": True}
            )
        else:
            word = ctx.split(" ")[q % 10]
            qas.append(
                {
                    "id": str(q),
                    "question": sentence(rng, 3),
                    "answers": [{"text": word, "answer_start": ctx.index(word)}],
                }
            )
    data = tmp_path / "dev-v2.0.json"
    data.write_text(
        json.dumps({"version": "v2.0", "data": [{"paragraphs": [{"context": ctx, "qas": qas}]}]})
    )
    art = converted(ckpt, tmp_path / "art")
    acc = verify(art, reference=ckpt, data=data, seq_lens=(8,), progress=False).accuracy
    assert acc is not None and acc["format"] == "squad-v2.0" and acc["examples"] == 32
    assert "null_threshold" in acc and "HasAns_f1" in acc["metrics_reference"]
    assert acc["metrics_artifact"] == acc["metrics_reference"]  # fp32: the same answers
    assert acc["interval_points"]["low"] <= 0.0 <= acc["interval_points"]["high"]


@pytest.mark.slow  # two conversions and a per-choice transformers loop (~50 s on 2 busy cores)
def test_verify_multiple_choice_and_masked_lm(
    make_checkpoint: Any, spiece_path: Path, tmp_path: Path
) -> None:
    from albert_edge.tasks import encode, read_task_file
    from albert_edge.tokenizer import AlbertTokenizer
    from albert_edge.verify import verify

    rng = np.random.default_rng(7)
    tok = AlbertTokenizer(spiece_path)
    # multiple choice, SWAG layout
    mc = make_checkpoint("tiny", "multiple-choice", seed=4)
    swag = tmp_path / "val.csv"
    swag.write_text(
        "video-id,sent1,sent2,ending0,ending1,ending2,ending3,label\n"
        + "".join(
            f"v,{sentence(rng, 5)},{sentence(rng, 2)},{sentence(rng, 3)},{sentence(rng, 3)},"
            f"{sentence(rng, 3)},{sentence(rng, 3)},{i % 4}\n"
            for i in range(32)
        )
    )
    acc = verify(
        converted(mc, tmp_path / "mc"), reference=mc, data=swag, seq_lens=(8,), progress=False
    ).accuracy
    assert acc is not None and acc["task"] == "multiple-choice"
    td = read_task_file(swag)
    feats = encode(td, tok, 128)
    import torch
    from transformers import AlbertForMaskedLM, AlbertForMultipleChoice

    model = AlbertForMultipleChoice.from_pretrained(str(mc)).eval()
    right = 0
    for f in range(len(feats)):
        rows = feats.input_ids[f * 4 : (f + 1) * 4]
        types = feats.token_type_ids[f * 4 : (f + 1) * 4]
        scores = []
        for ids, tt in zip(rows, types):  # each choice alone, unpadded
            with torch.inference_mode():
                x = torch.tensor([[ids]])
                scores.append(
                    float(model(input_ids=x, token_type_ids=torch.tensor([[tt]])).logits[0, 0])
                )
        right += int(np.argmax(scores) == td.examples[f].label)
    assert acc["metric_reference"] == right / len(feats)
    # masked LM on plain text: the head says what the file is
    mlm = make_checkpoint("tiny", "masked-lm", seed=5)
    text = tmp_path / "corpus.txt"
    text.write_text("".join(sentence(rng, 12) + "\n" for _ in range(30)))
    acc = verify(
        converted(mlm, tmp_path / "mlm"), reference=mlm, data=text, seq_lens=(8,), progress=False
    ).accuracy
    assert acc is not None and acc["metric"] == "masked_accuracy"
    feats = encode(read_task_file(text, task="masked-lm"), tok, 128)
    model = AlbertForMaskedLM.from_pretrained(str(mlm)).eval()
    hit = total = 0
    for ids, lab in zip(feats.input_ids, feats.labels):
        with torch.inference_mode():
            pred = model(input_ids=torch.tensor([ids])).logits[0].argmax(-1).numpy()
        lab = np.asarray(lab)
        hit += int((pred[lab != -100] == lab[lab != -100]).sum())
        total += int((lab != -100).sum())
    assert acc["metric_reference"] == pytest.approx(hit / total, abs=1e-12)


def test_cli_refuses_pair_file_for_single_sentence_model_before_torch(
    plain: tuple[Path, Path], tmp_path: Path
) -> None:
    """A pair file for a model fine-tuned on SST-2 (config.json finetuning_task): one line,
    exit 2, and neither torch nor the artifact's runtime imported."""
    import subprocess
    import sys

    ckpt = tmp_path / "ckpt"
    shutil.copytree(plain[0], ckpt)
    art = plain[1]
    cfg = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**cfg, "finetuning_task": "sst2"}))
    data = tmp_path / "pairs.tsv"
    data.write_text("sentence1\tsentence2\tlabel\na b\tc d\t1\n")
    code = (
        "import sys; from albert_edge.cli import main; "
        f"rc = main(['verify', {str(art)!r}, '--reference', {str(ckpt)!r}, '--data', "
        f"{str(data)!r}]); print(rc, sorted(m for m in ('torch', 'onnxruntime') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.stdout.split("\n")[-2] == "2 []", (r.stdout, r.stderr)
    (line,) = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert "pairs.tsv: a sentence-pair file (sentence1/sentence2)" in line and "sst2" in line


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [(24, 24), (128, None), (512, None), (int(1e30), None), ("64", None), (True, None), (0, None)],
)
def test_trained_length_reads_only_a_length_below_the_positions(
    tmp_path: Path, recorded: Any, expected: int | None
) -> None:
    """``model_max_length`` caps the task metric's encoding only where it is a real length
    below ``max_position_embeddings`` (transformers writes 1e30 for "no limit")."""
    from types import SimpleNamespace

    from albert_edge.torch_model import trained_length

    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": recorded}))
    ckpt = SimpleNamespace(path=tmp_path, config=SimpleNamespace(max_position_embeddings=128))
    assert trained_length(ckpt) == expected  # type: ignore[arg-type]
    assert trained_length(SimpleNamespace(path=tmp_path / "none", config=ckpt.config)) is None  # type: ignore[arg-type]


def test_verify_encodes_at_the_length_the_checkpoint_was_trained_at(
    make_checkpoint: Any, tmp_path: Path
) -> None:
    """A QA checkpoint recording ``model_max_length`` 24 is scored on 24-token windows
    (more windows per long context), not on positions it was never fine-tuned at."""
    from albert_edge.verify import verify

    src = make_checkpoint("tiny", "question-answering", seed=2)
    ckpt = tmp_path / "ckpt"
    shutil.copytree(src, ckpt)
    tok_cfg = ckpt / "tokenizer_config.json"
    cfg = json.loads(tok_cfg.read_text()) if tok_cfg.is_file() else {}
    cfg["model_max_length"] = 24
    tok_cfg.write_text(json.dumps(cfg))
    rng = np.random.default_rng(7)
    ctx = sentence(rng, 40)
    words = ctx.split(" ")
    qas = [
        {
            "id": str(q),
            "question": sentence(rng, 3) + "?",
            "answers": [
                {"text": words[5 * q], "answer_start": len(" ".join(words[: 5 * q])) + bool(q)}
            ],
        }
        for q in range(4)
    ]
    data = tmp_path / "dev-v1.1.json"
    data.write_text(
        json.dumps(
            {
                "version": "1.1",
                "data": [{"title": "t", "paragraphs": [{"context": ctx, "qas": qas}]}],
            }
        )
    )
    art = converted(ckpt, tmp_path / "art")
    report = verify(art, reference=ckpt, data=data, seq_lens=(8,), progress=False)
    assert report.accuracy is not None and report.passed, report.failures()
    assert report.accuracy["max_len"] == 24
    assert report.accuracy["examples"] == 4
