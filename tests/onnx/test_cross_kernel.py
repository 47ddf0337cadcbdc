"""The portable int8 recipe computes the same on every kernel family (issue 12), and so does
int4, which runs the same int8 kernels on weights folded from 4-bit codes at load. Slow:
needs ``albert-edge kernels setup x86-avx2`` (qemu-x86_64), and wasm for the wasm case.

What the design guarantees, and so what is asserted: the portable recipe's integer
arithmetic never saturates, so each kernel computes the exact int32 dot products and
only float rounding (vector widths, FMA) differs — the outputs agree with the host's to
far better than any quantization bar (>= 60 dB between kernels, against 25 dB of
quantization noise allowed in test_quantize). A setup that is missing fails with the
set-up command in the message; it is never skipped as a pass.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from kernel_setup import ready

from albert_edge.kernels import host_kernel
from albert_edge.options import ConvertOptions

pytestmark = pytest.mark.slow

AGREEMENT_DB = 60.0


def _sqnr(ref: np.ndarray, out: np.ndarray) -> float:
    r, d = ref.astype(np.float64), out.astype(np.float64) - ref
    noise = float((d * d).sum())
    return math.inf if noise == 0 else 10 * math.log10(float((r * r).sum()) / noise)


@pytest.fixture(scope="module", params=["int8-dynamic", "int4"])
def portable_artifact(request, make_checkpoint, tmp_path_factory):
    from albert_edge.convert import convert

    out = tmp_path_factory.mktemp("xk") / "art"
    convert(
        make_checkpoint("tiny", seed=1),
        out,
        ConvertOptions(precision=request.param, quantize_embeddings=True, verify=False),
    )
    return out, make_checkpoint("tiny", seed=1)


@pytest.mark.parametrize("kernel", ["x86-avx2", "wasm"])
def test_portable_int8_agrees_across_kernels(portable_artifact, kernel):
    from albert_edge.grid import make_grid_inputs
    from albert_edge.kernels.remote import RemoteRunner
    from albert_edge.onnx.runtime import OrtRunner

    if kernel == host_kernel():
        pytest.skip(f"{kernel} is this machine's own kernel: the other case covers it")
    from albert_edge.checkpoint import load_checkpoint

    ready(kernel)
    art, ckpt_path = portable_artifact
    ckpt = load_checkpoint(ckpt_path)
    from albert_edge.runtime import model_file

    host = OrtRunner(model_file(art), threads=1)
    remote = RemoteRunner(model_file(art), kernel)
    try:
        rng = np.random.default_rng(0)
        longest = int(ckpt.config.max_position_embeddings)
        for batch, seq in ((1, 64), (2, longest)):
            feeds = make_grid_inputs(ckpt.config, False, batch, seq, rng)
            a, b = host.run(feeds)["logits"], remote.run(feeds)["logits"]
            assert _sqnr(a, b) >= AGREEMENT_DB, (kernel, batch, seq, _sqnr(a, b))
    finally:
        remote.close()
