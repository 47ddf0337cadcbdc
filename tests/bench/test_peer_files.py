"""``bench`` times a peer tool's file as the peer wrote it: litert-torch's static graph
(inputs ``args_0``, ``args_1``) and a folder in optimum's layout (``config.json`` + one
``.onnx``), with one clear line when a file's inputs cannot be mapped."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from albert_edge.errors import BenchmarkError, UnsupportedError


def _litert_static(module: Any, args: tuple[Any, ...], out: Path) -> Path:
    """``litert_torch.convert(module, args)``: the static graph a user gets without
    ``sample_kwargs`` (one ``serving_default`` signature, inputs ``args_<i>``)."""
    import litert_torch

    out.parent.mkdir(parents=True, exist_ok=True)
    litert_torch.convert(module.eval(), args).export(str(out))
    return out


@pytest.fixture(scope="module")
def static_tflite(make_checkpoint: Callable[..., Path], tmp_path_factory: Any) -> tuple[Path, Any]:
    import torch

    from albert_edge.checkpoint import load_checkpoint

    ckpt_dir = make_checkpoint("tiny")
    model = load_checkpoint(ckpt_dir).model

    class TwoInputs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self.model(input_ids=input_ids, attention_mask=attention_mask).logits

    ids = torch.full((1, 16), 7, dtype=torch.long)
    folder = tmp_path_factory.mktemp("litert-static")
    path = _litert_static(TwoInputs(), (ids, torch.ones_like(ids)), folder / "model.tflite")
    shutil.copyfile(ckpt_dir / "spiece.model", folder / "spiece.model")
    return path, model


def test_runner_maps_positional_inputs(static_tflite: tuple[Path, Any]) -> None:
    import torch

    from albert_edge.tflite.runtime import LiteRTRunner

    path, model = static_tflite
    runner = LiteRTRunner(path)
    assert runner.input_names == ("input_ids", "attention_mask")
    ids = np.array([[2, 40, 41, 42, 3], [2, 50, 51, 3, 0]], dtype=np.int64)
    mask = (ids != 0).astype(np.int64)
    got = runner.run({"input_ids": ids, "attention_mask": mask})
    with torch.no_grad():
        ref = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).logits
    (out,) = got.values()
    assert np.abs(out - ref.numpy()).max() < 1e-4


def test_bench_times_the_static_graph(static_tflite: tuple[Path, Any]) -> None:
    from albert_edge.bench import bench

    path, _ = static_tflite
    rep = bench(
        [path], backends=["litert-xnnpack"], seq_lens=(8,), runs=2, warmup=1, progress=False
    )
    (row,) = rep["results"]
    assert row["status"] == "ok", row.get("reason")


def test_float_inputs_are_refused_in_one_line(tmp_path: Path) -> None:
    import torch

    from albert_edge.tflite.runtime import LiteRTRunner

    path = _litert_static(torch.nn.Linear(4, 2), (torch.zeros(1, 4),), tmp_path / "m.tflite")
    with pytest.raises(UnsupportedError) as err:
        LiteRTRunner(path)
    msg = str(err.value)
    assert "\n" not in msg and "not integer token tensors" in msg and str(path) in msg


def test_optimum_folder_is_a_target(tiny_onnx: Path, tmp_path: Path) -> None:
    """optimum's layout: config.json, the tokenizer and one .onnx, no manifest."""
    from albert_edge.bench import bench, resolve_target

    folder = tiny_onnx.parent
    target = resolve_target(folder)
    assert target.format == "onnx" and target.model_file == tiny_onnx
    rep = bench([folder], backends=["ort-cpu"], seq_lens=(8,), runs=2, warmup=1, progress=False)
    (row,) = rep["results"]
    assert row["status"] == "ok", row.get("reason")

    two = tmp_path / "two"
    shutil.copytree(folder, two)
    shutil.copyfile(two / "model.onnx", two / "model_quantized.onnx")
    with pytest.raises(
        BenchmarkError, match=r"2 model files \(model\.onnx, model_quantized\.onnx\)"
    ):
        resolve_target(two)
