"""Fixtures for the benchmark harness tests: one real tiny run shared by many tests.

The run is real (child processes, PyTorch, ONNX Runtime) but tiny: the "tiny" config,
3 timed runs, one warm-up. Nothing here asserts a time.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def export_plain_onnx(ckpt_dir: Path, out_dir: Path) -> Path:
    """A plain ``torch.onnx.export`` of a checkpoint (what a user would do by hand)."""
    os.environ.setdefault("USE_TF", "0")
    import torch

    from albert_edge.checkpoint import load_checkpoint

    ckpt = load_checkpoint(ckpt_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ids = torch.ones(1, 16, dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(
        ckpt.model,
        (ids, ids, torch.zeros_like(ids)),
        str(out_dir / "model.onnx"),
        input_names=names,
        output_names=["logits"],
        dynamic_axes={n: {0: "batch", 1: "seq"} for n in names},
        opset_version=17,
        dynamo=False,
    )
    for name in ("config.json", "spiece.model"):
        shutil.copyfile(ckpt_dir / name, out_dir / name)
    return out_dir / "model.onnx"


@pytest.fixture(scope="session")
def tiny_onnx(
    make_checkpoint: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return export_plain_onnx(make_checkpoint("tiny"), tmp_path_factory.mktemp("tiny-onnx"))


@pytest.fixture(scope="session")
def tiny_report(make_checkpoint: Callable[..., Path], tiny_onnx: Path) -> dict[str, Any]:
    """One real benchmark run: a checkpoint (PyTorch backends) and an ONNX file (ORT)."""
    from albert_edge.bench import bench

    return bench(
        [make_checkpoint("tiny"), tiny_onnx],
        backends=["torch-fp32", "torch-int8-dynamic", "torch-cuda-fp16", "ort-cpu", "ort-cuda"],
        batches=(1, 2),
        seq_lens=(16,),
        threads=(1,),
        runs=3,
        warmup=1,
        roofline_min_time_s=0.02,
        progress=False,
    )
