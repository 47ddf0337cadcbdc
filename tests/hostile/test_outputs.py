"""Hostile outputs (issue 43): ``-o`` inside an input, ``-o .`` / ``..`` / ``./`` /
``sub/..`` for every command that takes ``-o``, and the root directory as an output
(tests/hostile/judge.py says what each case asserts).

A ``-o .`` case runs from inside the directory it replaces (``cwd`` below), a previous
output of the same command: it must be replaced whole and verified complete, the process
must end cleanly though its working directory was swapped, and the one extra line it
prints is the note that a shell still in the directory sees the old, removed one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.hostile.files import MAKERS, ROWS
from tests.hostile.judge import UNDER_TEST, Case, params, run_case

NOTE = r"note: \S+ was replaced while it was the current directory"
# a tiny model for `train` (the default config is the 4 M-parameter SST-2 model)
TINY = json.dumps(
    {
        "embedding_size": 8,
        "hidden_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 32,
    }
)


def _rows(n: int) -> bytes:
    out = ["sentence\tlabel"] + [f"{ROWS[i % 4][1]} {i}\t{ROWS[i % 4][0]}" for i in range(n)]
    return ("\n".join(out) + "\n").encode()


def _write(name: str, data: bytes) -> Callable[[Path, Mapping[str, Path]], None]:
    def make(work: Path, shared: Mapping[str, Path]) -> None:
        (work / name).write_bytes(data)

    return make


def _cli(work: Path, *args: str) -> None:
    """Run the CLI under test in ``work`` (a previous output of its own, made as a user
    would make it)."""
    subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *args],
        check=True,
        capture_output=True,
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(UNDER_TEST), "OMP_NUM_THREADS": "1"},
    )


def _previous_artifact(work: Path, shared: Mapping[str, Path]) -> None:
    shutil.copytree(shared["art"], work / "out")


def _previous_trim(work: Path, shared: Mapping[str, Path]) -> None:
    _cli(work, "trim", str(shared["ckpt"]), "--corpus", "calib.txt", "-o", "out")


def _previous_search(work: Path, shared: Mapping[str, Path]) -> None:
    shutil.copytree(shared["search"], work / "out")


def _previous_truncation(work: Path, shared: Mapping[str, Path]) -> None:
    search = str(shared["search"])
    _cli(work, "depth", "truncate", str(shared["ckpt"]), "--depth-search", search, "--depth", "2",
         "-o", "out")  # fmt: skip


def _previous_training(work: Path, shared: Mapping[str, Path]) -> None:
    args = [
        a.replace("{tmp}", str(work)).replace("{ckpt}", str(shared["ckpt"])) for a in TRAIN_ARGS
    ]
    _cli(work, *args, "-o", "out")


def _empty_repo(work: Path, shared: Mapping[str, Path]) -> None:
    (work / "repo").mkdir()


def _dangling(work: Path, shared: Mapping[str, Path]) -> None:
    (work / "dangling").symlink_to("nowhere")


FILES = {
    **MAKERS,
    "rows200.tsv": _write("rows200.tsv", _rows(200)),
    "rows40.tsv": _write("rows40.tsv", _rows(40)),
    "prev_artifact": _previous_artifact,
    "prev_trim": _previous_trim,
    "prev_search": _previous_search,
    "prev_truncation": _previous_truncation,
    "prev_training": _previous_training,
    "empty_repo": _empty_repo,
    "dangling": _dangling,
}
# fmt: off
TRAIN_ARGS = ("train", "--train", "{tmp}/rows40.tsv", "--dev", "{tmp}/rows40.tsv", "--spiece",
              "{ckpt}/spiece.model", "--epochs", "1", "--max-len", "16", "--config", TINY)
Q8 = ("--precision", "int8-dynamic", "--no-verify")
CV = ("convert", "{ckpt}", "--no-verify")
NO_TORCH = ("torch",)

# --- an output inside (or equal to, or holding) an input: refused before any work --------

INSIDE = [
    Case("quantize:output-inside-its-artifact",
         ("quantize", "art/onnx/model.onnx", *Q8, "-o", "art/sub"), 2,
         r"art/sub: is inside the input \S+/art; albert-edge never writes into an input",
         ("art",), no_import=NO_TORCH),
    Case("quantize:output-inside-its-artifact-dir-given",
         ("quantize", "art", *Q8, "-o", "art/onnx/q8"), 2, "is inside the input", ("art",),
         no_import=NO_TORCH),
    Case("quantize:output-is-the-artifact-of-its-model",
         ("quantize", "art/onnx/model.onnx", *Q8, "-o", "art", "--overwrite"), 2,
         "would replace the input", ("art",)),
    Case("convert-onnx:output-inside-its-checkpoint",
         ("convert", "ckpt", "-o", "ckpt/onnx", "--no-verify"), 2, "is inside the input",
         ("ckpt",), no_import=NO_TORCH),
    Case("trim:output-inside-its-checkpoint",
         ("trim", "ckpt", "--corpus", "calib.txt", "-o", "ckpt/trimmed"), 2,
         "is inside the input", ("ckpt", "calib.txt")),
    Case("early-exit:output-inside-its-checkpoint",
         ("early-exit", "ckpt", "--data", "rows200.tsv", "-o", "ckpt/ee"), 2,
         "is inside the input", ("ckpt", "rows200.tsv")),
    Case("depth-truncate:output-inside-its-checkpoint",
         ("depth", "truncate", "ckpt", "--depth", "1", "-o", "ckpt/t"), 2,
         "is inside the input", ("ckpt",)),
    Case("export-triton:repository-inside-its-artifact",
         ("export-triton", "art", "-o", "art/repo"), 2, "input", ("art",)),
]

# (made with a depth search in the shared files)
INSIDE_SEARCH = [
    Case("convert-onnx:output-inside-its-depth-search", ("convert", "{ckpt}", "--depth", "2",
         "--depth-search", "out", "-o", "out/conv", "--no-verify"), 2,
         r"out/conv: is inside the input \S+/out", ("prev_search",), no_import=NO_TORCH),
]

# --- other outputs nothing can be written to: one line naming the cause ----------------

ELSEWHERE = [
    Case("convert-onnx:root-directory", (*CV, "-o", "/", "--overwrite"), 2,
         "/: the root directory cannot be an output", no_import=NO_TORCH),
    Case("trim:root-directory", ("trim", "{ckpt}", "--corpus", "calib.txt", "-o", "/",
         "--overwrite"), 2, "root directory", ("calib.txt",)),
    Case("convert-onnx:parent-is-a-dangling-link", (*CV, "-o", "dangling/sub/out"), 2,
         "dangling is a symbolic link to nowhere, which does not exist", ("dangling",),
         no_import=NO_TORCH),
    Case("convert-onnx:empty-output", (*CV, "-o", "", "--overwrite"), 2,
         r"-o/--output: empty path \(an unset shell variable\?\)", no_import=NO_TORCH),
    Case("train:empty-output", (*TRAIN_ARGS, "--out=", "--overwrite"), 2, "empty path",
         ("rows40.tsv",), no_import=NO_TORCH),
    Case("convert-onnx:output-is-a-link", (*CV, "-o", "out", "--overwrite"), 2,
         r"out: is a symbolic link \(to target\), not an albert-edge artifact directory",
         ("out_link",), no_import=NO_TORCH),
    Case("export-triton:name-dot-dot", ("export-triton", "{art}", "-o", "repo", "--name", ".."),
         2, r"'\.\.': a Triton model name .* is not '\.' or '\.\.'", ("empty_repo",)),
    Case("export-triton:name-dot", ("export-triton", "{art}", "-o", "repo", "--name", "."),
         2, r"'\.': a Triton model name", ("empty_repo",)),
]

# --- "-o ." and its spellings, run from inside the output -----------------------------

# (case, the working directory under the case's directory)
DOT: list[tuple[Case, str]] = [
    (Case("convert-onnx:dot-replaces-the-cwd-artifact", (*CV, "-o", ".", "--overwrite"), 0,
          NOTE, ("prev_artifact",), creates=("out",)), "out"),
    (Case("convert-onnx:dot-slash", (*CV, "-o", "./", "--overwrite"), 0, NOTE,
          ("prev_artifact",), creates=("out",)), "out"),
    (Case("convert-onnx:dot-dot-from-inside", (*CV, "-o", "..", "--overwrite"), 0, NOTE,
          ("prev_artifact",), creates=("out",)), "out/onnx"),
    (Case("convert-onnx:sub-dot-dot", (*CV, "-o", "onnx/..", "--overwrite"), 0, NOTE,
          ("prev_artifact",), creates=("out",)), "out"),
    (Case("convert-onnx:dot-without-overwrite", (*CV, "-o", "."), 2,
          r"/out: output exists; choose another -o or pass --overwrite", ("prev_artifact",),
          no_import=NO_TORCH), "out"),
    (Case("convert-onnx:dot-is-a-user-directory", (*CV, "-o", ".", "--overwrite"), 2,
          "holds files albert-edge did not write", ("user_dir",), no_import=NO_TORCH), "out"),
    (Case("convert-onnx:dot-holds-the-input", ("convert", "ckpt", "-o", ".", "--overwrite",
          "--no-verify"), 2, "would replace the input", ("ckpt",)), "."),
    (Case("quantize:dot-replaces-the-cwd-artifact",
          ("quantize", "{art}", *Q8, "-o", ".", "--overwrite"), 0, NOTE, ("prev_artifact",),
          creates=("out",)), "out"),
    (Case("trim:dot-replaces-the-cwd-trim", ("trim", "{ckpt}", "--corpus", "../calib.txt",
          "-o", ".", "--overwrite"), 0, NOTE, ("calib.txt", "prev_trim"), creates=("out",)),
     "out"),
    (Case("early-exit:dot-replaces-the-cwd-artifact", ("early-exit", "{ckpt}", "--data",
          "{tmp}/rows200.tsv", "--fit-rows", "200", "-q", "-o", ".", "--overwrite"), 0, NOTE,
          ("rows200.tsv", "prev_artifact"), creates=("out",)), "out"),
    (Case("export-triton:dot-is-the-repository", ("export-triton", "{art}", "-o", "."), 0, "",
          ("empty_repo",), creates=("repo",)), "repo"),
    (Case("bench:work-dir-dot-is-a-user-directory", ("bench", "{ckpt}", "--recommend",
          "--candidates", "onnx:fp32", "--work-dir", "."), 2,
          "holds files albert-edge did not write", ("user_dir",)), "out"),
    (Case("depth-search:dot-without-overwrite", ("depth", "search", "{ckpt}", "--data",
          "{tmp}/rows200.tsv", "-o", "."), 2, "output exists", ("rows200.tsv", "user_dir"),
          no_import=NO_TORCH), "out"),
    (Case("train:dot-without-overwrite", (*TRAIN_ARGS, "-o", "."), 2, "output exists",
          ("rows40.tsv", "user_dir")), "out"),
]

# Slower (a search, a training or a truncation made first): @slow.
DOT_SLOW: list[tuple[Case, str]] = [
    (Case("depth-search:dot-replaces-the-cwd-search", ("depth", "search", "{ckpt}", "--data",
          "{tmp}/rows200.tsv", "--epochs", "0", "--fit-rows", "100", "--held-out-rows", "60",
          "-q", "-o", ".", "--overwrite"), 0, NOTE, ("rows200.tsv", "prev_search"),
          creates=("out",), slow=True), "out"),
    (Case("depth-truncate:dot-replaces-the-cwd-truncation", ("depth", "truncate", "{ckpt}",
          "--depth-search", "{search}", "--depth", "2", "-q", "-o", ".", "--overwrite"), 0,
          NOTE, ("prev_truncation",), creates=("out",), slow=True), "out"),
    (Case("train:dot-replaces-the-cwd-training", (*TRAIN_ARGS, "-o", ".", "--overwrite"), 0,
          NOTE, ("rows40.tsv", "prev_training"), creates=("out",), slow=True), "out"),
]
# fmt: on


@pytest.fixture(scope="session")
def outputs_shared(hostile_shared: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    """The hostile checkpoint and artifact, and a depth search of that checkpoint (tiny
    split, no fitting epochs: its files are the point)."""
    from albert_edge.depth import FitSettings, SplitSettings, save_search, search_depths

    data = tmp_path_factory.mktemp("outputs") / "rows.tsv"
    data.write_bytes(_rows(80))
    split = SplitSettings(fit_rows=40, held_out_rows=40, max_length=16, resamples=100)
    out = tmp_path_factory.mktemp("outputs") / "search"
    save_search(
        search_depths(hostile_shared["ckpt"], data, split=split, fit=FitSettings(epochs=0)), out
    )
    return {**hostile_shared, "search": out}


def _complete(out: Path) -> None:
    """The replaced output is a whole one of its kind: an artifact albert-edge sealed (its
    manifest lists every file) or a sealed / trimmed checkpoint."""
    from albert_edge.io import is_albert_edge_artifact
    from albert_edge.manifest import check_files, load_manifest

    if (out / "manifest.json").is_file():
        check_files(out, load_manifest(out))
        assert is_albert_edge_artifact(out)
    else:
        assert (out / "config.json").is_file() or (out / "depth_search.json").is_file()
        assert (out / "seal.json").is_file() or (out / "trim.json").is_file()


@pytest.mark.parametrize("case", params(INSIDE + ELSEWHERE))
def test_output_inside_an_input(case: Case, tmp_path: Path, hostile_shared) -> None:
    run_case(case, tmp_path, hostile_shared, FILES)


@pytest.mark.parametrize("case", params(INSIDE_SEARCH))
def test_output_inside_a_search(case: Case, tmp_path: Path, outputs_shared) -> None:
    run_case(case, tmp_path, outputs_shared, FILES)


def _with_cwd(pairs: list[tuple[Case, str]]) -> list[object]:
    return [
        pytest.param(c, d, id=c.id, marks=[pytest.mark.slow] if c.slow else []) for c, d in pairs
    ]


@pytest.mark.parametrize(("case", "cwd"), _with_cwd(DOT))
def test_dot_outputs(case: Case, cwd: str, tmp_path: Path, hostile_shared) -> None:
    r = run_case(case, tmp_path, hostile_shared, FILES, cwd=tmp_path / "case" / cwd)
    if r.returncode == 0 and "out" in case.creates:
        _complete(tmp_path / "case" / "out")


@pytest.mark.parametrize(("case", "cwd"), _with_cwd(DOT_SLOW))
def test_dot_outputs_of_searches_and_training(
    case: Case, cwd: str, tmp_path: Path, outputs_shared
) -> None:
    r = run_case(case, tmp_path, outputs_shared, FILES, cwd=tmp_path / "case" / cwd)
    assert r.returncode == 0
    _complete(tmp_path / "case" / "out")
