"""int8-full's per-tensor weights, and the one weight stored per channel all the same:
LiteRT's form of the portable ONNX recipe's exception (a weight whose output channels
spread over ``PORTABLE_CHANNEL_SPREAD``), judged from the float weights alone
(:func:`albert_edge.tflite.quantize.channel_exceptions`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from albert_edge.onnx.quant.recipes import PORTABLE_CHANNEL_SPREAD
from albert_edge.options import ConvertOptions
from albert_edge.tflite import flatbuffer as fb
from albert_edge.tflite.quantize import (
    channel_exceptions,
    full_channel_weights,
    plan_units,
    stored_channel_spreads,
)
from tests.outlier_utils import FFN_OUT, OUTLIER_CHANNEL, with_outlier
from tests.tflite.tiny_tflite import Graph


def _two_weight_graph(factor: float) -> bytes:
    """x → FC(w_even) → FC(w_outlier): row 1 of the second weight scaled by ``factor``."""
    rng = np.random.default_rng(0)
    g = Graph()
    g.t("x", (2, 8))
    g.t("even", (8, 8), "f32", rng.uniform(-1, 1, (8, 8)))
    g.t("h", (2, 8))
    w = rng.uniform(-1, 1, (6, 8))
    w[1] *= factor
    g.t("outlier", (6, 8), "f32", w)
    g.t("y", (2, 6))
    g.op("FULLY_CONNECTED", ["x", "even", None], ["h"])
    g.op("FULLY_CONNECTED", ["h", "outlier", None], ["y"])
    return fb.write_model(g.build(["x"], ["y"]))


def test_channel_exceptions_name_the_weight_whose_rows_spread() -> None:
    data = _two_weight_graph(25.0)
    spreads = channel_exceptions(data)
    assert set(spreads) == {"outlier"}
    assert spreads["outlier"] == pytest.approx(25.0, rel=0.35)  # rows' max |w| are ~U(0.7, 1)
    assert channel_exceptions(_two_weight_graph(1.0)) == {}
    # the rule is the portable ONNX recipe's: judged on the weight's rows (LiteRT [out, in])
    assert channel_exceptions(_two_weight_graph(PORTABLE_CHANNEL_SPREAD / 2)) == {}


def test_full_channel_weights_only_under_int8_full_per_tensor() -> None:
    data = _two_weight_graph(25.0)
    assert set(full_channel_weights(data, "int8-full", per_channel=False)) == {"outlier"}
    assert full_channel_weights(data, "int8-full", per_channel=True) == {}
    assert full_channel_weights(data, "int8-dynamic", per_channel=False) == {}
    # a precision plan that keeps the weight in float leaves nothing to scale per channel
    assert {u.name for u in plan_units(data)} == {"even", "outlier"}
    kept = full_channel_weights(
        data, "int8-full", per_channel=False, unit_precisions={"outlier": "fp32"}
    )
    assert kept == {}


@pytest.fixture(scope="module")
def outlier_ckpt(make_checkpoint: Any, tmp_path_factory: Any) -> Path:
    return with_outlier(
        make_checkpoint("tiny-groups"), tmp_path_factory.mktemp("outlier") / "ckpt", 25.0
    )


def _convert(ckpt: Path, out: Path, sst2_train: Path, **kw: Any) -> tuple[dict, Any]:
    from albert_edge.convert import convert

    options = ConvertOptions(
        target="tflite",
        precision="int8-full",
        seq_lens=(16,),
        calibration=sst2_train,
        num_calibration=8,
        verify=False,
        **kw,
    )
    manifest = convert(ckpt, out, options)
    return manifest, fb.read_model((out / "model.tflite").read_bytes())


def _stored(model: Any, name: str) -> np.ndarray:
    """The int8 weight ``name`` as stored, times its scale(s) (symmetric: no zero point)."""
    t = next(t for sg in model.subgraphs for t in sg.tensors if t.name.decode() == name)
    codes = np.frombuffer(fb.buffer_bytes(model, t.buffer), dtype=np.int8).reshape(t.shape)
    scale = np.asarray(t.quantization.scale, dtype=np.float64)
    return codes.astype(np.float64) * (scale[:, None] if scale.size > 1 else scale)


def _sqnr(ref: np.ndarray, out: np.ndarray) -> float:
    noise = float(((ref - out) ** 2).sum())
    return math.inf if noise == 0 else 10 * math.log10(float((ref**2).sum()) / noise)


def test_int8_full_stores_only_the_outlier_weight_per_channel(
    outlier_ckpt: Path, sst2_train: Path, tmp_path: Path, capsys: Any
) -> None:
    manifest, model = _convert(outlier_ckpt, tmp_path / "auto", sst2_train)
    q = manifest["quantization"]
    assert q["per_channel"] is False
    chosen = q["per_channel_weights"]
    assert len(chosen) == 1, chosen
    ((name, spread),) = chosen.items()
    assert FFN_OUT in name and spread > PORTABLE_CHANNEL_SPREAD
    stored = stored_channel_spreads(model)
    assert set(stored) == {name}, stored  # every other weight keeps its one scale
    from albert_edge.report import print_convert_report

    print_convert_report(tmp_path / "auto", manifest)
    assert "1 of the per-tensor recipe's" in capsys.readouterr().out

    tensor_manifest, tensor_model = _convert(
        outlier_ckpt, tmp_path / "tensor", sst2_train, per_channel=False
    )
    assert "per_channel_weights" not in tensor_manifest["quantization"]
    assert stored_channel_spreads(tensor_model) == {}

    # what the exception buys: the other channels of that weight at 8 bits of their own
    from safetensors.numpy import load_file

    w = load_file(str(outlier_ckpt / "model.safetensors"))[FFN_OUT].astype(np.float64)
    rest = np.arange(w.shape[0]) != OUTLIER_CHANNEL
    auto_db = _sqnr(w[rest], _stored(model, name)[rest])
    tensor_db = _sqnr(w[rest], _stored(tensor_model, name)[rest])
    assert auto_db > tensor_db + 20.0, (auto_db, tensor_db)
