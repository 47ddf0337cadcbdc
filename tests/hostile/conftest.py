"""Fixtures of the hostile-input suite: one tiny checkpoint and one fp32 ONNX artifact of
it, made once per session and shared read-only by every case (each case hashes them
before and after: a case that changed a byte fails)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def hostile_shared(
    tmp_path_factory: pytest.TempPathFactory, make_checkpoint: Callable[..., Path]
) -> dict[str, Path]:
    """``ckpt``: a tiny random ALBERT; ``art``: its fp32 ONNX artifact (``convert --to
    onnx``, verified). Shared by every case: never edited (the judge checks)."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    ckpt = make_checkpoint("tiny")
    art = tmp_path_factory.mktemp("hostile") / "art"
    convert(ckpt, art, ConvertOptions(target="onnx", verify=False))
    return {"ckpt": ckpt, "art": art}
