"""A run stopped by SIGTERM in its first epoch (before any epoch was chosen) resumes to
the uninterrupted run's result, bit for bit (issue 43: the resume ended in KeyError).

The data holds a sentence longer than ``--max-len`` (= the model's 128 positions) and one
line over 128 KiB: both are truncated when encoded, never a crash."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.learn.conftest import cli, train_env, trained_weights


def _rows(rows200: Path, out: Path) -> Path:
    lines = rows200.read_text().splitlines()[:81]  # header + 80 rows
    lines.append("1\tthe film is " + "very " * 400 + "good")  # > 128 tokens
    lines.append("0\t" + "dull " * 30_000)  # a field over 128 KiB
    out.write_text("\n".join(lines) + "\n")
    return out


def test_sigterm_in_first_epoch_then_resume_equals_uninterrupted(
    make_checkpoint, rows200, tmp_path
):
    import torch

    data = _rows(rows200, tmp_path / "rows.tsv")
    args = [
        "--init",
        str(make_checkpoint()),
        "--train",
        str(data),
        "--held-out",
        "0.4",  # 82 rows: 33 held out, 49 trained on in 13 steps of 4
        "--epochs",
        "2",
        "--batch-size",
        "4",
        "--max-len",
        "128",
        "--lr",
        "1e-3",
        "--threads",
        "1",
    ]
    full, cut = tmp_path / "full", tmp_path / "cut"
    assert cli(*args, "-o", full) == 0  # in this process: one interpreter start less

    cmd = [sys.executable, "-m", "albert_edge.train", *args]
    proc = subprocess.Popen(
        [*cmd, "-o", str(cut)],
        env=train_env(),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith('{"epoch": 1, "step"'):  # the first progress line of epoch 1
            proc.send_signal(signal.SIGTERM)
            break
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM, rest
    state = tmp_path / ".cut.train-state"
    saved = torch.load(state / "state.pt", map_location="cpu", weights_only=True)
    assert (saved["epoch"], saved["best"]) == (0, {}), "not stopped in the first epoch"
    assert 0 < saved["in_epoch"] < 13 and not cut.exists()

    assert cli(*args, "--resume", "-o", cut) == 0  # in this process too
    assert not state.exists()  # removed once the output is written
    a, b = trained_weights(full), trained_weights(cut)
    assert a.keys() == b.keys()
    assert all(bool((a[k] == b[k]).all()) for k in a), "resumed run differs"
    ra = json.loads((full / "training.json").read_text())
    rb = json.loads((cut / "training.json").read_text())
    assert ra["held_out_accuracy"] == rb["held_out_accuracy"]
    assert ra["log"] == rb["log"] and len(ra["log"]) == 2
    tok = json.loads((cut / "tokenizer_config.json").read_text())
    assert tok["model_max_length"] == 128
