"""The portable int8 recipe's per-channel exceptions (``recipes.PORTABLE_CHANNEL_SPREAD``).

A weight whose output channels differ by more than 4x (a pretrained encoder's outlier
dimension, carried into a student by ``train --teacher-layers``) gets one scale per
channel; every other weight keeps one per tensor, so a model with even channels (every
model trained from scratch here, and random init) quantizes exactly as before. Checked
on checkpoints with one channel of one shared FFN output weight scaled up, for each
config family and both int8 quantizers, against ONNX Runtime's own per-channel codes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from albert_edge.checkpoint import load_checkpoint
from albert_edge.onnx.quant import quantize_model
from albert_edge.onnx.quant.channels import per_column
from albert_edge.onnx.quant.recipes import PORTABLE_CHANNEL_SPREAD, channel_spread, int8_recipe
from albert_edge.options import ConvertOptions
from tests.outlier_utils import FFN_OUT, OUTLIER_CHANNEL, with_outlier

SENTENCES = (
    "it 's a charming and often affecting journey .",
    "unflinchingly bleak and desperate",
    "a sometimes tedious film .",
)


def test_channel_spread_reads_the_largest_over_the_median_column() -> None:
    rng = np.random.default_rng(0)
    w = rng.uniform(-1, 1, (64, 9))
    w[np.arange(9) % 64, np.arange(9)] = 1.0  # every column's max |w| exactly 1
    assert channel_spread(w) == pytest.approx(1.0)
    w[0, 4] = 25.0
    assert channel_spread(w) == pytest.approx(25.0)
    assert channel_spread(np.zeros((4, 3))) == 1.0
    z = np.zeros((4, 3))
    z[0, 0] = 1.0  # the median column is all zeros
    assert channel_spread(z) == math.inf


def test_per_column_codes_are_onnxruntimes_per_channel_codes(tmp_path: Path) -> None:
    """The exception is stored as ``quantize_dynamic(per_channel=True)`` stores a weight."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(1)
    w = (rng.standard_normal((16, 6)) * np.array([1, 1, 30, 1, 0.1, 1])).astype(np.float32)
    g = h.make_graph(
        [h.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        "g",
        [h.make_tensor_value_info("x", T.FLOAT, [2, 16])],
        [h.make_tensor_value_info("y", T.FLOAT, [2, 6])],
        [nh.from_array(w, "W")],
    )
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    for reduce_range in (True, False):
        out = tmp_path / f"q{reduce_range}.onnx"
        quantize_dynamic(
            model, out, per_channel=True, reduce_range=reduce_range, weight_type=QuantType.QInt8
        )
        inits = {t.name: nh.to_array(t) for t in onnx.load(str(out)).graph.initializer}
        codes, scale, zp = per_column(w, True, reduce_range)
        np.testing.assert_array_equal(codes, inits["W_quantized"])
        np.testing.assert_array_equal(scale, inits["W_scale"])
        np.testing.assert_array_equal(zp, inits["W_zero_point"])


@pytest.fixture(scope="module")
def outlier_checkpoints(make_checkpoint, tmp_path_factory):
    cache: dict[str, Path] = {}

    def factory(config: str) -> Path:
        if config not in cache:
            cache[config] = with_outlier(
                make_checkpoint(config),
                tmp_path_factory.mktemp(f"outlier-{config}") / "ckpt",
                25.0,
            )
        return cache[config]

    return factory


def _fp32(ckpt_dir: Path, out: Path) -> onnx.ModelProto:
    from albert_edge.convert import convert

    convert(ckpt_dir, out, ConvertOptions(precision="fp32", verify=False))
    return onnx.load(str(out / "onnx" / "model.onnx"))


def _logits(model: onnx.ModelProto, ckpt: Any) -> np.ndarray:
    feeds = ckpt.tokenizer().encode(list(SENTENCES), max_length=32).as_numpy()
    names = {i.name for i in model.graph.input}
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    out = sess.run(None, {k: v for k, v in feeds.items() if k in names})
    return np.asarray(out[0], dtype=np.float64)


def _sqnr(ref: np.ndarray, out: np.ndarray) -> float:
    noise = float(((ref - out) ** 2).sum())
    return math.inf if noise == 0 else 10 * math.log10(float((ref**2).sum()) / noise)


def _scale_sizes(q: onnx.ModelProto) -> dict[str, int]:
    """Entries of each ``*_scale`` initializer (both quantizers name a weight's scale
    ``<w>_scale``; the QDQ graph's activation scales are scalars), the embedding tables
    (``albert.embeddings.*``, stored per row or column by their own recipe) left out."""
    return {
        t.name: math.prod(t.dims)
        for t in q.graph.initializer
        if t.name.endswith("_scale") and not t.name.startswith("albert.embeddings.")
    }


def _options(precision: str, sst2_train: Path, **kw: Any) -> ConvertOptions:
    if precision == "int8-static":
        kw.update(calibration=sst2_train, num_calibration=8)
    return ConvertOptions(precision=precision, **kw)


@pytest.mark.parametrize("precision", ["int8-dynamic", "int8-static"])
@pytest.mark.parametrize("config", ["tiny", "tiny-groups", "tiny-unfactorized"])
def test_portable_int8_scales_only_the_outlier_weight_per_channel(
    outlier_checkpoints, make_checkpoint, sst2_train, tmp_path, config, precision
) -> None:
    ckpt_dir = outlier_checkpoints(config)
    ckpt = load_checkpoint(ckpt_dir)
    fp32 = _fp32(ckpt_dir, tmp_path / "fp32")
    ref = _logits(fp32, ckpt)

    q, report = quantize_model(fp32, ckpt, _options(precision, sst2_train))
    chosen = report["per_channel_weights"]
    assert report["per_channel"] is False and report["target"] == "portable"
    assert len(chosen) == 1, chosen
    ((name, spread),) = chosen.items()
    assert FFN_OUT in name and spread > PORTABLE_CHANNEL_SPREAD
    sizes = _scale_sizes(q)
    per_col = {w: n for w, n in sizes.items() if n > 1}
    assert len(per_col) == 1 and name in next(iter(per_col)), sizes
    assert per_col[next(iter(per_col))] == ckpt.config.hidden_size  # one per output channel
    assert report["postcondition_weights_ratio"] <= 1.05
    # the saturation bound of the portable recipe still holds for the per-channel codes
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in q.graph.initializer}
    codes = [
        v
        for k, v in inits.items()
        if v.dtype == np.int8 and v.ndim == 2 and not k.startswith("albert.embeddings.")
    ]
    assert max(int(np.abs(c.astype(np.int16)).max()) for c in codes) <= 64

    # what the exception buys: per tensor (asked) spends 7 bits on the one big channel,
    # and rounds every other channel of that weight to a few levels
    tensor_q, tensor_report = quantize_model(
        fp32, ckpt, _options(precision, sst2_train, per_channel=False)
    )
    assert "per_channel_weights" not in tensor_report
    assert all(n == 1 for n in _scale_sizes(tensor_q).values())
    w = onnx.numpy_helper.to_array(next(i for i in fp32.graph.initializer if i.name == name))
    rest = np.arange(w.shape[1]) != OUTLIER_CHANNEL
    auto_db = _sqnr(w[:, rest], _dequantized(q, name)[:, rest])
    tensor_db = _sqnr(w[:, rest], _dequantized(tensor_q, name)[:, rest])
    assert auto_db > tensor_db + 20.0, (auto_db, tensor_db)  # 25x: about 28 dB
    # the graph runs in ONNX Runtime and stays near fp32 (a sanity floor: on random init
    # the logits do not tell the two apart; the SST-2 student that needed the exception
    # does: benchmarks/results/teacher.md)
    assert _sqnr(ref, _logits(q, ckpt)) > 20.0


