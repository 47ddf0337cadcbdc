"""Every tokenizer a deployment runs agrees on a TRIMMED model, with today's harnesses:
the Java tokenizer of android_demo (GoldenParity, exact ids/types/mask on all of SST-2 dev,
single and paired, and the hard cases), transformers.js reading the artifact's
``tokenizer.json``, and the LiteRT metadata vocabulary (the packed ``spiece.model`` that
the Task Library's ``BertNLClassifier`` tokenizes with). ``AlbertTokenizerFast`` on the
trimmed model: tests/vocab/test_spm_surgery.py. The trimmed model is the tiny checkpoint
trimmed for 4,000 SST-2 train sentences, so SST-2 dev meets many dropped pieces."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from albert_edge.data import read_sst2
from albert_edge.tokenizer import AlbertTokenizer
from tests.clients.test_layout import TRICKY
from tests.clients.test_node_clients import needs_node, run_node
from tests.clients.test_tflite_metadata import CLASSIFY, READER, SIDE_PYTHON
from tests.test_android_java import HARD_CASES, _enc_line, _parity, java_build  # noqa: F401


@pytest.fixture(scope="module")
def onnx_artifact(trimmed_tiny, tmp_path_factory) -> Path:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = tmp_path_factory.mktemp("trimmed-art") / "onnx"
    convert(trimmed_tiny[1], out, ConvertOptions(verify=False))
    return out


def test_java_tokenizer_parity_on_the_trimmed_model(java_build, trimmed_tiny, sst2_dev) -> None:  # noqa: F811
    spiece = trimmed_tiny[1] / "spiece.model"
    tok = AlbertTokenizer(spiece)
    sentences = [s for _, s in read_sst2(sst2_dev)]
    lines = []
    for i, s in enumerate(sentences):
        nxt = sentences[(i + 1) % len(sentences)]
        lines.append(_enc_line(tok, s, None, 512, False))
        lines.append(_enc_line(tok, s, nxt, 512, False))
    for s in HARD_CASES:
        lines.append(_enc_line(tok, s, None, 512, False))
    out = _parity(java_build, spiece, lines, "trimmed-dev.tsv")
    assert f"enc-single={len(sentences) + len(HARD_CASES)}/0" in out, out
    assert f"enc-pair={len(sentences)}/0" in out, out


@needs_node
def test_transformers_js_tokenizer_parity_on_the_trimmed_model(
    onnx_artifact: Path, sst2_dev: Path, tmp_path: Path
) -> None:
    texts = [s for _, s in read_sst2(sst2_dev)] + [t for t in TRICKY if t]
    out = run_node(
        {
            "artifact_dir": str(onnx_artifact),
            "model_file": "",
            "sentences": texts,
            "feeds": [],
            "clients": ["transformers.js-tokenizer"],
        },
        tmp_path,
    )
    tok = AlbertTokenizer(onnx_artifact / "spiece.model")
    assert tok.vocab_size < 30000
    for text, ids in zip(texts, out["transformers.js-tokenizer"]["ids"], strict=True):
        assert ids == tok.encode(text, padding="none").input_ids[0], text


@pytest.mark.slow  # ~40 s: a TFLite conversion and two tflite-support processes
@pytest.mark.skipif(not SIDE_PYTHON.is_file(), reason=f"{SIDE_PYTHON} missing: run .ci/setup.sh")
def test_litert_metadata_vocabulary_on_the_trimmed_model(
    trimmed_tiny, sst2_dev: Path, tmp_path: Path
) -> None:
    """The official metadata reader finds the trimmed spiece.model packed in the .tflite;
    BertNLClassifier, tokenizing with it alone, gives the trimmed PyTorch model's logits
    on the SentencePiece ids of the trimmed model."""
    import numpy as np
    import sentencepiece as spm
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    ckpt_dir = trimmed_tiny[1]
    art = tmp_path / "tfl"
    convert(ckpt_dir, art, ConvertOptions(target="tflite", precision="fp32", verify=False))
    env = {**os.environ, "PYTHONPATH": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    model = str(art / "model.tflite")
    r = subprocess.run(
        [str(SIDE_PYTHON), "-c", READER, model],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    trimmed = (ckpt_dir / "spiece.model").read_bytes()
    assert got["sha256"]["spiece.model"] == hashlib.sha256(trimmed).hexdigest()

    texts = [s for _, s in read_sst2(sst2_dev)][:40]
    r = subprocess.run(
        [str(SIDE_PYTHON), "-c", CLASSIFY, model],
        input="\n".join(texts),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    config = json.loads((art / "config.json").read_text())
    labels = [config["id2label"][str(i)] for i in range(len(config["id2label"]))]
    scores = np.asarray([[row[name] for name in labels] for row in rows])
    sp = spm.SentencePieceProcessor(model_file=str(ckpt_dir / "spiece.model"))
    ck = load_checkpoint(ckpt_dir)
    ref = []
    with torch.no_grad():
        for text in texts:
            ids = torch.tensor(
                [[sp.piece_to_id("[CLS]"), *sp.encode(text), sp.piece_to_id("[SEP]")]]
            )
            assert int(ids.max()) < ck.config.vocab_size
            ref.append(
                ck.model(input_ids=ids, token_type_ids=torch.zeros_like(ids)).logits[0].numpy()
            )
    np.testing.assert_allclose(scores, np.asarray(ref), atol=1e-4)
