"""What albert-edge prints and records names no directory of the machine, and prints its
figures as the docs do (issue 52: verify's title printed the package's install path,
training.json the command's absolute paths, train's summary ``0.4823955816361754``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from albert_edge.io import portable_command, shown_path
from albert_edge.train import headline


def test_shown_path_is_relative_inside_and_a_name_outside(tmp_path: Path) -> None:
    assert shown_path(tmp_path / "a" / "b.tsv", tmp_path) == os.path.join("a", "b.tsv")
    assert shown_path(tmp_path, tmp_path) == "."
    assert shown_path("/somewhere/else/data.tsv", tmp_path) == "data.tsv"


def test_portable_command_rewrites_paths_only(tmp_path: Path, monkeypatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("x")
    (tmp_path / "elsewhere.json").write_text("{}")
    monkeypatch.chdir(tmp_path / "data")  # the command typed from another directory
    argv = [
        "--train",
        str(data / "train.tsv"),
        "-o",
        str(tmp_path / "out" / "model"),
        "--dev=train.tsv",  # relative to the current directory: exists
        "--config",
        '{"hidden_size": 32, "note": "/not/a/path"}',
        "--epochs",
        "3",
        "--init",
        "/opt/models/albert-base",  # absolute, outside: its name alone
    ]
    got = portable_command(argv)
    # the output's parent is tmp_path/out: data/ lies outside it, so names alone; the JSON
    # and the plain values stay as typed
    assert got == [
        "--train",
        "train.tsv",
        "-o",
        "model",
        "--dev=train.tsv",
        "--config",
        '{"hidden_size": 32, "note": "/not/a/path"}',
        "--epochs",
        "3",
        "--init",
        "albert-base",
    ]
    assert not any(str(tmp_path) in tok for tok in got)
    # inside the output's parent: relative to it
    inner = portable_command(["--train", str(data / "train.tsv"), "-o", str(tmp_path / "m")])
    assert inner == ["--train", os.path.join("data", "train.tsv"), "-o", "m"]


@pytest.mark.parametrize(
    ("summary", "want"),
    [
        (  # a task output: its own metric, in points
            {
                "task": {"kind": "token-classification"},
                "metric": "f1",
                "held_out": {"f1": 0.4823955816361754, "low": 0.45, "high": 0.5123},
                "dev_f1": 0.5011111,
                "selected": {"epoch": 2},
                "parameters": 491497,
                "wall_time_s": 120.04,
            },
            "ner: token-classification: held-out f1 48.24 [45.00, 51.23], dev f1 50.11, "
            "epoch 2 chosen, 491,497 parameters, 120.0 s",
        ),
        (  # the SST-2 recipe from scratch: dev accuracy only
            {"dev_accuracy": 0.8027522935779816, "parameters": 2176386, "wall_time_s": 284.0},
            "ner: sequence-classification: dev accuracy 80.28 %, 2,176,386 parameters, 284.0 s",
        ),
        (  # a fine-tune (--init): held-out accuracy with its interval
            {
                "held_out_accuracy": {"accuracy": 0.9412, "low": 0.9311, "high": 0.95},
                "dev_accuracy": None,
                "selected": {"epoch": 1},
                "parameters": 10,
                "wall_time_s": 1.0,
            },
            "ner: sequence-classification: held-out accuracy 94.12 % [93.11, 95.00], "
            "epoch 1 chosen, 10 parameters, 1.0 s",
        ),
    ],
)
def test_train_headline_prints_points(summary: dict, want: str) -> None:
    line = headline(summary, "ner")
    assert line == want
    assert not re.search(r"\d\.\d{5,}", line)  # no raw fraction


def test_verify_title_names_no_machine_path(tmp_path: Path, monkeypatch, capsys) -> None:
    """The embedded reference by name, an artifact outside the current directory by its
    name, one inside it relative."""
    from albert_edge.layout import DEFAULT_MODEL
    from albert_edge.report import print_verify_report
    from albert_edge.verify import VerifyReport

    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out" / "art").mkdir(parents=True)
    for artifact, shown in ((tmp_path / "out" / "art", "out/art"), ("/x/y/far-art", "far-art")):
        report = VerifyReport(
            artifact=str(artifact),
            reference=str(DEFAULT_MODEL),
            precision="int8-dynamic",
            target="onnx",
            head="sequence-classification",
            runtime="onnxruntime",
            grid=[],
            outputs={},
            passed=True,
        )
        print_verify_report(report)
        out = capsys.readouterr().out
        title = " ".join(out.split())
        assert (
            f"verify {shown.replace('/', os.sep)} against the embedded model (sst2-albert-tiny)"
            in title
        )
        assert str(DEFAULT_MODEL.parent) not in out and str(tmp_path) not in out
