"""Weights stored once when trained layer groups fold different LayerNorm γ (issue 43).

A trained ALBERT with several layer groups stores each later group's weights twice in the
exported graph, folded with two different γ: its first layer reads the previous group's
last LayerNorm, its other layers read its own. Random initialisation (every γ 1) hides it.
``unfold_scaled_copies`` makes the unscaled weight once and puts each graph γ in front of
its FCs; ``fuse_shared_input_fc`` never stacks a weight something else still reads.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from albert_edge.options import ConvertOptions
from albert_edge.tflite import flatbuffer as fb
from albert_edge.tflite import passes as tp
from albert_edge.tflite.passes import run_passes
from albert_edge.tflite.passes.base import op_name
from tests.tflite.tiny_tflite import Graph, run
from tests.tflite_pass_checks import with_trained_gamma


def _rng_gamma(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(0.5, 1.5, n).astype(np.float32)


def _two_norm_graph() -> tuple[Any, np.ndarray, set[bytes]]:
    """Two FCs reading normalized inputs whose γ the converter folded into their copies of
    one weight W: ``W * γa`` and ``W * γb`` (no stored copy is W itself). Each input also
    goes through its MUL by γ, as a LayerNorm's residual branch does."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 16)).astype(np.float32)
    ga, gb = _rng_gamma(rng, 16), _rng_gamma(rng, 16)
    g = Graph()
    for k, gamma in (("a", ga), ("b", gb)):
        g.t(f"x{k}", (2, 16))
        g.t(f"g{k}", (16,), "f32", gamma)
        g.t(f"r{k}", (2, 16))  # the residual branch: x * γ
        g.t(f"w{k}", (16, 16), "f32", w * gamma[None, :])
        g.t(f"y{k}", (2, 16))
        g.op("MUL", [f"x{k}", f"g{k}"], [f"r{k}"])
        g.op("FULLY_CONNECTED", [f"x{k}", f"w{k}", None], [f"y{k}"])
    return g.build(["xa", "xb"], ["ya", "yb", "ra", "rb"]), w, {ga.tobytes(), gb.tobytes()}


def test_unfold_makes_the_unscaled_weight_once() -> None:
    model, w, graph_gammas = _two_norm_graph()
    rng = np.random.default_rng(1)
    feeds = {k: rng.standard_normal((2, 16)).astype(np.float32) for k in ("xa", "xb")}
    ref = run(fb.write_model(model), **feeds)
    report = run_passes(model, [tp.UnfoldScaledCopiesPass()])[0]
    assert report["bytes_removed"] == w.nbytes  # two copies became one
    sg = model.subgraphs[0]
    fcs = [op for op in sg.operators if op_name(model, op) == "FULLY_CONNECTED"]
    weights = {int(sg.tensors[int(op.inputs[1])].buffer) for op in fcs}
    assert len(weights) == 1
    np.testing.assert_allclose(
        fb.tensor_array(model, sg.tensors[int(fcs[0].inputs[1])]), w, rtol=1e-6, atol=1e-7
    )
    # each FC's MUL reads the graph's own γ (bit for bit), so it is the residual MUL's value
    fc_gammas = set()
    for op in fcs:
        mul = next(m for m in sg.operators if int(m.outputs[0]) == int(op.inputs[0]))
        fc_gammas.add(fb.buffer_bytes(model, sg.tensors[int(mul.inputs[1])].buffer))
    assert fc_gammas == graph_gammas
    merged = run_passes(model, [tp.MergeDuplicateOpsPass()])[0]
    assert merged["ops_merged"] == 2  # the FCs read the residual branch's MULs
    got = run(fb.write_model(model), **feeds)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-5)


def _shared_weight_graph(second: tuple[str, ...]) -> Any:
    """Q, K, V FCs on x; FCs on y reading the weights named in ``second``."""
    rng = np.random.default_rng(2)
    g = Graph()
    g.t("x", (2, 8))
    g.t("y", (2, 8))
    for n in "qkv":
        g.t(n, (8, 8), "f32", rng.standard_normal((8, 8)))
        g.t(f"x{n}", (2, 8))
        g.op("FULLY_CONNECTED", ["x", n, None], [f"x{n}"])
    for n in second:
        g.t(f"y{n}", (2, 8))
        g.op("FULLY_CONNECTED", ["y", n, None], [f"y{n}"])
    return g.build(["x", "y"], [*(f"x{n}" for n in "qkv"), *(f"y{n}" for n in second)])


@pytest.mark.parametrize(
    ("second", "fused", "apart"),
    [
        (("q",), 0, 1),  # Q also read alone: stacking would store it twice
        (("k", "q", "v"), 0, 2),  # the same weights in another order: a second stack
        (("q", "k", "v"), 2, 0),  # the same stack: one constant for both
    ],
    ids=["read-alone", "other-order", "same-stack"],
)
def test_fuse_never_stores_a_weight_twice(second: tuple[str, ...], fused: int, apart: int) -> None:
    model = _shared_weight_graph(second)
    rng = np.random.default_rng(3)
    feeds = {k: rng.standard_normal((2, 8)).astype(np.float32) for k in ("x", "y")}
    ref = run(fb.write_model(model), **feeds)
    before = sum(len(fb.buffer_bytes(model, b)) for b in fb.constant_buffer_ids(model))
    report = run_passes(model, [tp.FuseSharedInputFcPass()])[0]
    assert (report["fc_groups_fused"], report["fc_groups_left_apart"]) == (fused, apart)
    after = sum(len(fb.buffer_bytes(model, b)) for b in fb.constant_buffer_ids(model))
    assert after <= before + 64  # a SPLIT's axis scalars, never an [8, 8] weight
    got = run(fb.write_model(model), **feeds)
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k])


@pytest.fixture(scope="module")
def groups_int8(make_checkpoint: Callable[..., Path]) -> tuple[Any, list[dict[str, Any]], Any]:
    """The tiny 2-group, 2-inner-layer model with trained-like γ (each LayerNorm its own)
    through the int8-dynamic pipeline: the passes' reports and the analyzed file."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.tflite.inspect import analyze_model
    from albert_edge.tflite.pipeline import tflite_passes
    from converters.tflite_export import export_litert_torch

    ckpt = load_checkpoint(make_checkpoint("tiny-groups"))
    with_trained_gamma(ckpt.model)
    seq = (16,)
    opts = ConvertOptions(target="tflite", precision="int8-dynamic", seq_lens=seq)
    model = fb.read_model(export_litert_torch(ckpt.model, ckpt.head, seq))
    log = run_passes(model, tflite_passes(ckpt, opts, seq))
    data = fb.write_model(model)
    return ckpt, log, analyze_model(fb.read_model(data), len(data))


def test_trained_groups_int8_dynamic_stores_weights_once(
    groups_int8: tuple[Any, list[dict[str, Any]], Any],
) -> None:
    from albert_edge.tflite.pipeline import check_postconditions, model_unique_params

    ckpt, log, report = groups_int8
    checks = check_postconditions(report, ckpt)  # raises on weights_stored_once (issue 43)
    assert all(checks.values())
    assert report["unique_params"] <= model_unique_params(ckpt)
    stages = {r["name"]: r for r in log}
    # every layer application's Q, K and V read one tensor and are one FC
    cfg = ckpt.config
    applications = cfg.num_hidden_layers * cfg.inner_group_num
    assert stages["fuse_shared_input_fc"]["fc_groups_fused"] == applications
    assert stages["fuse_shared_input_fc"]["fc_groups_left_apart"] == 0
