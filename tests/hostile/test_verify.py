"""Hostile inputs to ``verify`` and ``quantize`` (tests/hostile/judge.py says what each
case asserts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.files import MAKERS
from tests.hostile.judge import Case, params, run_case

V = ("verify", "{art}", "--reference", "{ckpt}")
Q = ("quantize", "{art}", "-o", "out")

VERIFY = [
    Case(
        "verify:threads-10000",
        (*V, "--threads", "10000"),
        2,
        "at most",
        no_import=("torch",),
        timeout=30,
    ),
    Case("verify:threads-zero", (*V, "--threads", "0"), 2, ">= 1"),
    Case("verify:threads-negative", (*V, "--threads", "-4"), 2, ">= 1"),
    Case("verify:threads-words", (*V, "--threads", "many"), 2, "integer"),
    Case("verify:batch-sizes-zero", (*V, "--batch-sizes", "0"), 2, ">= 1"),
    Case("verify:batch-sizes-past-int64", (*V, "--batch-sizes", "1," + "9" * 22), 2, "<="),
    Case("verify:batch-sizes-empty", (*V, "--batch-sizes", ","), 2, "integers"),
    Case("verify:seq-lens-negative", (*V, "--seq-lens", "-1"), 2, "expected"),
    Case("verify:seq-lens-float", (*V, "--seq-lens", "1.5"), 2, "integers"),
    Case(
        "verify:seq-lens-past-positions", (*V, "--seq-lens", "100000"), 2, "(?i)position|max|long"
    ),
    Case("verify:max-examples-zero", (*V, "--max-examples", "0"), 2, ">= 1"),
    Case("verify:on-typo", (*V, "--on", "arm"), 2, "invalid choice"),
    Case("verify:missing-artifact", ("verify", "nope"), 2, "nope"),
    Case("verify:empty-dir", ("verify", "empty_dir"), 2, "empty_dir", ("empty_dir",)),
    Case("verify:manifest-not-json", ("verify", "art"), 2, "manifest", ("bad_manifest_art",)),
    Case("verify:flipped-byte", ("verify", "art"), 1, "sha256|changed|differ", ("flipped_art",)),
    Case("verify:extra-file", ("verify", "art"), 1, "notes.txt", ("extra_art",)),
    Case("verify:foreign-manifest", ("verify", "out"), 2, "manifest", ("foreign_manifest",)),
    Case(
        "verify:zero-byte-model",
        ("verify", "zero/model.onnx"),
        2,
        "model.onnx",
        ("zero/model.onnx",),
    ),
    Case("verify:text-model", ("verify", "text.onnx"), 2, "text.onnx", ("text.onnx",)),
    Case("verify:data-missing", (*V, "--data", "no.tsv"), 2, "no.tsv"),
    Case("verify:data-binary", (*V, "--data", "binary.tsv"), 2, "binary", ("binary.tsv",)),
    Case(
        "verify:data-utf16",
        (*V, "--data", "utf16.tsv"),
        2,
        "UTF-16",
        ("utf16.tsv",),
        no_import=("torch",),
    ),
    Case("verify:data-latin1", (*V, "--data", "latin1.tsv"), 2, "UTF-8", ("latin1.tsv",)),
    Case("verify:data-empty", (*V, "--data", "empty.tsv"), 2, "empty", ("empty.tsv",)),
    Case("verify:data-blank-lines", (*V, "--data", "blank.tsv"), 2, "empty", ("blank.tsv",)),
    Case(
        "verify:data-no-label-column",
        (*V, "--data", "nolabel.tsv"),
        2,
        "sentiment",
        ("nolabel.tsv",),
        no_import=("torch",),
    ),
    Case("verify:data-comma-separated", (*V, "--data", "comma.tsv"), 2, "comma", ("comma.tsv",)),
    Case(
        "verify:data-word-labels",
        (*V, "--data", "wordlabel.tsv"),
        2,
        "positive",
        ("wordlabel.tsv",),
    ),
    Case("verify:data-stray-tab", (*V, "--data", "straytab.tsv"), 2, "tab", ("straytab.tsv",)),
    Case(
        "verify:data-header-only",
        (*V, "--data", "headeronly.tsv"),
        2,
        "no labelled rows",
        ("headeronly.tsv",),
    ),
    Case("verify:data-is-a-directory", (*V, "--data", "empty_dir"), 2, "directory", ("empty_dir",)),
    Case("verify:data-label-7", (*V, "--data", "label7.tsv"), 2, "7", ("label7.tsv",)),
    Case("verify:reference-missing", ("verify", "{art}", "--reference", "nope"), 2, "nope"),
    Case(
        "verify:reference-other-weights",
        ("verify", "{art}", "--reference", "ckpt"),
        2,
        "(?i)hash|weights|differ",
        ("other_ckpt",),
    ),
    Case("verify:data-with-bom", (*V, "--data", "bom.tsv", "--seq-lens", "8"), 0, "", ("bom.tsv",)),
    Case("verify:data-crlf", (*V, "--data", "crlf.tsv", "--seq-lens", "8"), 0, "", ("crlf.tsv",)),
    Case(
        "verify:duplicate-seq-lens",
        (*V, "--seq-lens", "8,8", "--batch-sizes", "1,1"),
        0,
        "once each",
    ),
]

QUANTIZE = [
    Case("quantize:no-precision", Q, 2, "--precision"),
    Case("quantize:precision-typo", (*Q, "--precision", "int7"), 2, "int7"),
    Case("quantize:tflite-precision", (*Q, "--precision", "int8-full"), 2, "int8-full"),
    Case("quantize:fp32-is-no-quantization", (*Q, "--precision", "fp32"), 2, "fp32"),
    Case(
        "quantize:missing-model",
        ("quantize", "nope", "-o", "out", "--precision", "int8-dynamic"),
        2,
        "nope",
    ),
    Case(
        "quantize:zero-byte-model",
        ("quantize", "zero/model.onnx", "-o", "out", "--precision", "int8-dynamic"),
        2,
        "model.onnx",
        ("zero/model.onnx",),
    ),
    Case(
        "quantize:garbage-model",
        ("quantize", "garbage/model.onnx", "-o", "out", "--precision", "int8-dynamic"),
        2,
        "model.onnx",
        ("garbage/model.onnx",),
    ),
    Case(
        "quantize:tflite-model",
        ("quantize", "garbage/model.tflite", "-o", "out", "--precision", "int8-dynamic"),
        2,
        "tflite|ONNX",
        ("garbage/model.tflite",),
    ),
    Case(
        "quantize:output-exists",
        (*Q, "--precision", "int8-dynamic"),
        2,
        "output exists",
        ("user_dir",),
        no_import=("torch",),
    ),
    Case(
        "quantize:overwrite-user-dir",
        (*Q, "--precision", "int8-dynamic", "--overwrite"),
        2,
        "did not write",
        ("user_dir",),
    ),
    Case(
        "quantize:overwrite-foreign-manifest",
        (*Q, "--precision", "int8-dynamic", "--overwrite"),
        2,
        "(?i)not an albert-edge|did not write|foreign",
        ("foreign_manifest",),
    ),
    Case(
        "quantize:output-is-the-input",
        ("quantize", "art", "-o", "art", "--precision", "int8-dynamic", "--overwrite"),
        2,
        "replace the input",
        ("art",),
    ),
    Case(
        "quantize:output-name-300-bytes",
        ("quantize", "{art}", "-o", "q" * 300, "--precision", "int8-dynamic"),
        2,
        "too long",
    ),
    Case(
        "quantize:block-size-12",
        (*Q, "--precision", "int4", "--block-size", "12"),
        2,
        "power of two",
    ),
    Case(
        "quantize:num-calibration-negative",
        (*Q, "--precision", "int8-static", "--num-calibration", "-5"),
        2,
        ">= 1",
    ),
    Case(  # no --calibration: the packaged SST-2 train sample (albert_edge/samples)
        "quantize:static-default-calibration",
        (*Q, "--precision", "int8-static"),
        0,
        creates=("out",),
    ),
    Case(
        "quantize:calibration-utf16",
        (*Q, "--precision", "int8-static", "--calibration", "utf16.tsv"),
        2,
        "UTF-16",
        ("utf16.tsv",),
        no_import=("torch",),
    ),
    Case(
        "quantize:calibration-for-dynamic",
        (*Q, "--precision", "int8-dynamic", "--calibration", "calib.txt"),
        2,
        "int8-static only",
        ("calib.txt",),
    ),
    Case(
        "quantize:reference-missing",
        (*Q, "--precision", "int8-dynamic", "--reference", "nope"),
        2,
        "nope",
    ),
    Case(
        "quantize:flipped-byte",
        ("quantize", "art", "-o", "out", "--precision", "int8-dynamic"),
        1,
        "(?i)sha256|changed|damaged|differ",
        ("flipped_art",),
    ),
]


@pytest.mark.parametrize("case", params(VERIFY))
def test_verify(case: Case, tmp_path: Path, hostile_shared: dict[str, Path]) -> None:
    run_case(case, tmp_path, hostile_shared, MAKERS)


@pytest.mark.parametrize("case", params(QUANTIZE))
def test_quantize(case: Case, tmp_path: Path, hostile_shared: dict[str, Path]) -> None:
    run_case(case, tmp_path, hostile_shared, MAKERS)
