"""``convert`` of a trimmed checkpoint: every target and precision, the floor for the new V,
the trim record in the manifest, and the refusal of a tokenizer the table was not trimmed
with."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from albert_edge.convert import convert
from albert_edge.errors import TokenizerError
from albert_edge.facts import floor_bytes
from albert_edge.options import ConvertOptions

ROUTES = [
    ("onnx", "fp32"),
    ("onnx", "int8-dynamic"),
    ("onnx", "int4"),
    ("tflite", "int8-dynamic"),
]


@pytest.mark.parametrize(("target", "precision"), ROUTES, ids=[f"{t}-{p}" for t, p in ROUTES])
def test_every_route_converts_verifies_and_records_the_trim(
    trimmed_tiny, tmp_path: Path, target: str, precision: str
) -> None:
    _, ckpt, record = trimmed_tiny
    out = tmp_path / "art"
    manifest = convert(ckpt, out, ConvertOptions(target=target, precision=precision))
    assert manifest["vocabulary"] == record  # pieces kept, corpus sha256, held-out share ...
    assert manifest["verification"]["passed"] is True  # against the trimmed PyTorch model
    assert manifest["factorized_embedding_intact"] is True
    config = json.loads((out / "config.json").read_text())
    assert config["vocab_size"] == record["pieces_kept"]
    sizes = manifest["sizes"]
    head = "sequence-classification"
    assert sizes["floor_bytes"] == floor_bytes(config, head, sizes["floor_precision"])
    untrimmed = floor_bytes({**config, "vocab_size": record["of_pieces"]}, head, precision)
    assert untrimmed is not None and sizes["floor_bytes"] < untrimmed
    # the shipped tokenizer is the trimmed one
    assert (out / "spiece.model").read_bytes() == (ckpt / "spiece.model").read_bytes()


def test_untrimmed_tokenizer_is_refused_in_one_line(trimmed_tiny, spiece_path, tmp_path) -> None:
    _, ckpt, _ = trimmed_tiny
    swapped = tmp_path / "swapped"
    shutil.copytree(ckpt, swapped)
    shutil.copyfile(spiece_path, swapped / "spiece.model")
    with pytest.raises(TokenizerError) as err:
        convert(swapped, tmp_path / "art", ConvertOptions())
    assert "\n" not in str(err.value) and "vocab_size=" in str(err.value)
    assert not (tmp_path / "art").exists()
