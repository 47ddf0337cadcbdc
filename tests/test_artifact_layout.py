"""One function finds an artifact's files from any path inside it (issue 25).

The ONNX runner used to read ``max_seq_len`` beside the model file, but ``convert`` writes the
model one level down (``onnx/model*.onnx``) and the key ``max_sequence_length``: every artifact
silently got 512 tokens. These tests use the layout ``convert`` writes, not a hand-made one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from albert_edge.layout import artifact_root, find_artifact


@pytest.fixture(scope="module")
def short_artifact(tmp_path_factory: pytest.TempPathFactory, spiece_path: Path) -> Path:
    """A random tiny ALBERT with 96 positions (not 512), converted to fp32 ONNX."""
    from albert_edge.configs import make_config, make_random_checkpoint
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    base = tmp_path_factory.mktemp("short")
    ckpt = make_random_checkpoint(
        base / "ckpt", make_config("tiny", max_position_embeddings=96), spiece_model=spiece_path
    )
    out = base / "art"
    convert(ckpt, out, ConvertOptions(optimize="none", verify=False))
    return out


def test_runner_reads_max_sequence_length_of_convert_layout(short_artifact: Path) -> None:
    from albert_edge.onnx.runtime import OrtRunner

    art = find_artifact(short_artifact)
    assert art.manifest is not None and art.manifest["max_sequence_length"] == 96
    assert art.model is not None and art.model.parent.name == "onnx"  # convert's layout
    runner = OrtRunner(art.model, threads=1)
    assert runner.max_seq_len == 96


def test_find_artifact_from_any_path_inside(short_artifact: Path) -> None:
    model = find_artifact(short_artifact).model
    assert model is not None
    for inside in (short_artifact, model, short_artifact / "config.json"):
        found = find_artifact(inside)
        assert found.root == short_artifact == artifact_root(inside)
        assert found.max_sequence_length() == 96
    bare = model.parent.parent.parent / "bare.onnx"  # no manifest anywhere: nothing invented
    assert find_artifact(bare).manifest is None


def test_tokenizer_is_the_artifacts_for_verify_and_quantize(short_artifact: Path) -> None:
    from albert_edge.evaluate import artifact_tokenizer

    model = find_artifact(short_artifact).model
    assert model is not None
    a, b = artifact_tokenizer(model), artifact_tokenizer(short_artifact)
    assert Path(a.path) == Path(b.path) == short_artifact / "spiece.model"
    assert a.encode("A Well-Made film.") == b.encode("A Well-Made film.")
