"""The XNNPACK GEMM the roofline times computes A @ W, through the scheme it claims to.

A rate is only worth something if the call did the GEMM: each kind's output is checked
against A @ W in numpy. For int8 the check also tells dynamic quantization (activations
quantized per call, as in the int8-dynamic artifacts) from a kernel that dequantizes
the weights and multiplies in float: only the former differs from A @ dequant(W).
Nothing asserts a time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def test_xnnpack_gemm_matches_numpy(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    pytest.importorskip("ai_edge_litert")
    from albert_edge.bench.xnnpack_gemm import xnnpack_session

    m, k, n = 8, 64, 32
    rng = np.random.default_rng(0)

    fp32 = xnnpack_session("fp32", m, k, n, threads=1, work=tmp_path, rng=rng)
    fp32()
    np.testing.assert_allclose(fp32.output(), fp32.a @ fp32.w, rtol=1e-4, atol=1e-4)

    int8 = xnnpack_session("int8", m, k, n, threads=1, work=tmp_path, rng=rng)
    assert np.array_equal(int8.w, fp32.w)  # one W per shape, shared by both kinds
    int8()
    ref = int8.a @ int8.w
    scale = float(np.abs(ref).max())
    assert float(np.abs(int8.output() - ref).max()) < 0.05 * scale

    interp = int8.interpreter
    fc = next(op for op in interp._get_ops_details() if op["op_name"] == "FULLY_CONNECTED")
    wt = next(t for t in interp.get_tensor_details() if t["index"] == fc["inputs"][1])
    assert wt["dtype"] == np.int8
    w_dequant = (
        interp.get_tensor(wt["index"]) * wt["quantization_parameters"]["scales"][:, None]
    ).T
    # Float math on dequantized weights would match to round-off (~1e-7); quantized
    # activations leave an error of the order of 1/255 of the activations' range.
    assert float(np.abs(int8.output() - int8.a @ w_dequant).max()) > 1e-4 * scale

    # Cached: a second session reuses the file instead of converting again.
    mtime = int8.path.stat().st_mtime_ns
    again = xnnpack_session("int8", m, k, n, threads=1, work=tmp_path, rng=rng)
    assert again.path == int8.path and again.path.stat().st_mtime_ns == mtime


def test_roofline_takes_xnnpack_when_litert_is_benchmarked() -> None:
    """With ``xnnpack`` in the job, both XNNPACK kernels compete per shape, and the bound
    uses the best rate of each shape whichever library it came from."""
    from albert_edge.bench.roofline import bound_ms, measure, shape_rates

    shape = (8, 256, 256)
    roof = measure({"threads": [1], "gemms": [shape], "min_time_s": 0.01, "xnnpack": True})
    impls = {(g["precision"], g["impl"]) for g in roof["gemms"]}
    assert ("fp32", "xnnpack FULLY_CONNECTED") in impls, roof["errors"]
    assert ("int8", "xnnpack FULLY_CONNECTED (dynamic int8)") in impls, roof["errors"]
    best = max(g["gops"] for g in roof["gemms"] if g["precision"] == "int8")
    assert shape_rates(roof, "cpu", 1, "int8") == {shape: best}
    ms = bound_ms(roof, [(shape, 3)], device="cpu", threads=1, precision="int8")
    assert ms == pytest.approx(3 * 2 * 8 * 256 * 256 / (best * 1e9) * 1e3)
    assert bound_ms(roof, [((9, 256, 256), 1)], device="cpu", threads=1, precision="int8") is None
