"""The TFLite artifact's metadata, read by the official reader: tflite-support's
``MetadataDisplayer`` (and ``GetMinimumMetadataParserVersion``) from the ``tflite-support``
PyPI package.

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
    assert [t["name"] for t in sg["input_tensor_metadata"]] == [
        "input_ids",
        "attention_mask",
        "token_type_ids",
    ]
    assert all(t["description"] for t in sg["input_tensor_metadata"])
    (logits,) = sg["output_tensor_metadata"]
    assert logits["name"] == "logits"
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
