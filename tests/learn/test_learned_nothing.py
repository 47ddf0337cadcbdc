"""``train`` says when the model it trained learned nothing (issue 52): a tagger at entity
F1 0 and a pair classifier answering one class for every held-out row, each one line on
stderr and a ``learned_nothing`` note in ``training.json``. The files are made so that a
tiny model learns the majority and nothing else, as the issue's 3,000-row tagger did:
entities are rare (the tagger answers ``O`` everywhere), and the pair labels do not depend
on the text (the classifier answers the majority class)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.learn.test_tasks_train import TINY

ROOT = Path(__file__).resolve().parents[2]


def rare_entities(n: int = 96) -> str:
    """CoNLL-2003 layout, one sentence in twelve holding an entity."""
    lines = ["-DOCSTART- -X- -X- O", ""]
    for i in range(n):
        words = [(w, "O") for w in ["the", "weather", "was", "mild", "on", "that", "day", "."]]
        if i % 12 == 0:
            words = [("John", "I-PER"), ("Smith", "I-PER"), *words[1:]]
        lines += [f"{w} NN I-NP {t}" for w, t in words] + [""]
    return "\n".join(lines) + "\n"


def majority_pairs(n: int = 96) -> str:
    """RTE's columns; labels unrelated to the (repeated) text, seven in eight one class."""
    rows = ["index\tsentence1\tsentence2\tlabel"]
    for i in range(n):
        label = "not_entailment" if i % 8 == 0 else "entailment"
        rows.append(f"{i}\tA man walks in the park.\tSomeone is outside.\t{label}")
    return "\n".join(rows) + "\n"


def _train(data: Path, out: Path, spiece: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    argv = ["train", "--train", str(data), "--spiece", str(spiece), "-o", str(out)]
    argv += ["--epochs", "1", "--threads", "1", "-q", "--held-out", "0.45"]
    argv += ["--config", TINY, "--max-len", "64", "--batch-size", "8"]
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )


@pytest.mark.parametrize(
    ("name", "text", "sign"),
    [
        ("ner.txt", rare_entities(), "entity F1 is 0 on the"),
        ("rte.tsv", majority_pairs(), "every one of its"),
    ],
)
def test_train_says_the_model_learned_nothing(
    name: str, text: str, sign: str, tmp_path: Path, spiece_path: Path
) -> None:
    data = tmp_path / name
    data.write_text(text)
    r = _train(data, tmp_path / "out", spiece_path)
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "learned nothing" in line]
    assert len(said) == 1 and said[0].startswith("albert-edge train: learned nothing")
    assert sign in said[0]
    rec = json.loads((tmp_path / "out" / "training.json").read_text())
    assert rec["learned_nothing"] == said[0].removeprefix("albert-edge train: ")
    held = rec["held_out"]
    if rec["task"]["kind"] == "token-classification":
        assert held["f1"] == 0.0
    else:  # its accuracy is the share of the one class it answers
        assert "class " in rec["learned_nothing"]


@pytest.mark.parametrize("init", ["random", "trained"])
def test_fine_tune_says_it_when_every_held_out_row_gets_one_class(
    init: str,
    tmp_path: Path,
    sst2_train: Path,
    make_checkpoint,
    trained_checkpoint: Path,
) -> None:
    """``train --init`` on an SST-2 file (the fine-tune loop): a random tiny model kept at
    its initialisation (lr 1e-9) answers class 0 for every row and is said to; the
    trained SST-2 model under the same run is not."""
    rows = tmp_path / "rows.tsv"
    rows.write_text("".join(sst2_train.read_text().splitlines(keepends=True)[:301]))
    ckpt = make_checkpoint() if init == "random" else trained_checkpoint
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    argv = ["train", "--init", str(ckpt), "--train", str(rows), "-o", str(tmp_path / "out")]
    argv += ["--epochs", "1", "--lr", "1e-9", "--threads", "1", "-q"]
    r = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "out" / "training.json").read_text())
    said = [line for line in r.stderr.splitlines() if "learned nothing" in line]
    if init == "trained":
        assert said == [] and "learned_nothing" not in rec
        assert rec["held_out_accuracy"]["single_class"] is None
        return
    assert len(said) == 1 and "is class 0" in said[0]
    assert rec["learned_nothing"] == said[0].removeprefix("albert-edge train: ")
    assert rec["held_out_accuracy"]["single_class"] == 0


def test_from_scratch_sst2_says_it_when_every_dev_row_gets_one_class(
    tmp_path: Path, spiece_path: Path
) -> None:
    """The SST-2 recipe holds no rows out (the epoch is read on ``--dev``): one class on
    every ``--dev`` row is the sign there."""
    rows = ["sentence\tlabel"]
    rows += [f"a film like any other .\t{0 if i % 8 == 0 else 1}" for i in range(96)]
    (tmp_path / "train.tsv").write_text("\n".join(rows) + "\n")
    (tmp_path / "dev.tsv").write_text("\n".join(rows[:33]) + "\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    argv = ["train", "--train", str(tmp_path / "train.tsv"), "--dev", str(tmp_path / "dev.tsv")]
    argv += ["--spiece", str(spiece_path), "-o", str(tmp_path / "out"), "-q"]
    argv += ["--epochs", "1", "--threads", "1", "--config", TINY, "--batch-size", "8"]
    r = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    said = [ln for ln in r.stderr.splitlines() if "learned nothing" in ln]
    rec = json.loads((tmp_path / "out" / "training.json").read_text())
    assert len(said) == 1 and rec["learned_nothing"] == said[0].removeprefix("albert-edge train: ")
    assert "every one of its 32 predictions on the --dev rows" in rec["learned_nothing"]