def _dequantized(q: onnx.ModelProto, weight: str) -> np.ndarray:
    """The stored int8 codes of ``weight`` times their scale (symmetric: no zero point)."""
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in q.graph.initializer}
    codes, scale = inits[f"{weight}_quantized"], inits[f"{weight}_scale"]
    return codes.astype(np.float64) * scale.astype(np.float64)


@pytest.mark.parametrize("precision", ["int8-dynamic", "int8-static"])
def test_even_channels_quantize_as_before(make_checkpoint, sst2_train, tmp_path, precision) -> None:
    """Random init spreads its channels well under the threshold: no exception, and the
    graph is the one ``--per-tensor`` writes, byte for byte."""
    ckpt_dir = make_checkpoint("tiny-groups")
    ckpt = load_checkpoint(ckpt_dir)
    fp32 = _fp32(ckpt_dir, tmp_path / "fp32")
    q, report = quantize_model(fp32, ckpt, _options(precision, sst2_train))
    t, _ = quantize_model(fp32, ckpt, _options(precision, sst2_train, per_channel=False))
    assert "per_channel_weights" not in report
    assert q.SerializeToString() == t.SerializeToString()


def test_an_asked_granularity_and_per_channel_targets_take_no_exception(
    outlier_checkpoints, tmp_path
) -> None:
    ckpt_dir = outlier_checkpoints("tiny")
    ckpt = load_checkpoint(ckpt_dir)
    fp32 = _fp32(ckpt_dir, tmp_path / "fp32")
    for kw in ({"per_channel": True}, {"runs_on": "x86-vnni"}, {"runs_on": "arm64"}):
        _, report = quantize_model(fp32, ckpt, ConvertOptions(precision="int8-dynamic", **kw))
        assert report["per_channel"] is True and "per_channel_weights" not in report, kw
    assert int8_recipe("x86-vnni").channel_spread is None


