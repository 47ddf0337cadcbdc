"""This machine's best matrix-multiply throughput on the model's own GEMM shapes.

A latency alone does not say whether an artifact is fast *for this machine*; the
fraction of the best achievable GEMM throughput does. The roofline is measured in
the same run as the benchmarks (in its own child process, with the same thread
counts) on exactly the (M, K, N) products the benchmarked models execute, through
every implementation at hand, and the best per precision is the ceiling:

- fp32: ``torch.matmul`` and ONNX Runtime ``MatMul`` (weights as an initializer, so
  ORT may pre-pack them, as it does for a model);
- int8: ``torch._int_mm`` (int8×int8→int32) and ONNX Runtime ``MatMulInteger``
  (uint8 activations × int8 weights, the pair ORT's dynamic quantization emits);
- when the run benchmarks a LiteRT backend (``job["xnnpack"]``): XNNPACK through a
  one-op ``.tflite`` (``xnnpack_gemm.py``), fp32 and dynamic-range int8 (which also
  quantizes its activations per call, as the artifacts do). Only then: building the
  one-op models needs TensorFlow's converter, seconds per shape;
- on CUDA, when a CUDA backend is benchmarked: ``torch.matmul`` in fp32 and fp16.

Each measurement is warmed up once and then repeated for at least ``min_time_s``
(and 3 repetitions); the per-shape median is used.

A row's fraction is :func:`bound_ms` ÷ its p50: the time the model's weight GEMMs
(``flops.weight_gemms``) take at the best rate measured on each exact shape, at the
row's own length. 1.0 would mean everything besides those GEMMs (attention core,
LayerNorm, GELU, activation quantization, dispatch) cost nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def _median_seconds(fn: Callable[[], Any], min_time_s: float, sync: Callable[[], Any]) -> float:
    fn()
    sync()
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < 3 or time.perf_counter() - start < min_time_s:
        t = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t)
        if len(samples) >= 200:
            break
    samples.sort()
    return samples[len(samples) // 2]


def _ort_session(kind: str, m: int, k: int, n: int, threads: int, rng: Any) -> Callable[[], Any]:
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    if kind == "int8":
        a_type, out_type, op = TensorProto.UINT8, TensorProto.INT32, "MatMulInteger"
        a = rng.integers(0, 255, (m, k), dtype=np.uint8)
        b = rng.integers(-127, 127, (k, n), dtype=np.int8)
    else:
        a_type, out_type, op = TensorProto.FLOAT, TensorProto.FLOAT, "MatMul"
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node(op, ["A", "B"], ["Y"])],
        "gemm",
        [helper.make_tensor_value_info("A", a_type, [m, k])],
        [helper.make_tensor_value_info("Y", out_type, [m, n])],
        initializer=[numpy_helper.from_array(b, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feeds = {"A": a}
    return lambda: sess.run(None, feeds)


def shape_rates(
    roofline: Mapping[str, Any], device: str, threads: int, precision: str
) -> dict[tuple[int, int, int], float]:
    """Best GOP/s measured on each exact (M, K, N), over every implementation at hand."""
    best: dict[tuple[int, int, int], float] = {}
    want = 0 if device == "cuda" else int(threads)
    for g in roofline.get("gemms") or []:
        if g.get("device") != device or int(g.get("threads", 0)) != want:
            continue
        if g.get("precision") != precision:
            continue
        shape = (int(g["m"]), int(g["k"]), int(g["n"]))
        best[shape] = max(best.get(shape, 0.0), float(g["gops"]))
    return best


def bound_ms(
    roofline: Mapping[str, Any],
    gemms: Sequence[tuple[tuple[int, int, int], int]],
    *,
    device: str,
    threads: int,
    precision: str,
) -> float | None:
    """The time ``gemms`` ((M, K, N), count) take at this machine's best measured rate on
    each exact shape, in ms; None when a shape was not measured.

    Why per shape and not one peak rate for all FLOPs: a 27-token sentence runs M=27
    GEMMs, which no kernel runs at the rate of M=512 ones. Dividing its FLOPs by the
    machine's best rate over every shape charged the artifact for the kernels' small-M
    inefficiency, which no graph change can remove (issue 17 defines the bound this way:
    "the weight GEMMs alone take 75.1 ms" at the shapes' own measured rates).
    """
    rates = shape_rates(roofline, device, threads, precision)
    total = 0.0
    for (m, k, n), count in gemms:
        gops = rates.get((m, k, n))
        if not gops:
            return None
        total += count * 2.0 * m * k * n / (gops * 1e9)
    return total * 1e3


def measure(job: Mapping[str, Any]) -> dict[str, Any]:
    """Run the roofline job (see module docstring); returns the ``roofline`` section."""
    import numpy as np

    min_time = float(job.get("min_time_s", 0.2))
    gemms = [tuple(int(x) for x in g) for g in job["gemms"]]
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {"cpu": {}, "gemms": [], "errors": []}

    def record(
        device: str, threads: int, precision: str, impl: str, shape: tuple[int, ...], seconds: float
    ) -> None:
        m, k, n = shape
        gops = 2.0 * m * k * n / seconds / 1e9
        out["gemms"].append(
            dict(
                device=device,
                threads=threads,
                precision=precision,
                impl=impl,
                m=m,
                k=k,
                n=n,
                gops=gops,
            )
        )
        table = out.setdefault(device, {}).setdefault(str(threads), {})
        best = table.get(precision)
        if best is None or gops > best["gops"]:
            table[precision] = dict(gops=gops, impl=impl, m=m, k=k, n=n)

    import tempfile

    work = Path(tempfile.mkdtemp(prefix="albert-edge-roofline-"))
    try:
        _measure_cpu(job, gemms, min_time, rng, record, out, work)
    finally:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    _measure_cuda(job, gemms, min_time, record, out)
    return out


def _measure_cpu(
    job: Mapping[str, Any],
    gemms: Sequence[tuple[int, ...]],
    min_time: float,
    rng: Any,
    record: Callable[..., None],
    out: dict[str, Any],
    work: Path,
) -> None:
    import torch

    def none() -> None:
        return None

    def cpu_fp32(a: Any, b: Any) -> float:
        return _median_seconds(lambda: torch.matmul(a, b), min_time, none)

    def cpu_int8(a: Any, b: Any) -> float:
        return _median_seconds(lambda: torch._int_mm(a, b), min_time, none)

    def ort(kind: str, shape: tuple[int, ...], threads: int) -> float:
        m, k, n = shape
        fn = _ort_session(kind, m, k, n, threads=threads, rng=rng)
        return _median_seconds(fn, min_time, none)

    def xnnpack(kind: str, shape: tuple[int, ...], threads: int) -> float:
        from albert_edge.bench.xnnpack_gemm import xnnpack_session

        m, k, n = shape
        fn = xnnpack_session(kind, m, k, n, threads, work, rng)
        return _median_seconds(fn, min_time, none)

    impls: list[tuple[str, str, Callable[..., float]]] = [
        ("fp32", "torch.matmul", lambda s, t, a32, b32, a8, b8: cpu_fp32(a32, b32)),
        ("int8", "torch._int_mm", lambda s, t, a32, b32, a8, b8: cpu_int8(a8, b8)),
        ("fp32", "onnxruntime MatMul", lambda s, t, *_: ort("fp32", s, t)),
        ("int8", "onnxruntime MatMulInteger", lambda s, t, *_: ort("int8", s, t)),
    ]
    if job.get("xnnpack"):  # a LiteRT backend is benchmarked: its kernels compete too
        impls += [
            ("fp32", "xnnpack FULLY_CONNECTED", lambda s, t, *_: xnnpack("fp32", s, t)),
            (
                "int8",
                "xnnpack FULLY_CONNECTED (dynamic int8)",
                lambda s, t, *_: xnnpack("int8", s, t),
            ),
        ]
    for threads in job["threads"]:
        th = int(threads)
        torch.set_num_threads(th)
        for shape in gemms:
            m, k, n = shape
            a32, b32 = torch.randn(m, k), torch.randn(k, n)
            a8 = torch.randint(-127, 127, (m, k), dtype=torch.int8)
            b8 = torch.randint(-127, 127, (k, n), dtype=torch.int8)
            for precision, impl, measure_fn in impls:
                try:
                    seconds = measure_fn(shape, th, a32, b32, a8, b8)
                except Exception as exc:  # an implementation missing here is noted, not fatal
                    out["errors"].append(
                        f"{impl} {shape}: {type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:160] if str(exc) else ''}"
                    )
                    continue
                record("cpu", th, precision, impl, shape, seconds)


def _measure_cuda(
    job: Mapping[str, Any],
    gemms: Sequence[tuple[int, ...]],
    min_time: float,
    record: Callable[..., None],
    out: dict[str, Any],
) -> None:
    import torch

    if job.get("cuda"):
        if torch.cuda.is_available():
            out["gpu_name"] = torch.cuda.get_device_name(0)
            for shape in gemms:
                m, k, n = shape
                for precision, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
                    a = torch.randn(m, k, device="cuda", dtype=dtype)
                    b = torch.randn(k, n, device="cuda", dtype=dtype)
                    try:
                        seconds = _median_seconds(
                            lambda: torch.matmul(a, b),  # noqa: B023
                            min_time,
                            torch.cuda.synchronize,
                        )
                    except Exception as exc:
                        out["errors"].append(f"cuda {precision} {shape}: {type(exc).__name__}")
                        continue
                    record("cuda", 0, precision, "torch.matmul (cuda)", shape, seconds)
        else:
            out["errors"].append("cuda: torch.cuda.is_available() is False")
