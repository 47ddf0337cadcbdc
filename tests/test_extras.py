"""Dependencies as extras: the ONNX route needs none, the others name theirs in one line.

Each test runs the real CLI in a subprocess whose import system refuses the extras'
packages (a ``sys.meta_path`` hook), the state of a ``pip install albert-edge`` without
extras; the venv this suite runs in has them all installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from albert_edge.extras import EXTRAS, MissingExtraError, missing, require

ROOT = Path(__file__).resolve().parents[1]

# Runs the CLI with every optional package (and tflite-runtime) unimportable: a None entry
# in sys.modules is the import system's own "not importable" (``import`` raises
# ModuleNotFoundError and ``importlib.util.find_spec`` answers None, as when absent), and
# the meta-path hook refuses any submodule that something might try to load directly.
_BLOCKED_CLI = """
import sys
BLOCKED = {blocked!r}

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

for name in BLOCKED:
    sys.modules[name] = None
sys.meta_path.insert(0, Block())
from albert_edge.cli import main
code = main(sys.argv[1:])
leaked = sorted(m for m, v in sys.modules.items() if v is not None and m.split(".")[0] in BLOCKED)
assert not leaked, leaked
sys.exit(code)
"""
BLOCKED = sorted({m for mods in EXTRAS.values() for m in mods} | {"tflite_runtime"})


def _cli_without_extras(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "2", "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(
        [sys.executable, "-c", _BLOCKED_CLI.format(blocked=BLOCKED), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_tflite_route_names_the_extra_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "tfl"
    res = _cli_without_extras("convert", "--to", "tflite", "-o", str(out))
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert "--to tflite needs the [tflite] extra" in lines[0]
    assert "pip install 'albert-edge[tflite]'" in lines[0]
    assert not out.exists()  # nothing half-written


def test_onnx_route_needs_no_extra(make_checkpoint, tmp_path: Path) -> None:
    """convert --to onnx and inspect, with no extra importable."""
    out = tmp_path / "onnx"
    res = _cli_without_extras(
        "convert", str(make_checkpoint("tiny")), "--to", "onnx", "--no-verify", "-o", str(out)
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert (out / "onnx" / "model.onnx").is_file() and (out / "manifest.json").is_file()
    res = _cli_without_extras("inspect", str(out), "--json")
    assert res.returncode == 0, res.stderr[-2000:]


def test_require_names_only_what_is_absent() -> None:
    assert missing("tflite", ("json", "no_such_module_albert_edge")) == [
        "no_such_module_albert_edge"
    ]
    with pytest.raises(MissingExtraError, match=r"pip install 'albert-edge\[plots\]'$"):
        require("plots", "plotting", ("no_such_module_albert_edge",))
    require("plots", "plotting", ("json",))  # present: no error
