"""Interrupted + ``--resume`` equals uninterrupted (bit for bit); 2 gloo processes equal
1 process within the documented tolerance (docs/training.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.learn.conftest import cli, interrupt_at_epoch_2, train_env, trained_weights


def test_interrupted_then_resumed_equals_uninterrupted(make_checkpoint, rows200, tmp_path):
    init = make_checkpoint()
    args = [
        "--init",
        str(init),
        "--train",
        str(rows200),
        "--dev",
        str(rows200),
        "--epochs",
        "3",
        "--batch-size",
        "16",
        "--exit-loss",
        "pabee",
        "--lr",
        "1e-3",
    ]
    cmd = [sys.executable, "-m", "albert_edge.train", *args]
    full, cut = tmp_path / "full", tmp_path / "cut"
    assert cli(*args, "-o", full) == 0  # in this process: one interpreter start less

    interrupt_at_epoch_2(cmd, cut)
    state = tmp_path / ".cut.train-state"
    assert (state / "state.pt").is_file() and not cut.exists()

    subprocess.run(
        [*cmd, "-q", "--resume", "-o", str(cut)], env=train_env(), check=True, capture_output=True
    )
    assert not state.exists()  # removed once the output is written
    a, b = trained_weights(full), trained_weights(cut)
    assert a.keys() == b.keys()
    assert all(bool((a[k] == b[k]).all()) for k in a), "resumed run differs"
    ra = json.loads((full / "training.json").read_text())
    rb = json.loads((cut / "training.json").read_text())
    assert ra["held_out_accuracy"] == rb["held_out_accuracy"]


def test_resume_state_of_another_run_refused(make_checkpoint, rows200, tmp_path, capsys):
    import torch

    state = tmp_path / ".o.train-state"
    state.mkdir()
    torch.save({"fingerprint": "other"}, state / "state.pt")
    torch.save({"cpu": torch.get_rng_state()}, state / "rng-0.pt")
    assert (
        cli("--init", make_checkpoint(), "--train", rows200, "--resume", "-o", tmp_path / "o") != 0
    )
    assert "resume state of another run" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# Documented in docs/training.md ("Data parallel"): same global batches and schedule, so the
# processes differ only by float summation order in the gradient all-reduce and the batch
# mean; after one short epoch of AdamW the weights agree to this.
DDP_ATOL = 1e-3


def test_two_gloo_processes_match_one(no_dropout, rows200, tmp_path):
    args = [
        "--init",
        str(no_dropout),
        "--train",
        str(rows200),
        "--epochs",
        "2",
        "--batch-size",
        "16",
        "--lr",
        "5e-3",
        "-q",
        "--threads",
        "1",
        "--device",
        "cpu",
    ]
    one, two = tmp_path / "one", tmp_path / "two"
    assert cli(*args, "-o", one) == 0
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "albert_edge.train",
            *args,
            "-o",
            str(two),
        ],
        env=train_env(),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads((two / "training.json").read_text())["processes"] == 2
    a, b = trained_weights(one), trained_weights(two)
    init = trained_weights(no_dropout)
    moved = max(float((a[k] - init[k]).abs().max()) for k in a)
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert diff <= DDP_ATOL and moved > 20 * diff, (diff, moved)
