"""The TFLite artifact's metadata, read by the official reader — tflite-support's
``MetadataDisplayer`` (and ``GetMinimumMetadataParserVersion``) — and used by the Task
Library's ``BertNLClassifier``, which tokenizes with the packed ``spiece.model`` and names
classes from the packed ``labels.txt``: both from the ``tflite-support`` PyPI package.

tflite-support 0.4.4 (its last release) pins ``protobuf<4``, which cannot live beside this
project's protobuf 7, so it runs from its own venv (``.venv-tflite-support``, made by
``.ci/setup.sh``; or set ``ALBERT_EDGE_TFLITE_SUPPORT_PYTHON``) on the artifact as written.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIDE_PYTHON = Path(
    os.environ.get("ALBERT_EDGE_TFLITE_SUPPORT_PYTHON", ROOT / ".venv-tflite-support/bin/python")
)

READER = r"""
import hashlib, json, sys
from tflite_support import metadata
from tensorflow_lite_support.metadata.cc.python import _pywrap_metadata_version as version

d = metadata.MetadataDisplayer.with_model_file(sys.argv[1])
files = d.get_packed_associated_file_list()
print(json.dumps({
    "metadata": json.loads(d.get_metadata_json()),
    "packed": files,
    "sha256": {f: hashlib.sha256(d.get_associated_file_buffer(f)).hexdigest() for f in files},
    "labels": d.get_associated_file_buffer("labels.txt").decode(),
    "min_parser_version": version.GetMinimumMetadataParserVersion(bytes(d.get_metadata_buffer())),
}))
"""

pytestmark = pytest.mark.skipif(
    not SIDE_PYTHON.is_file(),
    reason=f"{SIDE_PYTHON} missing: run .ci/setup.sh (tflite-support in its own venv)",
)


def test_metadata_displayer_reads_the_artifact(tflite_artifact: Path) -> None:
    model = tflite_artifact / "model.tflite"
    r = subprocess.run(
        [str(SIDE_PYTHON), "-c", READER, str(model)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": "", "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    meta = got["metadata"]
    config = json.loads((tflite_artifact / "config.json").read_text())

    assert meta["name"] == "ALBERT sequence-classification (embedded)"
    assert meta["license"] == "Apache-2.0" and meta["author"].startswith("albert-edge")
    assert "batch 1" in meta["description"]
    # The version the official parser computes from what is in the buffer.
    assert meta["min_parser_version"] == got["min_parser_version"] == "1.1.0"
    (sg,) = meta["subgraph_metadata"]
    assert sg["name"] == "seq_128"
    # The Task Library's names (passes/metadata.py: TASK_LIBRARY_NAMES); the description
    # names the signature's tensor.
    ins = sg["input_tensor_metadata"]
    assert [t["name"] for t in ins] == ["ids", "mask", "segment_ids"]
    for t, sig_name in zip(ins, ("input_ids", "attention_mask", "token_type_ids"), strict=True):
        assert t["description"].startswith(f"Signature input {sig_name}:")
    (logits,) = sg["output_tensor_metadata"]
    assert logits["name"] == "probability"
    assert logits["description"].startswith("Signature output logits:")
    assert logits["associated_files"][0]["name"] == "labels.txt"
    assert logits["associated_files"][0]["type"] == "TENSOR_AXIS_LABELS"
    (unit,) = sg["input_process_units"]
    assert unit["options_type"] == "SentencePieceTokenizerOptions"
    assert unit["options"]["sentencePiece_model"][0]["name"] == "spiece.model"

    # The packed files: the artifact's own spiece.model, and the config's labels in order.
    assert sorted(got["packed"]) == ["labels.txt", "spiece.model"]
    spiece = (tflite_artifact / "spiece.model").read_bytes()
    assert got["sha256"]["spiece.model"] == hashlib.sha256(spiece).hexdigest()
    labels = [config["id2label"][str(i)] for i in range(len(config["id2label"]))]
    assert got["labels"].splitlines() == labels


CLASSIFY = r"""
import json, sys
from tflite_support.task import text

clf = text.BertNLClassifier.create_from_file(sys.argv[1])
out = []
for line in sys.stdin.read().splitlines():
    cats = clf.classify(line).classifications[0].categories
    out.append({c.category_name: c.score for c in cats})
print(json.dumps(out))
"""


def test_task_library_bert_nl_classifier(tflite_artifact: Path, sentences, torch_logits) -> None:
    """BertNLClassifier reads only the file: tokenizer, labels and tensors from the metadata.

    It tokenizes with SentencePiece alone ([CLS] + pieces + [SEP]), without transformers'
    ALBERT post-processing (which splits "well-nigh" as "-", "▁", "n", ...), so on some
    sentences its ids differ from ``AlbertTokenizer``'s: its scores are compared with
    PyTorch on the ids it made, and its labels with PyTorch's on our tokenizer's ids."""
    import numpy as np
    import sentencepiece as spm
    import torch

    from albert_edge.checkpoint import load_checkpoint

    r = subprocess.run(
        [str(SIDE_PYTHON), "-c", CLASSIFY, str(tflite_artifact / "model.tflite")],
        input="\n".join(t for _, t in sentences),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": "", "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    got = json.loads(r.stdout.strip().splitlines()[-1])
    config = json.loads((tflite_artifact / "config.json").read_text())
    labels = [config["id2label"][str(i)] for i in range(len(config["id2label"]))]
    scores = np.asarray([[row[name] for name in labels] for row in got])

    sp = spm.SentencePieceProcessor(model_file=str(tflite_artifact / "spiece.model"))
    model = load_checkpoint(None).model
    ref = []
    with torch.no_grad():
        for _, text in sentences:
            ids = torch.tensor(
                [[sp.piece_to_id("[CLS]"), *sp.encode(text), sp.piece_to_id("[SEP]")]]
            )
            ref.append(model(input_ids=ids, token_type_ids=torch.zeros_like(ids)).logits[0].numpy())
    np.testing.assert_allclose(scores, np.asarray(ref), atol=1e-4)  # its scores are the logits
    for row, want in zip(scores, torch_logits, strict=True):
        if abs(want[0] - want[1]) > 0.5:
            assert int(np.argmax(row)) == int(np.argmax(want))
