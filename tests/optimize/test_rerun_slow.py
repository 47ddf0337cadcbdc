"""A rerun with a smaller ``--max-minutes`` reuses the stages an earlier run sealed in
the work directory: its plan counts them as done, never as 'does not fit'."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _until(proc: subprocess.Popen[str], marker: str, timeout: float = 900) -> str:
    """stderr up to the first line holding ``marker``; then SIGTERM and the rest."""
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        assert line, "".join(seen)
        seen.append(line)
        if marker in line:
            break
    proc.send_signal(signal.SIGTERM)
    seen.append(proc.stderr.read())
    proc.wait(timeout=120)
    return "".join(seen)


def test_a_smaller_budget_reuses_what_an_earlier_run_sealed(
    tmp_path: Path, sst2_train: Path, make_checkpoint, signals_not_ignored: None
) -> None:
    ckpt = make_checkpoint("tiny")
    data = tmp_path / "rows.tsv"
    data.write_text("".join(sst2_train.read_text().splitlines(keepends=True)[:241]))
    work = tmp_path / "work"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def run(minutes: str) -> subprocess.Popen[str]:
        cmd = [sys.executable, "-m", "albert_edge.cli", "optimize", str(ckpt)]
        cmd += ["--data", str(data), "--max-drop", "1", "--seq-len", "64", "--workers", "1"]
        cmd += ["--max-minutes", minutes, "-o", str(tmp_path / "out"), "--work-dir", str(work)]
        return subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)

    # 1. every stage, stopped once the candidates start (the stages are sealed)
    first = _until(run("8"), "building candidates")
    for name in ("finetune", "trim", "heal"):
        assert f"will run  {name} (~" in first, first
    # 2. a budget the stages did not fit from nothing
    second = _until(run("1.5"), "] stage split")
    for name in ("split", "finetune", "depth", "trim", "depth-trim", "heal", "depth-heal"):
        assert f"will run  {name} (done by an earlier run: reused)" in second, second
    plan = second.split("] stage split")[0]
    for name in ("finetune", "trim", "heal"):  # candidates may be cut for time; no stage
        assert f"will not  {name}:" not in plan, plan
