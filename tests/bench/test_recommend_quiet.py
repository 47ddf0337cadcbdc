"""``-q`` drops TensorFlow/LiteRT/absl start-up lines (issue 28), and nothing else.

The lines come from C++ and from child processes straight to file descriptor 2, so the
check runs a real process and reads what reached its stderr.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

ABSL = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
ONEDNN = (
    "I0000 00:00:1795642056.572012   11041 port.cc:153] oneDNN custom operations are on. "
    "You may see slightly different numerical results"
)
TORCH = "W1125 21:26:38.119000 9557 torch/utils/_pytree.py:630] <enum 'KernelPreference'> ..."
XNNPACK = "INFO: Created TensorFlow Lite XNNPACK delegate for CPU."

SCRIPT = f"""
import os, subprocess, sys
from albert_edge.environment import native_stderr_filtered
print("before", file=sys.stderr)
with native_stderr_filtered():
    os.write(2, {ONEDNN!r}.encode() + b"\\n")
    print("kept 1", file=sys.stderr)
    child = "import os; os.write(2, {ABSL!r}.encode() + b'\\\\nkept child\\\\n')"
    subprocess.run([sys.executable, "-c", child], check=True)
    os.write(2, {TORCH!r}.encode() + b"\\n" + {XNNPACK!r}.encode() + b"\\n")
    print("E0000 00:00:17.5 1 x.cc:1] a real error line", file=sys.stderr)
    os.write(2, b"no newline at the end")
print("", file=sys.stderr)
print("after", file=sys.stderr)
"""


def test_start_up_lines_are_dropped_and_every_other_line_kept_in_order() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "before",
        "kept 1",
        "kept child",
        "E0000 00:00:17.5 1 x.cc:1] a real error line",
        "no newline at the end",
        "after",
    ]


@pytest.mark.slow
def test_quiet_cli_hides_tensorflow_start_up_lines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real TFLite conversion (TensorFlow and LiteRT imported) under ``-q``."""
    cmd = [sys.executable, "-m", "albert_edge.cli", "bench", "--recommend", "-q"]
    cmd += ["--candidates", "tflite:fp32", "--seq-lens", "8", "--threads", "1"]
    cmd += ["--rounds", "2", "--runs", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ship: tflite fp32" in proc.stdout
    assert proc.stderr.strip() == ""


INTERRUPTED_SET_UP = """
import sys, threading
from albert_edge.environment import native_stderr_filtered

def interrupted(self):  # a stop signal's KeyboardInterrupt, landing mid-set-up
    raise KeyboardInterrupt

threading.Thread.start = interrupted
try:
    with native_stderr_filtered():
        pass
except KeyboardInterrupt:
    print("albert-edge train: stopped by SIGTERM", file=sys.stderr)
"""


def test_a_stop_during_the_filters_set_up_leaves_stderr_restored() -> None:
    """The stop message is printed after the filter's block: descriptor 2 must be the
    real stderr again even when the interrupt landed between the filter's own lines."""
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_SET_UP], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == ["albert-edge train: stopped by SIGTERM"]
