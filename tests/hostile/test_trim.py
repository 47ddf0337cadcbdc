"""Hostile inputs to ``trim`` (tests/hostile/judge.py says what each case asserts)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.hostile.files import MAKERS
from tests.hostile.judge import Case, params, run_case

T = ("trim", "{ckpt}", "--corpus")


def _bpe_ckpt(work: Path, shared: Mapping[str, Path]) -> None:
    """A checkpoint whose SentencePiece model says BPE (pieces and scores as ALBERT's)."""
    from albert_edge.vocab.spm_surgery import pb

    shutil.copytree(shared["ckpt"], work / "ckpt")
    proto = pb().ModelProto()
    proto.ParseFromString((work / "ckpt" / "spiece.model").read_bytes())
    proto.trainer_spec.model_type = pb().TrainerSpec.BPE
    (work / "ckpt" / "spiece.model").write_bytes(proto.SerializeToString())


def _notext(work: Path, shared: Mapping[str, Path]) -> None:
    (work / "notext.tsv").write_bytes(b"id\tscore\n1\t0.5\n2\t0.7\n")


TRIM_MAKERS = {**MAKERS, "bpe_ckpt": _bpe_ckpt, "notext.tsv": _notext}

CASES = [
    Case(
        "trim:corpus-utf16", (*T, "utf16.tsv", "-o", "out"), 2, "utf16.tsv.*UTF-16", ("utf16.tsv",)
    ),
    Case(
        "trim:corpus-latin1",
        (*T, "latin1.tsv", "-o", "out"),
        2,
        "latin1.tsv.*not UTF-8",
        ("latin1.tsv",),
    ),
    Case(
        "trim:corpus-binary",
        (*T, "binary.tsv", "-o", "out"),
        2,
        "binary.tsv.*binary",
        ("binary.tsv",),
    ),
    Case(
        "trim:corpus-no-text-column",
        (*T, "notext.tsv", "-o", "out"),
        2,
        "notext.tsv: tab-separated corpus without a text column",
        ("notext.tsv",),
    ),
    Case("trim:corpus-missing", (*T, "nope.txt", "-o", "out"), 2, "nope.txt.*not found"),
    Case(
        "trim:keep-below-minimum",
        (*T, "calib.txt", "-o", "out", "--keep", "5"),
        2,
        r"--keep 5 is below the \d+ pieces every trim keeps",
        ("calib.txt",),
    ),
    Case(
        "trim:keep-and-coverage",
        (*T, "calib.txt", "-o", "out", "--keep", "500", "--coverage", "0.9"),
        2,
        "not allowed with",
        ("calib.txt",),
    ),
    Case(
        "trim:coverage-above-one",
        (*T, "calib.txt", "-o", "out", "--coverage", "2"),
        2,
        r"\(0, 1\]",
        ("calib.txt",),
    ),
    Case(
        "trim:not-unigram",
        ("trim", "ckpt", "--corpus", "calib.txt", "-o", "out"),
        2,
        "spiece.model: SentencePiece model type is BPE, not UNIGRAM",
        ("bpe_ckpt", "calib.txt"),
    ),
    Case(
        "trim:over-a-user-directory",
        (*T, "calib.txt", "-o", "out", "--overwrite"),
        2,
        "did not write",
        ("user_dir", "calib.txt"),
    ),
    Case(
        "trim:output-is-the-input",
        ("trim", "ckpt", "--corpus", "calib.txt", "-o", "ckpt"),
        2,
        "would replace the input",
        ("ckpt", "calib.txt"),
    ),
    Case(
        "trim:ok",
        (*T, "calib.txt", "-o", "out"),
        0,
        "pieces",
        ("calib.txt",),
        creates=("out",),
    ),
]


@pytest.mark.parametrize("case", params(CASES))
def test_command(case: Case, tmp_path: Path, hostile_shared: dict[str, Path]) -> None:
    run_case(case, tmp_path, hostile_shared, TRIM_MAKERS)
