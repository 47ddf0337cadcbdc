"""``--qat int8-static``: the activations simulated are the ones convert's quantize_static
quantizes, with the ranges it computes, and a run converts with its record."""

from __future__ import annotations

import json

import pytest

from tests.learn.conftest import cli


def _quantize_linears(art):
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(next((art / "onnx").glob("*.onnx"))))
    init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    prod = {o: n for n in m.graph.node for o in n.output}
    return [
        (prod[n.input[0]].op_type, float(init[n.input[1]]), int(init[n.input[2]]))
        for n in m.graph.node
        if n.op_type == "QuantizeLinear" and n.input[0] not in init
    ]


@pytest.mark.parametrize("config", ["tiny", "tiny-groups"])
def test_calibrated_ranges_are_converts(make_checkpoint, dev60, tmp_path, config):
    """Calibrated on convert's calibration sentences, the simulated quantizers are
    convert's QuantizeLinear nodes one for one (same producer op, in graph order) with
    its scales and zero points."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.data import load_calibration_texts
    from albert_edge.learn.qat import QatSpec
    from albert_edge.learn.trainee import Trainee
    from albert_edge.options import ConvertOptions
    from albert_edge.tokenizer import AlbertTokenizer

    ckpt = make_checkpoint(config)
    art = tmp_path / "art"
    opts = ConvertOptions(precision="int8-static", calibration=dev60, num_calibration=12)
    convert(ckpt, art, ConvertOptions(**{**opts.__dict__, "verify": False}))
    ck = load_checkpoint(ckpt)
    trainee = Trainee(ck.model, None, QatSpec("int8-static"))
    tok = AlbertTokenizer(ck.spiece_model, do_lower_case=ck.do_lower_case)
    texts = load_calibration_texts(dev60, 12)
    examples = [(tok.encode(t, max_length=128, padding="none").input_ids[0], 0) for t in texts]
    trainee.acts.calibrate(trainee, examples, "cpu")
    ours = trainee.acts.ranges()
    theirs = _quantize_linears(art)
    assert [r["ort_producer"] for r in ours] == [op for op, _, _ in theirs]
    for r, (_, scale, zp) in zip(ours, theirs, strict=True):
        assert r["scale"] == pytest.approx(scale, rel=1e-4), r["tensor"]
        assert abs(r["zero_point"] - zp) <= 1, r["tensor"]


def test_activation_fake_quant_straight_through_and_ema():
    import torch

    from albert_edge.learn.qat_static import EMA, FROZEN, ActQuant

    q = ActQuant(0.5, "MatMul")
    x = torch.linspace(-1, 3, 101, requires_grad=True)
    y = q(x, EMA, True)
    step = 4 / 255
    assert float((y.detach() - x.detach()).abs().max()) <= step / 2 + 1e-6
    y.sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))  # inside the observed range
    q(torch.tensor([-3.0, 1.0]), EMA, True)  # EMA: min and max move half way
    assert (float(q.ema.min_val), float(q.ema.max_val)) == pytest.approx((-2.0, 2.0))
    z = torch.tensor([10.0], requires_grad=True)
    q(z, FROZEN, False).sum().backward()  # frozen (nothing calibrated: passes through)
    x2 = torch.tensor([10.0], requires_grad=True)
    out = q(x2, EMA, False)
    out.sum().backward()
    assert float(out.detach()) == pytest.approx(2.0, abs=0.02)  # clipped to the range,
    assert float(x2.grad) == 0.0  # and no gradient outside it


def test_qat_int8_static_run_freezes_and_converts_with_record(make_checkpoint, rows200, tmp_path):
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = tmp_path / "qs"
    args = ["--init", make_checkpoint(), "--train", rows200, "-o", out, "--epochs", "2"]
    assert cli(*args, "--batch-size", "32", "--qat", "int8-static") == 0
    rec = json.loads((out / "training.json").read_text())["qat"]
    assert rec["convert_precision"] == "int8-static"
    assert "activations" in rec["simulated"] and "word table" in rec["simulated"]
    ranges = rec["activation_ranges"]
    assert len(ranges) == 3 + 3 * 8 - 1 + 4 and all(r["scale"] > 0 for r in ranges)
    kw = {"precision": "int8-static", "calibration": rows200, "verify": False}
    manifest = convert(out, tmp_path / "art", ConvertOptions(**kw))
    assert manifest["trained_for"]["matches_this_artifact"] is True
    other = convert(out, tmp_path / "vnni", ConvertOptions(**kw, runs_on="x86-vnni"))
    assert other["trained_for"]["matches_this_artifact"] is False
    assert other["trained_for"]["differs"] == ["runs_on"]


def test_freeze_point_calibrates_once(make_checkpoint, rows200):
    """The run's ranges are MinMax-calibrated and frozen at the freeze step (phase kept in
    the state a resumed run loads), EMA before."""
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.learn.qat import QatSpec
    from albert_edge.learn.qat_static import CALIBRATING, EMA, FROZEN
    from albert_edge.learn.trainee import Trainee

    t = Trainee(load_checkpoint(make_checkpoint()).model, None, QatSpec("int8-static"))
    assert int(t.acts.phase) == EMA
    ids = torch.tensor([[2, 50, 60, 3], [2, 70, 3, 0]])
    mask = (ids != 0).long()
    t.train()
    t(ids, mask)
    assert "acts.phase" in t.state_dict()
    t.acts.calibrate(t, [([2, 50, 60, 3], 1)], "cpu")
    assert int(t.acts.phase) == FROZEN != CALIBRATING
    before = {k: v.clone() for k, v in t.state_dict().items() if "calib" in k}
    t(ids, mask)  # frozen: training batches no longer move the ranges
    after = {k: v for k, v in t.state_dict().items() if "calib" in k}
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.slow
def test_int8_static_resumed_equals_uninterrupted(make_checkpoint, rows200, tmp_path):
    """Stopped before the ranges freeze and resumed, a run ends with the weights and
    the frozen ranges of an uninterrupted one."""
    import subprocess
    import sys

    from tests.learn.conftest import interrupt_at_epoch_2, train_env, trained_weights

    args = ["--init", str(make_checkpoint()), "--train", str(rows200), "--epochs", "3"]
    args += ["--batch-size", "16", "--lr", "1e-3", "--qat", "int8-static"]
    full, cut = tmp_path / "full", tmp_path / "cut"
    assert cli(*args, "-o", full) == 0
    cmd = [sys.executable, "-m", "albert_edge.train", *args]
    interrupt_at_epoch_2(cmd, cut)
    subprocess.run([*cmd, "-q", "--resume", "-o", str(cut)], env=train_env(), check=True)
    a, b = trained_weights(full), trained_weights(cut)
    assert a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)
    ra = json.loads((full / "training.json").read_text())["qat"]["activation_ranges"]
    rb = json.loads((cut / "training.json").read_text())["qat"]["activation_ranges"]
    assert ra == rb  # the phase too (ema or frozen: that of the epoch held-out chose)
