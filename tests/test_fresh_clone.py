"""What a clone with nothing beside it needs: the tests' data ships in the repository, and
no command's default names a file outside the package (``.ci/run`` runs the suite with
``../shared`` hidden)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from albert_edge.cli import main

ROOT = Path(__file__).resolve().parents[1]
SHA256 = {  # tests/data/sst2/README.md, albert_edge/samples/README.md
    "train.tsv": "e981ceb4fe6c9acd1c79851d0d091b9e78103f1f2a399ca83dda27915d41c56c",
    "dev.tsv": "84207e6be5873fb18db798cc6faec86871f5a426554650ff64a1c34e87665f6f",
    "spiece.model": "fefb02b667a6c5c2fe27602d28e5fb3428f66ab89c7d6f388e7c8d44a02d0336",
    "sst2_train_calibration.tsv": "0c11ea49ab65b2e8c3e35e3bb9e55594c76d3c4ddd0c105586786c64a12b6cbe",
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_tests_data_is_the_repositorys(
    sst2_train: Path, sst2_dev: Path, spiece_path: Path
) -> None:
    """The fixtures point into the checkout, at the files their READMEs describe (the
    SentencePiece model is ALBERT's 30k-clean.model, which the embedded model ships)."""
    for path in (sst2_train, sst2_dev, spiece_path):
        assert ROOT in path.resolve().parents, path
        assert _sha256(path) == SHA256[path.name], path


def test_calibration_sample_is_cut_from_train_never_dev(sst2_train: Path, sst2_dev: Path) -> None:
    """int8-static's default calibration is SST-2 train rows, unchanged, and shares no
    sentence with dev (what verify's default data is cut from)."""
    from albert_edge.data import read_sst2
    from albert_edge.options import DEFAULT_CALIBRATION

    assert _sha256(DEFAULT_CALIBRATION) == SHA256[DEFAULT_CALIBRATION.name]
    sample = read_sst2(DEFAULT_CALIBRATION, labels=range(2))
    train = read_sst2(sst2_train, labels=range(2))
    assert len(sample) == 512 and sample == train[::131][:512]
    dev = {s for _, s in read_sst2(sst2_dev)}
    assert not dev & {s for _, s in sample}


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_train_without_train_says_which_file_it_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["train", "-o", str(out), "-q"]) == 2
    line = _one_line(capsys)
    assert "--train FILE is required" in line and "SST-2/train.tsv" in line, line
    assert not out.exists()


def test_train_from_scratch_without_dev_says_which_file_it_needs(
    tmp_path: Path, sst2_train: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The SST-2 recipe reports accuracy on --dev: no default file outside the package."""
    rows = tmp_path / "train.tsv"
    rows.write_text("\n".join(sst2_train.read_text().splitlines()[:41]) + "\n")
    out = tmp_path / "out"
    assert main(["train", "--train", str(rows), "-o", str(out), "-q"]) == 2
    line = _one_line(capsys)
    assert "--dev FILE is required" in line and "SST-2/dev.tsv" in line, line
    assert not out.exists()


def test_default_spiece_may_live_in_the_output_it_is_copied_into() -> None:
    """Retraining the embedded model into its own directory (docs/inputs.md) reads the
    packaged spiece.model there: it is not an input the output would lose (it is copied
    into the new output before the old one is replaced); any other --spiece still is."""
    from albert_edge.learn.scratch import DEFAULT_SPIECE, spiece_input

    assert spiece_input(DEFAULT_SPIECE) == []
    other = Path("elsewhere") / "spiece.model"
    assert spiece_input(other) == [other]


def test_int8_static_without_calibration_uses_the_packaged_train_sample(
    make_checkpoint: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """convert --precision int8-static with no --calibration calibrates on the packaged SST-2
    train sample, and the manifest says so (file, sha256, source)."""
    from albert_edge.options import DEFAULT_CALIBRATION, DEFAULT_CALIBRATION_SOURCE

    out = tmp_path / "int8-static"
    argv = ["convert", str(make_checkpoint("tiny")), "--precision", "int8-static"]
    assert main([*argv, "--num-calibration", "8", "-o", str(out), "-q"]) == 0, capsys.readouterr()
    calibration = json.loads((out / "manifest.json").read_text())["quantization"]["calibration"]
    assert calibration == {
        "file": DEFAULT_CALIBRATION.name,
        "sha256": SHA256[DEFAULT_CALIBRATION.name],
        "samples": 8,
        "task": "sentences",
        "format": "glue-tsv",
        "examples": 8,
        "method": "minmax",
        "source": DEFAULT_CALIBRATION_SOURCE,
    }
    assert str(DEFAULT_CALIBRATION.parent) not in (out / "manifest.json").read_text()


@pytest.mark.slow  # a TFLite export, conversion and calibration: ~30-70 s on 2 shared cores
def test_int8_full_without_calibration_uses_the_packaged_train_sample(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    """TFLite int8-full takes the same default as ONNX int8-static, recorded alike."""
    from albert_edge.convert import convert
    from albert_edge.options import (
        DEFAULT_CALIBRATION,
        DEFAULT_CALIBRATION_SOURCE,
        ConvertOptions,
    )

    out = tmp_path / "int8-full"
    options = ConvertOptions(
        target="tflite", precision="int8-full", num_calibration=4, seq_lens=(16,), verify=False
    )
    convert(make_checkpoint("tiny"), out, options)
    calibration = json.loads((out / "manifest.json").read_text())["quantization"]["calibration"]
    assert calibration["file"] == DEFAULT_CALIBRATION.name
    assert calibration["sha256"] == SHA256[DEFAULT_CALIBRATION.name]
    assert calibration["sentences"] == 4
    assert calibration["source"] == DEFAULT_CALIBRATION_SOURCE
