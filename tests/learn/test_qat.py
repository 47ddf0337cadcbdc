"""QAT: the fake quantizers are convert's recipes (checked against convert's own int4
packer), gradients pass straight through, and the converted artifact records it."""

from __future__ import annotations

import json

import pytest

from tests.learn.conftest import cli


@pytest.mark.parametrize("target", ["portable", "x86-vnni"])
def test_fake_int4_is_converts_int4(target):
    import numpy as np
    import torch

    from albert_edge.learn.qat import QatSpec, _absmax, fake_int4
    from albert_edge.onnx.quant.int4 import pack

    spec = QatSpec("int4", target, block_size=32)
    torch.manual_seed(0)
    w = torch.randn(48, 64) * torch.linspace(0.1, 2, 64)  # [out N, in K], uneven blocks
    per_col = spec.per_channel()
    _, _, w8, scale = pack(
        w.T.numpy().astype(np.float32), (48,) if per_col else (), 32, spec.limit()
    )
    want = (w8.astype(np.float64) * scale.astype(np.float64)).T
    got = fake_int4(w, _absmax([w], per_col), spec).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_fake_int8_portable_is_7bit_per_tensor_and_straight_through():
    import torch

    from albert_edge.learn.qat import QatSpec, _absmax, fake_int8

    spec = QatSpec("int8", "portable")
    w = torch.randn(16, 8, requires_grad=True)
    q = fake_int8(w, _absmax([w], False), spec)
    step = float(w.detach().abs().max()) / 64
    codes = q.detach() / step
    assert torch.allclose(codes, codes.round(), atol=1e-4) and float(codes.abs().max()) <= 64
    q.sum().backward()
    assert torch.equal(w.grad, torch.ones_like(w))


def test_shared_qkv_scale_and_once_per_forward(make_checkpoint):
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.learn.qat import QatSpec, fake_quantized

    model = load_checkpoint(make_checkpoint()).model
    fq = fake_quantized(model, QatSpec("int8"))
    attn = "albert.encoder.albert_layer_groups.0.albert_layers.0.attention"
    ws = [getattr(model.get_submodule(attn), p).weight for p in ("query", "key", "value")]
    step = float(torch.stack([w.detach().abs().max() for w in ws]).max()) / 64
    for p in ("query", "key", "value"):
        codes = fq[f"{attn}.{p}.weight"].detach() / step
        assert torch.allclose(codes, codes.round(), atol=1e-4)
    linears = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    assert sorted(fq) == sorted(f"{n}.weight" for n in linears)  # shared layer: one entry


def test_qat_int4_checkpoint_converts_with_record(make_checkpoint, rows200, tmp_path):
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = tmp_path / "qat"
    assert (
        cli(
            "--init",
            make_checkpoint(),
            "--train",
            rows200,
            "-o",
            out,
            "--epochs",
            "1",
            "--batch-size",
            "32",
            "--qat",
            "int4",
        )
        == 0
    )
    rec = json.loads((out / "training.json").read_text())
    assert rec["qat"]["convert_precision"] == "int4"
    manifest = convert(out, tmp_path / "art", ConvertOptions(precision="int4"))
    assert manifest["trained_for"]["precision"] == "int4"
    assert manifest["trained_for"]["matches_this_artifact"] is True
