"""Fixtures of the fault suite: the embedded tiny model, converted once per session.

The helpers the fault tests and benchmarks/fault_injection.py share (running the CLI,
judging inputs, outputs and leftovers, the kill -9 trial) live in tests/faults/harness.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def onnx_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fp32 ONNX artifact of the embedded model (never modify: copy it)."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = tmp_path_factory.mktemp("faults") / "fp32"
    convert(None, out, ConvertOptions(target="onnx", verify=False))
    return out
