"""Fixtures of the fine-tune tests: tiny random checkpoints and small SST-2 cuts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("USE_TF", "0")


@pytest.fixture(scope="session")
def rows200(tmp_path_factory: pytest.TempPathFactory, sst2_train: Path) -> Path:
    """The first 200 SST-2 train rows."""
    lines = sst2_train.read_text().splitlines()
    out = tmp_path_factory.mktemp("learn-data") / "train200.tsv"
    out.write_text("\n".join(lines[:201]) + "\n")
    return out


@pytest.fixture(scope="session")
def dev60(tmp_path_factory: pytest.TempPathFactory, sst2_dev: Path) -> Path:
    lines = sst2_dev.read_text().splitlines()
    out = tmp_path_factory.mktemp("learn-dev") / "dev60.tsv"
    out.write_text("\n".join(lines[:61]) + "\n")
    return out


@pytest.fixture(scope="session")
def no_dropout(tmp_path_factory: pytest.TempPathFactory, spiece_path: Path) -> Path:
    """A tiny random classifier without dropout (runs that must agree across processes)."""
    from albert_edge.configs import make_config, make_random_checkpoint

    cfg = make_config(
        "tiny",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
    )
    return make_random_checkpoint(tmp_path_factory.mktemp("nodrop"), cfg, spiece_model=spiece_path)


def cli(*argv: str | Path) -> int:
    from albert_edge.cli import main

    return main(["train", "-q", *map(str, argv)])


def train_env() -> dict[str, str]:
    """The environment of a ``python -m albert_edge.train`` subprocess (this tree first)."""
    root = Path(__file__).resolve().parents[2]
    return {**os.environ, "PYTHONPATH": str(root), "USE_TF": "0", "OMP_NUM_THREADS": "1"}


def trained_weights(out: Path) -> dict:
    """Every tensor a training output holds (the model and its exit heads)."""
    from safetensors.torch import load_file

    tensors = load_file(str(out / "model.safetensors"))
    if (out / "exit_classifiers.safetensors").is_file():
        tensors.update(load_file(str(out / "exit_classifiers.safetensors")))
    return tensors


def interrupt_at_epoch_2(cmd: list[str], out: Path) -> None:
    """Run ``cmd -o out`` and stop it with SIGINT at its first step of epoch 2; it must
    exit as interrupted (128 + SIGINT), leaving its state to resume from.

    The child starts with SIGINT at its default: a test run launched as a background job
    of a non-interactive shell (``nohup ... &``) inherits SIGINT ignored, and albert-edge
    keeps an ignored SIGINT ignored, as ``nohup`` asks."""
    import signal
    import subprocess

    proc = subprocess.Popen(
        [*cmd, "-o", str(out)],
        env=train_env(),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith('{"epoch": 2, "step"'):
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 128 + signal.SIGINT, rest
