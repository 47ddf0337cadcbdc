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
    tables = [f"albert.embeddings.{t}.weight" for t in ("word_embeddings", "position_embeddings")]
    # shared layer: one entry; the token-type table (2 x E) is below the side-table minimum
    assert sorted(fq) == sorted([f"{n}.weight" for n in linears] + tables)


@pytest.mark.parametrize(
    ("qat", "precision"),
    [("int8", "int8-dynamic"), ("int4", "int4"), ("int8-static", "int8-static")],
)
def test_fake_tables_are_what_onnx_runtime_reads(make_checkpoint, dev60, tmp_path, qat, precision):
    """The word and position tables fake-quantized for ``--qat Q`` are, value for value,
    the tables ONNX Runtime reads from ``convert --precision P``'s artifact: the embedding
    sum (before its LayerNorm) over every token id at every position."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.learn.qat import QatSpec, fake_quantized
    from albert_edge.options import ConvertOptions

    ckpt = make_checkpoint()
    calib = {"calibration": dev60, "num_calibration": 8} if precision == "int8-static" else {}
    convert(ckpt, tmp_path / "art", ConvertOptions(precision=precision, verify=False, **calib))
    m = onnx.load(str(next((tmp_path / "art" / "onnx").glob("*.onnx"))))
    ln = next(n for n in m.graph.node if n.op_type == "LayerNormalization")
    m.graph.output.append(
        onnx.helper.make_tensor_value_info(ln.input[0], onnx.TensorProto.FLOAT, None)
    )
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    model = load_checkpoint(ckpt).model
    v, s = model.config.vocab_size, model.config.max_position_embeddings
    ids = (np.arange(-(-v // s) * s) % v).reshape(-1, s)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": 0 * ids}
    names = {i.name for i in sess.get_inputs()}
    got = sess.run([ln.input[0]], {k: a for k, a in feeds.items() if k in names})[0]
    fq = fake_quantized(model, QatSpec(qat))
    e = model.albert.embeddings
    tt = e.token_type_embeddings.weight[0]
    want = fq["albert.embeddings.word_embeddings.weight"][torch.from_numpy(ids)] + tt
    want = (want + fq["albert.embeddings.position_embeddings.weight"][:s]).detach().numpy()
    plain = e.word_embeddings.weight[torch.from_numpy(ids)] + tt + e.position_embeddings.weight
    assert float(np.abs(got - plain.detach().numpy()).max()) > 1e-4  # stored quantized
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-7)


def test_fake_tables_straight_through(make_checkpoint):
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.learn.qat import QatSpec, fake_tables

    model = load_checkpoint(make_checkpoint()).model
    for t in fake_tables(model, QatSpec("int4")).values():
        t.sum().backward()
    w = model.albert.embeddings.word_embeddings.weight
    assert torch.equal(w.grad, torch.ones_like(w))


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


@pytest.mark.parametrize(
    ("qat", "options", "differs"),
    [
        ("int4", {"precision": "int4"}, []),
        ("int4", {"precision": "int4", "quantize_embeddings": False}, ["quantize_embeddings"]),
        ("int4", {"precision": "int4", "int4_kernel": "nbits"}, ["int4_kernel"]),
        ("int4", {"precision": "int4", "block_size": 64}, ["block_size"]),
        ("int8", {"precision": "int8-dynamic", "runs_on": "arm64"}, ["runs_on"]),
        ("int8", {"precision": "int8-static"}, []),  # another precision: no match either
    ],
)
def test_trained_for_names_what_differs(tmp_path, qat, options, differs):
    from albert_edge.convert import read_trained_for
    from albert_edge.learn.qat import QatSpec
    from albert_edge.options import ConvertOptions

    rec = tmp_path / "training.json"
    rec.write_text(json.dumps({"qat": QatSpec(qat).record()}))
    opts = ConvertOptions(**options)
    got = read_trained_for(rec, opts.precision, opts)
    assert got is not None and got.get("differs", []) == differs
    same = QatSpec(qat).convert_precision == opts.precision
    assert got["matches_this_artifact"] is (same and not differs)


def test_fake_int8_takes_converts_per_channel_exception():
    """Under the portable (per-tensor) recipe a weight whose channels spread over 4x is
    simulated per output channel, as convert stores it; an even weight stays per tensor."""
    import torch

    from albert_edge.learn.qat import QatSpec, _absmax, fake_int8

    spec = QatSpec("int8", "portable")
    torch.manual_seed(0)
    even = torch.randn(16, 8)
    assert _absmax([even], False, spec).ndim == 0
    outlier = even.clone()
    outlier[5] *= 25  # torch [out, in]: output channel 5
    amax = _absmax([outlier], False, spec)
    assert amax.shape == (16,)
    q = fake_int8(outlier, amax, spec).detach()
    steps = amax / 64
    codes = q / steps[:, None]
    assert torch.allclose(codes, codes.round(), atol=1e-4) and float(codes.abs().max()) <= 64
    # int4 keeps its own scales; an asked granularity is not overridden
    assert _absmax([outlier], False, QatSpec("int4", "portable")).ndim == 0
    assert "spread over 4x" in QatSpec("int8", "portable").record()["weights"]
