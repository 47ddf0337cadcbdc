"""Fixtures of the fault suite: the embedded tiny model, converted once per session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "albert_edge" / "models" / "sst2-albert-tiny"


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def one_line_error(r: subprocess.CompletedProcess[str]) -> bool:
    return (
        r.returncode != 0
        and "Traceback" not in r.stderr
        and len(r.stderr.strip().splitlines()) == 1
    )


def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


@pytest.fixture(scope="session")
def onnx_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fp32 ONNX artifact of the embedded model (never modify: copy it)."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = tmp_path_factory.mktemp("faults") / "fp32"
    convert(None, out, ConvertOptions(target="onnx", verify=False))
    return out
