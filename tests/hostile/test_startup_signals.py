"""A stop signal at any moment of start-up ends a run like one during the work: the one
line ``... stopped by SIGTERM``, exit 128 + N, no traceback, nothing left beside the
output.

The entry points (``python -m albert_edge.cli``, ``python -m albert_edge.train``) install
their stop handler before their own imports and hold the signal until ``main`` can
report it; a signal that lands inside a later import (torch, onnx ...) is kept until the
import finished. Without that, SIGTERM half-way through ``import torch`` left a
half-initialised module and ended in a RecursionError traceback on a loaded machine.

The moments are counted from when the handler is in place (SIGTERM in the process's
caught-signal mask, ``SigCgt`` in ``/proc/PID/status``; SIGINT, SIGTERM and SIGHUP get it
together): before that the interpreter itself is starting
and the signal's default action is all there is.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.faults.harness import cli_env

TINY = json.dumps(
    {
        "embedding_size": 8,
        "hidden_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 32,
    }
)
ROWS = [("a fine , moving film", 1), ("dull and far too long", 0)] * 8
# Seconds after the handler is installed: inside the entry module's imports, argparse,
# the import of torch and the tokenizer, and the training loop itself.
MOMENTS = (0.0, 0.01, 0.05, 0.15, 0.4, 1.0)


def _catches(pid: int, sig: signal.Signals) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(int(ln.split()[1], 16) for ln in status.splitlines() if ln.startswith("SigCgt"))
    return bool(mask >> (int(sig) - 1) & 1)


def signal_during_start_up(
    tmp: Path, entry: str, sig: signal.Signals, delay: float, spiece: Path
) -> tuple[int, str]:
    """Start a training run through ``entry``, send ``sig`` ``delay`` s after its handler
    is in place, and return its exit status and stderr."""
    data = tmp / "data.tsv"
    data.write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in ROWS))
    prefix = ["-m", "albert_edge.train"] if entry == "train" else ["-m", "albert_edge.cli", "train"]
    argv = [sys.executable, *prefix, "--train", str(data), "--dev", str(data)]
    argv += ["--spiece", str(spiece), "--out", str(tmp / "out"), "--epochs", "100000"]
    argv += ["--batch-size", "4", "--config", TINY, "--quiet"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(), cwd="/"
    )
    t0 = time.monotonic()
    while not _catches(proc.pid, signal.SIGTERM):  # SIGINT: Python's own from the start
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 60, "the handler was never installed"
        time.sleep(0.001)
    time.sleep(delay)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


# ids ``<subcommand>:...`` as every hostile case (results/hostile.md counts them):
# ``python -m albert_edge.train`` and ``python -m albert_edge.cli train``
STARTS = [
    pytest.param(entry, delay, id=f"train:start-up-SIGTERM-{delay}s-{name}")
    for entry, name in (("train", "python-m-train"), ("cli", "python-m-cli"))
    for delay in MOMENTS
]


@pytest.mark.usefixtures("signals_not_ignored")
@pytest.mark.parametrize(("entry", "delay"), STARTS)
def test_sigterm_at_any_moment_of_start_up(
    tmp_path: Path, spiece_path: Path, entry: str, delay: float
) -> None:
    rc, err = signal_during_start_up(tmp_path, entry, signal.SIGTERM, delay, spiece_path)
    assert rc == 128 + signal.SIGTERM, err
    assert "Traceback" not in err, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("albert-edge train: stopped by SIGTERM"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.tsv"]


@pytest.mark.usefixtures("signals_not_ignored")
@pytest.mark.parametrize(
    "sig", [pytest.param(s, id=f"train:start-up-{s.name}") for s in (signal.SIGHUP, signal.SIGINT)]
)
def test_other_stop_signals_during_imports(
    tmp_path: Path, spiece_path: Path, sig: signal.Signals
) -> None:
    rc, err = signal_during_start_up(tmp_path, "train", sig, 0.05, spiece_path)
    assert rc == 128 + sig, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith(f"albert-edge train: stopped by {sig.name}")
