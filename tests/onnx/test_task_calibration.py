"""Calibration from any task's file (int8-static ONNX, TFLite int8-full): the feeds are the
task's encoded model inputs (a pair with its token type ids, SQuAD question + context
windows, CoNLL sentences), the manifest records the file, its sha256 and the task, and a
file (or the packaged SST-2 default) the head cannot use is refused in one line, before
torch loads.

Synthetic files written here (no CoNLL text may ship); tiny random-init checkpoints.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from albert_edge.data import DataError, read_calibration
from albert_edge.tasks import encode
from albert_edge.tokenizer import AlbertTokenizer

WORDS = ("the", "a", "cat", "dog", "sat", "ran", "far", "near", "house", "river", "green", "old")


def _pairs(path: Path, n: int = 12) -> Path:
    rows = [
        f"{WORDS[i % 12]} sat near\t{WORDS[(i * 5) % 12]} ran far away\t{i % 2}" for i in range(n)
    ]
    path.write_text("sentence1\tsentence2\tlabel\n" + "\n".join(rows) + "\n")
    return path


def _squad(path: Path) -> Path:
    words = [WORDS[i % 12] for i in range(60)]
    ctx = " ".join(words)
    qas = [
        {
            "id": str(q),
            "question": f"where {WORDS[q]} ?",
            "answers": [{"text": words[q], "answer_start": len(" ".join(words[:q])) + bool(q)}],
        }
        for q in range(6)
    ]
    data = {
        "version": "1.1",
        "data": [{"title": "t", "paragraphs": [{"context": ctx, "qas": qas}]}],
    }
    path.write_text(json.dumps(data))
    return path


def _conll(path: Path) -> Path:
    lines = ["-DOCSTART- -X- -X- O", ""]
    for s in range(5):
        lines += [
            f"{WORDS[(s + i) % 12].title()} NNP B-NP {'I-PER' if i == 1 else 'O'}" for i in range(4)
        ]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def _graph() -> Any:
    """A graph with ALBERT's three int64 inputs ([batch, seq]): all calibration_feeds reads."""
    import onnx_ir as ir
    from onnx import TensorProto, helper

    names = ("input_ids", "attention_mask", "token_type_ids")
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"]) for n in names]
    out = helper.make_tensor_value_info("y", TensorProto.INT64, ["b", "s"])
    g = helper.make_graph([helper.make_node("Identity", ["input_ids"], ["y"])], "g", inputs, [out])
    return ir.from_proto(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize(
    ("make", "task", "typed"),
    [
        (_pairs, "sentence-pairs", True),
        (_squad, "question-answering", True),
        (_conll, "token-classification", False),
    ],
)
def test_feeds_are_the_tasks_encoded_inputs(
    spiece_path: Path, tmp_path: Path, make: Any, task: str, typed: bool
) -> None:
    from albert_edge.onnx.quant.calib import calibration_feeds

    cal = read_calibration(make(tmp_path / "cal"), 4)
    assert cal.task == task and len(cal) == 4
    tok = AlbertTokenizer(spiece_path)
    feeds = calibration_feeds(_graph(), cal, tok, max_length=32)
    want = encode(cal.data, tok, 32)
    assert len(feeds) == len(want) >= 4  # a long SQuAD context: one feed per window
    for f, feed in enumerate(feeds):
        assert feed["input_ids"].shape == (1, len(want.input_ids[f]))  # its own length
        assert feed["input_ids"][0].tolist() == want.input_ids[f]
        assert feed["token_type_ids"][0].tolist() == want.token_type_ids[f]
        assert bool(feed["token_type_ids"].any()) == typed  # the second segment is fed
    if task == "question-answering":
        assert len(feeds) > 4  # 60 words in 32-token windows, with the stride
        first = feeds[0]["token_type_ids"][0].tolist()
        q = first.index(1)  # the question (type 0), then its context (type 1)
        assert set(first[:q]) == {0} and set(first[q:]) == {1}


def test_sentences_feed_as_before(spiece_path: Path, sst2_train: Path) -> None:
    """SST-2 sentences: each alone, exactly the tokenizer's encoding (no change for the
    packaged default)."""
    from albert_edge.onnx.quant.calib import calibration_feeds

    cal = read_calibration(sst2_train, 5)
    assert cal.task == "sentences" and cal.sentences() is not None
    tok = AlbertTokenizer(spiece_path)
    feeds = calibration_feeds(_graph(), cal, tok, max_length=64)
    for text, feed in zip(cal.sentences() or [], feeds, strict=True):
        enc = tok.encode(text, max_length=64, padding="none").as_numpy()
        assert all(np.array_equal(enc[k], feed[k]) for k in enc)


def test_tflite_buckets_keep_the_token_types(spiece_path: Path, tmp_path: Path) -> None:
    from albert_edge.tflite.calibration import MIN_CALIBRATION_PER_BUCKET, feature_calibration_feeds

    cal = read_calibration(_pairs(tmp_path / "pairs.tsv"), 10)
    feats = cal.encode(AlbertTokenizer(spiece_path), 64)
    out = feature_calibration_feeds(feats, [16, 64])
    assert set(out) == {"seq_16", "seq_64"}
    assert len(out["seq_16"]) == 10 and len(out["seq_64"]) == MIN_CALIBRATION_PER_BUCKET
    for f, feed in enumerate(out["seq_16"]):
        n = len(feats.input_ids[f])
        assert feed["token_type_ids"].dtype == np.int32 and feed["input_ids"].shape == (1, 16)
        assert feed["token_type_ids"][0, :n].tolist() == feats.token_type_ids[f]
        assert int(feed["attention_mask"].sum()) == n
    for feed in out["seq_64"]:  # joined whole pairs: each keeps its second segment
        n = int(feed["attention_mask"].sum())
        assert 16 < n <= 64 and feed["input_ids"][0, n - 1] == 3  # ends in [SEP]
        assert feed["token_type_ids"][0, :n].sum() > 0


def test_int8_static_calibrated_on_a_squad_file_records_it(
    make_checkpoint: Any, tmp_path: Path
) -> None:
    from albert_edge.convert import convert
    from albert_edge.manifest import sha256_file
    from albert_edge.options import ConvertOptions

    ckpt = make_checkpoint("tiny", "question-answering", seed=2)
    data = _squad(tmp_path / "dev-v1.1.json")
    opts = ConvertOptions(
        precision="int8-static", calibration=data, num_calibration=6, verify=False
    )
    m = convert(ckpt, tmp_path / "out", opts)
    cal = m["quantization"]["calibration"]
    assert cal["file"] == "dev-v1.1.json" and cal["sha256"] == sha256_file(data)
    assert cal["task"] == "question-answering" and cal["format"] == "squad-v1.1"
    assert cal["examples"] == 6 and cal["samples"] >= 6 and cal["source"] == "--calibration"


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; from albert_edge.cli import main; "
        f"rc = main({list(argv)!r}); "
        "print(rc, sorted(m for m in ('torch', 'onnxruntime') if m in sys.modules))"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def _one_line_before_torch(r: subprocess.CompletedProcess[str], out: Path) -> str:
    rc, _, modules = r.stdout.strip().splitlines()[-1].partition(" ")
    assert rc != "0" and modules == "[]", (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and not out.exists(), r.stderr
    return lines[0]


def test_calibration_the_head_cannot_use_is_refused_before_torch(
    make_checkpoint: Any, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    qa = make_checkpoint("tiny", "question-answering", seed=2)
    # no --calibration: SST-2 sentences never fill a QA model's context segment
    line = _one_line_before_torch(
        _cli("convert", str(qa), "--precision", "int8-static", "-o", str(out)), out
    )
    assert "packaged default is SST-2 single sentences" in line and "question-answering" in line
    assert "--calibration FILE" in line and "SQuAD" in line
    # a SQuAD file for a classifier
    squad = _squad(tmp_path / "dev-v1.1.json")
    line = _one_line_before_torch(
        _cli("convert", "--precision", "int8-static", "--calibration", str(squad), "-o", str(out)),
        out,
    )
    assert "dev-v1.1.json: question-answering data" in line and "sequence-classification" in line


def test_calibration_fit_rules(make_checkpoint: Any, tmp_path: Path, sst2_train: Path) -> None:
    from albert_edge.data import precheck_calibration

    ner = make_checkpoint("tiny", "token-classification", seed=1)
    note = precheck_calibration(None, 8, ner)  # the default: said, in one line
    assert note is not None and "packaged SST-2" in note and "\n" not in note
    assert precheck_calibration(sst2_train, 8, ner) is None  # sentences: a tagger's inputs
    assert precheck_calibration(_conll(tmp_path / "train.txt"), 8, ner) is None
    cal = read_calibration(_pairs(tmp_path / "pairs.tsv"))
    with pytest.raises(DataError, match=r"sentence-pair file .* sst2 \(single sentences\)"):
        cal.check_fits("sequence-classification", finetuning_task="sst2")
    cal.check_fits("sequence-classification", finetuning_task="mrpc")
    with pytest.raises(DataError, match="single sentences, but the model is a sequence-class"):
        read_calibration(sst2_train, 4).check_fits("sequence-classification", finetuning_task="rte")
    cal.check_fits("masked-lm")  # a masked LM reads any text


@pytest.mark.slow  # a TFLite export and int8-full calibration (~1 min on 2 busy cores)
def test_tflite_int8_full_calibrated_on_a_pair_file(make_checkpoint: Any, tmp_path: Path) -> None:
    import shutil

    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    ckpt = tmp_path / "pair"
    shutil.copytree(make_checkpoint("tiny", seed=3), ckpt)
    cfg = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**cfg, "finetuning_task": "mrpc"}))
    data = _pairs(tmp_path / "pairs.tsv", 40)
    opts = ConvertOptions(
        target="tflite", precision="int8-full", calibration=data, num_calibration=40,
        seq_lens=(16, 32), verify=False,
    )  # fmt: skip
    m = convert(ckpt, tmp_path / "out", opts)
    cal = m["quantization"]["calibration"]
    assert cal["task"] == "sentence-pairs" and cal["file"] == "pairs.tsv"
    assert cal["examples"] == 40 and set(cal["per_signature"]) == {"seq_16", "seq_32"}
    # the packaged SST-2 sentences are refused for this pair model (loaded: the same rule)
    with pytest.raises(DataError, match="packaged default is SST-2 single sentences"):
        convert(ckpt, tmp_path / "out2", ConvertOptions(target="tflite", precision="int8-full"))
    assert not (tmp_path / "out2").exists()