# --- the passes on a hand-built graph ---------------------------------------------------


def _even_and_outlier() -> Any:
    """x → MatMul(W_even) → MatMul(W_out): W_out's column 2 is 30x its other columns."""
    import onnx_ir as ir
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    even = (rng.standard_normal((16, 16)) * 0.1).astype(np.float32)
    out = (rng.standard_normal((16, 8)) * 0.1).astype(np.float32)
    out[:, 2] *= 30
    g = h.make_graph(
        [
            h.make_node("MatMul", ["x", "W_even"], ["h"], name="m1"),
            h.make_node("MatMul", ["h", "W_out"], ["y"], name="m2"),
        ],
        "g",
        [h.make_tensor_value_info("x", T.FLOAT, ["b", 16])],
        [h.make_tensor_value_info("y", T.FLOAT, ["b", 8])],
        [nh.from_array(even, "W_even"), nh.from_array(out, "W_out")],
    )
    proto = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    proto.ir_version = 8
    return ir.from_proto(proto)


def test_plan_and_channel_scales_passes_store_the_outlier_per_channel() -> None:
    from albert_edge.onnx.quant.channels import ChannelScalesPass
    from albert_edge.onnx.quant.ort import OrtDynamicQuantPass
    from albert_edge.onnx.quant.plan import PlanPass
    from albert_edge.onnx.quant.state import QuantState
    from tests.onnx.graphs import clone, run_ort

    model = _even_and_outlier()
    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    before = run_ort(clone(model), {"x": x})[0]
    st = QuantState(ConvertOptions(precision="int8-dynamic", verify=False))
    PlanPass(st)(model)
    assert st.plan is not None and list(st.plan.channel_weights) == ["W_out"]
    assert st.plan.channel_weights["W_out"] > PORTABLE_CHANNEL_SPREAD
    tensor_only = clone(model)
    model = OrtDynamicQuantPass(st)(model).model
    tensor_only = OrtDynamicQuantPass(st)(tensor_only).model  # without the exception
    p = ChannelScalesPass(st)
    p(model)
    assert p.report == {"weights": 1}
    inits = model.graph.initializers
    assert inits["W_out_scale"].const_value.shape.numpy() == (8,)
    assert inits["W_out_zero_point"].const_value.shape.numpy() == (8,)
    assert inits["W_even_scale"].const_value.shape.numpy() == ()  # per tensor, untouched
    after, coarse = run_ort(model, {"x": x})[0], run_ort(tensor_only, {"x": x})[0]
    rest = np.arange(8) != 2
    assert _sqnr(before[:, rest], after[:, rest]) > _sqnr(before[:, rest], coarse[:, rest]) + 10


def test_channel_scales_postcondition_fails_on_a_per_tensor_scale() -> None:
    from albert_edge.errors import PassError
    from albert_edge.onnx.quant.channels import ChannelScalesPass
    from albert_edge.onnx.quant.ort import OrtDynamicQuantPass
    from albert_edge.onnx.quant.plan import PlanPass
    from albert_edge.onnx.quant.state import QuantState

    class Noop(ChannelScalesPass):
        def call(self, model: Any) -> Any:
            import onnx_ir as ir

            return ir.passes.PassResult(model, modified=False)

    model = _even_and_outlier()
    st = QuantState(ConvertOptions(precision="int8-dynamic", verify=False))
    PlanPass(st)(model)
    model = OrtDynamicQuantPass(st)(model).model
    with pytest.raises(PassError, match=r"W_out: \(\) scales"):
        Noop(st)(model)
