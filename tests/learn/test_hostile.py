"""Bad input to train --init: one line, non-zero exit, nothing written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.learn.conftest import cli


def _refused(capsys, out: Path, *argv, expect: str) -> None:
    assert cli(*argv, "-o", out) != 0
    # (absl/torch logging at a framework's first import is not albert-edge's output)
    lines = capsys.readouterr().err.strip().splitlines()
    err = [x for x in lines if not re.match(r"^[WI]\d{4} |Failed to load ", x)]
    assert len(err) == 1 and expect in err[0], err
    assert not out.exists()
    assert not out.with_name(f".{out.name}.train-state").exists()


def test_init_artifact_named(make_checkpoint, rows200, tmp_path, capsys):
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    art = tmp_path / "art"
    convert(make_checkpoint(), art, ConvertOptions(precision="fp32", verify=False))
    capsys.readouterr()  # convert's own progress lines
    _refused(
        capsys,
        tmp_path / "o",
        "--init",
        art,
        "--train",
        rows200,
        expect="ONNX artifact (fp32), not a checkpoint",
    )


@pytest.mark.parametrize(
    ("teacher_kw", "expect"),
    [({"num_labels": 3}, "labels"), ({"head": "masked-lm"}, "head")],
)
def test_teacher_mismatch(make_checkpoint, rows200, tmp_path, capsys, teacher_kw, expect):
    teacher = make_checkpoint(**teacher_kw)
    _refused(
        capsys,
        tmp_path / "o",
        "--init",
        make_checkpoint(),
        "--teacher",
        teacher,
        "--train",
        rows200,
        expect=expect,
    )


def test_teacher_other_vocab(make_checkpoint, rows200, tmp_path, capsys):
    from albert_edge.configs import make_config, make_random_checkpoint

    cfg = make_config("tiny", vocab_size=1000)
    teacher = make_random_checkpoint(tmp_path / "t", cfg)
    _refused(
        capsys,
        tmp_path / "o",
        "--init",
        make_checkpoint(),
        "--teacher",
        teacher,
        "--train",
        rows200,
        expect="vocabulary",
    )


def test_depth_not_expressible(make_checkpoint, rows200, tmp_path, capsys):
    # 6 layers in 4 groups: the first 5 run groups [0, 0, 1, 2, 2]: no config says it
    from albert_edge.configs import make_config, make_random_checkpoint
    from tests.conftest import SPIECE

    cfg = make_config("tiny", num_hidden_layers=6, num_hidden_groups=4)
    init = make_random_checkpoint(tmp_path / "g3", cfg, spiece_model=SPIECE)
    _refused(
        capsys,
        tmp_path / "o",
        "--init",
        init,
        "--depth",
        "5",
        "--train",
        rows200,
        expect="choose one of",
    )


def test_too_few_rows(make_checkpoint, rows200, tmp_path, capsys):
    few = tmp_path / "few.tsv"
    few.write_text("\n".join(rows200.read_text().splitlines()[:41]) + "\n")
    _refused(
        capsys,
        tmp_path / "o",
        "--init",
        make_checkpoint(),
        "--train",
        few,
        expect="give at least 155 at --held-out 0.1",
    )


@pytest.mark.parametrize("precision", ["fp16"])
def test_qat_without_quantizer(make_checkpoint, rows200, tmp_path, capsys, precision):
    _refused(
        capsys,
        tmp_path / "o",
        "--init",
        make_checkpoint(),
        "--qat",
        precision,
        "--train",
        rows200,
        expect="no trainable quantizer",
    )


def test_learn_flags_need_init(rows200, tmp_path, capsys):
    _refused(
        capsys,
        tmp_path / "o",
        "--depth",
        "2",
        "--train",
        rows200,
        "--dev",
        rows200,
        expect="needs --init",
    )


def test_diverged_loss_names_the_step(make_checkpoint, rows200, tmp_path, capsys):
    _refused(
        capsys,
        tmp_path / "o",
        "--init",
        make_checkpoint(),
        "--train",
        rows200,
        "--lr",
        "1e30",
        "--batch-size",
        "16",
        expect="training diverged: the loss is",
    )


def test_groups_not_fewer(make_checkpoint, rows200, tmp_path, capsys):
    _refused(
        capsys,
        tmp_path / "o",
        "--init",
        make_checkpoint(),
        "--groups",
        "1",
        "--train",
        rows200,
        expect="no fewer groups",
    )
