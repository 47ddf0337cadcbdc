"""Every default conversion path on trained models of every shape (issue 43).

The TFLite tests convert random-init checkpoints or the embedded model; a trained
6-layer, 2-group ALBERT failed ``weights_stored_once`` at TFLite int8-dynamic while the
random model of its config converted. Here each trained shape (``conftest.SHAPES`` plus
the embedded model) goes through each target and precision ``albert-edge convert``
offers, and each conversion is checked the way ``convert`` promises: its verification
against PyTorch ran on every cell and passed (``convert`` refuses to write a file that
fails it), and every weight is stored once. The 2-group model's TFLite and ONNX
int8-dynamic cells run by default; the rest of the matrix is slow-marked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from albert_edge.convert import convert
from albert_edge.options import ConvertOptions

ROOT = Path(__file__).resolve().parents[2]

# (target, precision, ConvertOptions extras / CLI flags for ``auto``): every precision
# ``convert --help`` lists per target, plus the variants that take another path (ONNX
# int4 on MatMulNBits, the ARM int8 recipe, TFLite's GPU graph).
CELLS: list[tuple[str, str, dict[str, Any]]] = [
    ("onnx", "fp32", {}),
    ("onnx", "fp16", {}),
    ("onnx", "int8-dynamic", {}),
    ("onnx", "int8-dynamic", {"runs_on": "arm64"}),
    ("onnx", "int8-static", {"calibration": "train"}),
    ("onnx", "int4", {}),
    ("onnx", "int4", {"int4_kernel": "nbits"}),
    ("onnx", "auto", {}),
    ("tflite", "fp32", {}),
    ("tflite", "fp16", {}),
    ("tflite", "fp16", {"accelerator": "gpu"}),
    ("tflite", "int8-dynamic", {}),
    ("tflite", "int8-full", {"calibration": "train"}),
    ("tflite", "auto", {}),
]
MODELS = ("embedded", "groups2", "inner2", "base")
# What the default run converts: the shape at both int8-dynamic defaults.
DEFAULT_RUN = {("groups2", "tflite", "int8-dynamic", ""), ("groups2", "onnx", "int8-dynamic", "")}


def _cell_id(target: str, precision: str, extra: dict[str, Any]) -> str:
    tail = "-".join(f"{v}" for k, v in extra.items() if k != "calibration")
    return "-".join(p for p in (target, precision, tail) if p)


def _params() -> list[Any]:
    out = []
    for model in MODELS:
        for target, precision, extra in CELLS:
            tail = "-".join(f"{v}" for k, v in extra.items() if k != "calibration")
            slow = (model, target, precision, tail) not in DEFAULT_RUN
            out.append(
                pytest.param(
                    model,
                    target,
                    precision,
                    extra,
                    id=f"{model}-{_cell_id(target, precision, extra)}",
                    marks=[pytest.mark.slow] if slow else [],
                )
            )
    return out


@pytest.fixture(scope="module")
def checkpoint(
    train_shape: Callable[[str], Path], trained_checkpoint: Path
) -> Callable[[str], Path]:
    return lambda name: trained_checkpoint if name == "embedded" else train_shape(name)


def _model_params(ckpt_dir: Path) -> int:
    from albert_edge.checkpoint import load_checkpoint

    model = load_checkpoint(ckpt_dir).model
    return sum(p.numel() for p in {p.data_ptr(): p for p in model.parameters()}.values())


def _convert_auto(ckpt: Path, out: Path, target: str, data: Path) -> dict[str, Any]:
    """``--precision auto`` through the CLI (its search flags live there)."""
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "convert",
            str(ckpt),
            "--to",
            target,
            "--precision",
            "auto",
            "--data",
            str(data),
            "--search-rows",
            "100",
            "--max-drop",
            "3",
            "-q",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=3600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads((out / "manifest.json").read_text())


@pytest.mark.parametrize(("model", "target", "precision", "extra"), _params())
def test_trained_converts(
    model: str,
    target: str,
    precision: str,
    extra: dict[str, Any],
    checkpoint: Callable[[str], Path],
    sst2_train: Path,
    tmp_path: Path,
) -> None:
    ckpt = checkpoint(model)
    out = tmp_path / "artifact"
    if precision == "auto":
        manifest = _convert_auto(ckpt, out, target, sst2_train)
    else:
        kw = dict(extra)
        if kw.pop("calibration", None):
            kw.update(calibration=sst2_train)  # the default 128 sentences
        manifest = convert(ckpt, out, ConvertOptions(target=target, precision=precision, **kw))
    ver = manifest["verification"]
    assert ver is not None and ver["reference"] == "pytorch", "no comparison with PyTorch ran"
    assert ver["passed"] is True, ver
    assert manifest["factorized_embedding_intact"] is True
    if target == "tflite":
        assert all(manifest["postconditions"].values()), manifest["postconditions"]
    # every weight once: the file's parameters are the model's plus small constants
    stored = manifest["sizes"]["unique_params"]
    assert stored <= _model_params(ckpt) * 1.02 + 4096, (stored, _model_params(ckpt))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["groups2", "base"])
@pytest.mark.parametrize("target", ["onnx", "tflite"])
def test_verify_command_on_trained(
    model: str, target: str, checkpoint: Callable[[str], Path], sst2_dev: Path, tmp_path: Path
) -> None:
    """``albert-edge verify`` (a second process, its own grid and SST-2 dev accuracy) on
    the int8-dynamic artifact of a trained model agrees with PyTorch."""
    ckpt = checkpoint(model)
    out = tmp_path / "artifact"
    convert(ckpt, out, ConvertOptions(target=target, precision="int8-dynamic", verify=False))
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "verify",
            str(out),
            "--reference",
            str(ckpt),
            "--data",
            str(sst2_dev),
            "--max-examples",
            "64",
            "--json",
            "-q",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout)
    assert report["passed"] is True, report
