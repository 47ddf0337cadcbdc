"""Hostile inputs to ``inspect``, ``bench``, ``train``, ``export-triton``, ``kernels`` and
the top-level command line (tests/hostile/judge.py says what each case asserts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.files import MAKERS
from tests.hostile.judge import Case, params, run_case

B = ("bench", "{art}", "--backend", "ort-cpu")
T = ("train", "-o", "out", "--train", "bom.tsv", "--dev", "bom.tsv")
TI = ("train", "-o", "out", "--init", "{ckpt}", "--train", "bom.tsv")
X = ("export-triton", "{art}", "-o", "repo")

INSPECT = [
    Case("inspect:missing", ("inspect", "nope"), 2, "nope"),
    Case(
        "inspect:zero-byte-onnx",
        ("inspect", "zero/model.onnx"),
        2,
        "model.onnx: empty file",
        ("zero/model.onnx",),
    ),
    Case(
        "inspect:garbage-onnx",
        ("inspect", "garbage/model.onnx"),
        2,
        "model.onnx",
        ("garbage/model.onnx",),
    ),
    Case(
        "inspect:garbage-tflite",
        ("inspect", "garbage/model.tflite"),
        2,
        "model.tflite",
        ("garbage/model.tflite",),
    ),
    Case("inspect:text-as-onnx", ("inspect", "text.onnx"), 2, "text.onnx", ("text.onnx",)),
    Case("inspect:empty-dir", ("inspect", "empty_dir"), 2, "empty_dir", ("empty_dir",)),
    Case(
        "inspect:config-not-json",
        ("inspect", "ckpt"),
        2,
        "config.json",
        ("bad_ckpt_config",),
        slow=True,
    ),
    Case("inspect:manifest-not-json", ("inspect", "art"), 2, "manifest", ("bad_manifest_art",)),
    Case("inspect:symlink-loop", ("inspect", "loop"), 2, "loop", ("loop",)),
    Case(
        "inspect:fifo",
        ("inspect", "model.onnx"),
        2,
        "model.onnx: not a regular file",
        ("fifo",),
        timeout=60,
    ),
    Case("inspect:dev-null", ("inspect", "/dev/null"), 2, "/dev/null"),
    Case("inspect:artifact", ("inspect", "{art}", "--json"), 0),
    Case("inspect:too-many-args", ("inspect", "a", "b"), 2, "unrecognized"),
]

BENCH = [
    Case(
        "bench:threads-10000",
        (*B, "--threads", "10000"),
        2,
        "at most",
        no_import=("torch",),
        timeout=30,
    ),
    Case("bench:threads-one-too-many", (*B, "--threads", "2,100000"), 2, "at most"),
    Case("bench:threads-zero", (*B, "--threads", "0"), 2, ">= 1"),
    Case("bench:batch-zero", (*B, "--batch", "0"), 2, ">= 1"),
    Case("bench:batch-past-int64", (*B, "--batch", "9" * 20), 2, "<="),
    Case("bench:seq-lens-words", (*B, "--seq-lens", "long"), 2, "integers"),
    Case("bench:runs-zero", (*B, "--runs", "0"), 2, ">= 1"),
    Case("bench:runs-past-int64", (*B, "--runs", "9" * 30), 2, "<="),
    Case("bench:warmup-negative", (*B, "--warmup", "-1"), 2, ">= 0"),
    Case("bench:rounds-without-runs", (*B, "--rounds", "3"), 2, "--runs"),
    Case("bench:backend-typo", ("bench", "{art}", "--backend", "onnxruntime"), 2, "ort-cpu"),
    Case("bench:json-dir-missing", (*B, "--json", "no/dir/r.json"), 2, "no/dir"),
    Case(
        "bench:json-name-250-bytes", (*B, "--json", "j" * 250), 2, "too long", no_import=("torch",)
    ),
    Case("bench:markdown-dir-missing", (*B, "--markdown", "no/r.md"), 2, "no"),
    # report files follow -o's rule: never over a user's file of the same name
    *(
        Case(
            f"bench:{flag[2:]}-over-a-users-file",
            (*B, flag, "afile"),
            2,
            "not a report albert-edge wrote",
            ("afile",),
            no_import=("torch",),
        )
        for flag in ("--json", "--markdown", "--plot")
    ),
    Case(
        "bench:recommend-json-over-a-users-file",
        ("bench", "--recommend", "--json", "afile"),
        2,
        "not a report albert-edge wrote",
        ("afile",),
        no_import=("torch",),
    ),
    Case("bench:missing-target", ("bench", "nope", "--backend", "ort-cpu"), 2, "nope"),
    Case(
        "bench:zero-byte-model",
        ("bench", "zero/model.onnx", "--backend", "ort-cpu"),
        2,
        "model.onnx: empty file",
        ("zero/model.onnx",),
    ),
    Case(
        "bench:data-utf16",
        ("bench", "--recommend", "--data", "utf16.tsv"),
        2,
        "UTF-16",
        ("utf16.tsv",),
    ),
    Case("bench:candidates-typo", ("bench", "--recommend", "--candidates", "onnx:int9"), 2, "int9"),
    Case(
        "bench:duplicate-shapes",
        (*B, "--runs", "2", "--warmup", "0", "--seq-lens", "8,8", "--batch", "1,1"),
        0,
        "once each",
        slow=True,
    ),
]

TRAIN = [
    Case("train:no-output", ("train",), 2, "-o/--out"),
    Case("train:config-not-json", (*T, "--config", "{hidden"), 2, "not JSON", ("bom.tsv",)),
    Case("train:config-a-list", (*T, "--config", "[1]"), 2, "JSON object", ("bom.tsv",)),
    Case(
        "train:config-typo",
        (*T, "--config", '{"hiden_size": 64}'),
        2,
        "did you mean 'hidden_size'",
        ("bom.tsv",),
        no_import=("torch",),
    ),
    Case(
        "train:config-wrong-type",
        (*T, "--config", '{"hidden_size": "big"}'),
        2,
        "an integer",
        ("bom.tsv",),
    ),
    Case(
        "train:config-heads", (*T, "--config", '{"hidden_size": 130}'), 2, "multiple", ("bom.tsv",)
    ),
    Case(
        "train:config-huge",
        (*T, "--config", '{"hidden_size": 65536, "intermediate_size": 262144}'),
        2,
        "GiB",
        ("bom.tsv",),
    ),
    Case(
        "train:config-nan", (*T, "--config", '{"layer_norm_eps": NaN}'), 2, "finite", ("bom.tsv",)
    ),
    Case(
        "train:config-dropout-2",
        (*T, "--config", '{"hidden_dropout_prob": 2}'),
        2,
        r"\[0, 1\)",
        ("bom.tsv",),
    ),
    Case(
        "train:config-activation",
        (*T, "--config", '{"hidden_act": "gelu2"}'),
        2,
        "gelu2",
        ("bom.tsv",),
    ),
    Case("train:lr-inf", (*T, "--lr", "inf"), 2, "(?i)finite|lr", ("bom.tsv",)),
    Case("train:lr-nan", (*T, "--lr", "nan"), 2, "(?i)finite|lr", ("bom.tsv",)),
    Case("train:epochs-zero", (*T, "--epochs", "0"), 2, ">= 1"),
    Case("train:batch-size-past-int64", (*T, "--batch-size", "9" * 20), 2, "<="),
    Case("train:threads-10000", (*T, "--threads", "10000"), 2, "at most"),
    Case("train:max-len-one", (*T, "--max-len", "1"), 2, ">= 2"),
    Case("train:train-missing", ("train", "-o", "out", "--train", "no.tsv"), 2, "no.tsv"),
    Case(
        "train:train-word-labels",
        ("train", "-o", "out", "--train", "wordlabel.tsv"),
        2,
        "0 \\(negative\\)",
        ("wordlabel.tsv",),
    ),
    Case(
        "train:train-label-7",
        ("train", "-o", "out", "--train", "label7.tsv"),
        2,
        "label 7",
        ("label7.tsv",),
        no_import=("torch",),
    ),
    Case(
        "train:dev-utf16",
        ("train", "-o", "out", "--train", "bom.tsv", "--dev", "utf16.tsv"),
        2,
        "UTF-16",
        ("utf16.tsv", "bom.tsv"),
    ),
    Case(
        "train:output-exists",
        (*T,),
        2,
        "output exists",
        ("user_dir", "bom.tsv"),
        no_import=("torch",),
    ),
    Case(
        "train:overwrite-user-dir",
        (*T, "--overwrite"),
        2,
        "did not write|albert-edge did not",
        ("user_dir", "bom.tsv"),
    ),
    Case(
        "train:output-holds-input",
        ("train", "-o", ".", "--train", "bom.tsv", "--dev", "bom.tsv", "--overwrite"),
        2,
        "input",
        ("bom.tsv",),
    ),
    Case("train:output-name-300-bytes", ("train", "-o", "t" * 300), 2, "too long"),
    Case("train:qat-fp16", (*TI, "--qat", "fp16"), 2, "no trainable quantizer", ("bom.tsv",)),
    Case("train:qat-int9", (*TI, "--qat", "int9"), 2, "invalid choice", ("bom.tsv",)),
    Case(
        "train:qat-static-target-unknown",
        (*TI, "--qat", "int8-static", "--qat-target", "tpu"),
        2,
        "--qat-target tpu",
        ("bom.tsv",),
    ),
]

TRITON = [
    Case("export-triton:missing-artifact", ("export-triton", "nope", "-o", "repo"), 2, "nope"),
    Case("export-triton:max-batch-past-int32", (*X, "--max-batch-size", "9" * 20), 2, "2147483647"),
    Case("export-triton:max-batch-2^31", (*X, "--max-batch-size", str(2**31)), 2, "2147483647"),
    Case("export-triton:max-batch-negative", (*X, "--max-batch-size", "-1"), 2, ">= 0"),
    Case("export-triton:version-zero", (*X, "--version", "0"), 2, ">= 1"),
    Case("export-triton:version-past-int64", (*X, "--version", str(2**63)), 2, "<="),
    Case("export-triton:name-escapes", (*X, "--name", "../evil"), 2, "name"),
    Case("export-triton:name-with-slash", (*X, "--name", "a/b"), 2, "name"),
    Case("export-triton:name-300-bytes", (*X, "--name", "m" * 300), 2, "too long"),
    Case(
        "export-triton:output-is-a-file",
        ("export-triton", "{art}", "-o", "afile"),
        2,
        "afile",
        ("afile",),
    ),
    Case(
        "export-triton:entry-exists",
        ("export-triton", "{art}", "-o", "repo"),
        2,
        "exists",
        ("triton_repo",),
    ),
    Case(
        "export-triton:overwrite-user-entry",
        ("export-triton", "{art}", "-o", "repo", "--overwrite"),
        2,
        "did not write|not an albert-edge",
        ("triton_repo",),
    ),
    Case(
        "export-triton:into-its-input", ("export-triton", "art", "-o", "art"), 2, "input", ("art",)
    ),
    Case(
        "export-triton:garbage-model",
        ("export-triton", "garbage", "-o", "repo"),
        2,
        "garbage",
        ("garbage/model.onnx",),
    ),
    Case("export-triton:fresh-repo", (*X,), 0, "config.pbtxt", creates=("repo",)),
    Case(
        "export-triton:overwrite-own-export",
        (*X, "--overwrite"),
        0,
        "config.pbtxt",
        ("own_triton_export",),
        creates=("repo",),
    ),
]

KERNELS = [
    Case("kernels:no-action", ("kernels",), 2, "required"),
    Case("kernels:action-typo", ("kernels", "lst"), 2, "invalid choice"),
    Case("kernels:setup-no-name", ("kernels", "setup"), 2, "required"),
    Case("kernels:setup-typo", ("kernels", "setup", "arm"), 2, "invalid choice"),
    Case("kernels:list-extra-arg", ("kernels", "list", "all"), 2, "unrecognized"),
    Case("kernels:list", ("kernels", "list"), 0, "x86"),
]

TOP = [
    Case("cli:no-command", (), 2, "required"),
    Case("cli:command-typo", ("covert",), 2, "invalid choice"),
    Case("cli:version", ("--version",), 0, "albert-edge"),
]


@pytest.mark.parametrize("case", params(INSPECT + BENCH + TRAIN + TRITON + KERNELS + TOP))
def test_command(case: Case, tmp_path: Path, hostile_shared: dict[str, Path]) -> None:
    run_case(case, tmp_path, hostile_shared, MAKERS)
