"""``albert-edge optimize`` handed the rows its model trained on, through the real CLI: a
model trained by ``albert-edge train`` (tiny, one epoch on 400 SST-2 rows, ~30 s) records
its rows; optimize says so in one line before its first stage, and refuses, before any
model loads, when no row it did not train on is left to choose and report on."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.harness import cli_env

TINY = json.dumps(
    {
        "embedding_size": 8,
        "hidden_size": 16,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 32,
    }
)


def _cli(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "albert_edge.cli", *map(str, args)]


@pytest.fixture(scope="module")
def trained(
    tmp_path_factory: pytest.TempPathFactory, sst2_train: Path, sst2_dev: Path, spiece_path: Path
) -> dict[str, Path]:
    """A model ``albert-edge train`` trained on 400 rows; those rows and 200 it never saw."""
    d = tmp_path_factory.mktemp("learned")
    lines = sst2_train.read_text(encoding="utf-8").splitlines(keepends=True)
    train = d / "train400.tsv"
    train.write_text(lines[0] + "".join(lines[1:401]), encoding="utf-8")
    mixed = d / "mixed.tsv"
    mixed.write_text(lines[0] + "".join(lines[1:601]), encoding="utf-8")
    model = d / "model"
    done = subprocess.run(
        _cli(
            "train", "--train", train, "--dev", sst2_dev, "--spiece", spiece_path,
            "--out", model, "--epochs", "1", "--batch-size", "32", "--max-len", "32",
            "--config", TINY, "-q",
        ),
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rec = json.loads((model / "training.json").read_text())
    assert rec["trained_rows"]["rows"] == 400  # every row of --train (read_sst2's sentences)
    return {"model": model, "train": train, "mixed": mixed, "dir": d}


def test_its_own_training_file_is_refused_in_one_line_naming_what_to_pass(
    trained: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    r = subprocess.run(
        _cli("optimize", trained["model"], "--data", trained["train"], "--max-drop", "1",
             "-o", out),
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "400 of 400 labelled rows are rows this model trained on" in lines[0]
    assert "--report-data" in lines[0] and "dev split" in lines[0]
    assert not out.exists() and not (tmp_path / ".out.optimize-work").exists()


def test_trained_rows_in_data_are_said_before_the_first_stage(
    trained: dict[str, Path], tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        _cli("optimize", trained["model"], "--data", trained["mixed"], "--max-drop", "1",
             "-o", tmp_path / "out", "--max-minutes", "5"),
        env=cli_env(),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line.rstrip("\n"))
            if "stage split" in line:
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    warn = [i for i, s in enumerate(seen) if "rows this model trained on" in s]
    stage = [i for i, s in enumerate(seen) if "stage split" in s]
    assert warn and stage and warn[0] < stage[0], "\n".join(seen)
    line = seen[warn[0]]
    assert "400 of 600 rows of mixed.tsv are rows this model trained on" in line
    assert "--report-data" in line
    assert len([s for s in seen if "trained on" in s]) == 1
