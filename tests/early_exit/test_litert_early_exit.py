"""Dynamic exit on LiteRT: one .tflite, signatures stepping the shared layer, weights once."""

from __future__ import annotations

import json

import numpy as np
import pytest

from albert_edge.checkpoint import load_checkpoint
from albert_edge.data import read_sst2
from albert_edge.early_exit import Confidence, Off, Patience, fit_exit_heads, simulate

pytest.importorskip("litert_torch")

pytestmark = pytest.mark.slow  # two litert-torch conversions: ~30-70 s on 2 cores


def test_litert_steps_the_shared_layer_and_matches_full_depth(
    make_checkpoint, sst2_train, sst2_dev, tmp_path
):
    from albert_edge.convert import convert
    from albert_edge.early_exit.litert import LiteRTEarlyExitRunner, build_litert_early_exit
    from albert_edge.options import ConvertOptions
    from albert_edge.tflite.runtime import LiteRTRunner

    ckpt = load_checkpoint(make_checkpoint("tiny-groups"))
    rows = read_sst2(sst2_train)[:48]
    heads = fit_exit_heads(ckpt, [t for _, t in rows], [y for y, _ in rows])
    path = tmp_path / "early_exit.tflite"
    facts = build_litert_early_exit(ckpt, heads, path, seq_lens=(16, 64))
    assert facts["duplicate_tensor_bytes"] == 0
    full_dir = tmp_path / "full"
    manifest = convert(ckpt, full_dir, ConvertOptions(target="tflite", seq_lens=(16, 64)))
    full_facts = manifest["sizes"]
    # the layer is stored once however often it is stepped; the exits add their heads and
    # the step graphs a few scalar/shape constants of their own (measured: 108 bytes here)
    extra = facts["unique_tensor_bytes"] - full_facts["unique_tensor_bytes"]
    assert 0 <= extra <= heads.weight.nbytes + heads.bias.nbytes + 256, (facts, full_facts)
    assert json.loads(path.with_suffix(".json").read_text())["layers"] == [
        "layer_0",
        "layer_0",
        "layer_1",
        "layer_1",
    ]

    texts = [t for _, t in read_sst2(sst2_dev)[:12]]
    feeds = ckpt.tokenizer().encode(texts, max_length=64).as_numpy()
    runner = LiteRTEarlyExitRunner(path)
    want = LiteRTRunner(full_dir / manifest["model_file"]).run(feeds)["logits"]
    got = runner.run(feeds, Off())
    np.testing.assert_allclose(got.logits, want, atol=1e-5)
    assert got.depth.tolist() == [4] * len(texts)

    # policies: the loop takes the offline rule's decisions on this runner's own exits
    per_exit = runner.all_exits(feeds)
    np.testing.assert_array_equal(per_exit[:, -1], runner.run(feeds).logits)
    for policy in (Patience(1), Patience(2), Confidence(0.5 + 1e-6)):
        want_depth, want_logits = simulate(per_exit, policy)
        got = runner.run(feeds, policy)
        assert got.depth.tolist() == want_depth.tolist(), policy
        np.testing.assert_array_equal(got.logits, want_logits)


def _sqnr(got: np.ndarray, want: np.ndarray) -> float:
    err = got.astype(np.float64) - want.astype(np.float64)
    return float(10 * np.log10((want.astype(np.float64) ** 2).sum() / (err**2).sum()))


def test_litert_int8_dynamic_exit_quantizes_once_and_tracks_fp32(
    make_checkpoint, sst2_train, sst2_dev, tmp_path
):
    from albert_edge.compare import tolerance_for
    from albert_edge.convert import convert
    from albert_edge.early_exit.litert import LiteRTEarlyExitRunner, build_litert_early_exit
    from albert_edge.options import ConvertOptions
    from albert_edge.tflite.runtime import LiteRTRunner

    ckpt = load_checkpoint(make_checkpoint("tiny-groups"))
    rows = read_sst2(sst2_train)[:48]
    heads = fit_exit_heads(ckpt, [t for _, t in rows], [y for y, _ in rows])
    f32, i8 = tmp_path / "ee32.tflite", tmp_path / "ee8.tflite"
    build_litert_early_exit(ckpt, heads, f32, seq_lens=(64,))
    facts = build_litert_early_exit(ckpt, heads, i8, seq_lens=(64,), precision="int8-dynamic")
    assert facts["duplicate_tensor_bytes"] == 0 and facts["index"]["precision"] == "int8-dynamic"
    opts = ConvertOptions(target="tflite", precision="int8-dynamic", seq_lens=(64,))
    manifest = convert(ckpt, tmp_path / "full8", opts)
    # int8 weights stored once (no duplicated tensor), and within 1 % of the full-depth
    # int8 model's unique bytes (measured: +2,368 bytes, 0.45 %: the heads and the scales
    # of the step signatures' own quantized constants)
    full = manifest["sizes"]["unique_tensor_bytes"]
    assert 0 <= facts["unique_tensor_bytes"] - full <= 0.01 * full, (facts, manifest["sizes"])

    texts = [t for _, t in read_sst2(sst2_dev)[:12]]
    feeds = ckpt.tokenizer().encode(texts, max_length=64).as_numpy()
    floor = tolerance_for("int8-dynamic")["min_sqnr_db"]
    r8, r32 = LiteRTEarlyExitRunner(i8), LiteRTEarlyExitRunner(f32)
    per8, per32 = r8.all_exits(feeds), r32.all_exits(feeds)
    for k in range(per8.shape[1]):  # every exit tracks the float one
        assert _sqnr(per8[:, k], per32[:, k]) >= floor, k
    want = LiteRTRunner(tmp_path / "full8" / manifest["model_file"]).run(feeds)["logits"]
    assert _sqnr(r8.run(feeds, Off()).logits, want) >= floor  # vs the int8 full-depth model
    for policy in (Patience(1), Confidence(0.5 + 1e-6)):
        want_depth, want_logits = simulate(per8, policy)
        got = r8.run(feeds, policy)
        assert got.depth.tolist() == want_depth.tolist(), policy
        np.testing.assert_array_equal(got.logits, want_logits)
