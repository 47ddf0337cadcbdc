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
- on CUDA, when a CUDA backend is benchmarked: ``torch.matmul`` in fp32 and fp16.

Each measurement is warmed up once and then repeated for at least ``min_time_s``
(and 3 repetitions); the per-shape median is used.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
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


def measure(job: Mapping[str, Any]) -> dict[str, Any]:
    """Run the roofline job (see module docstring); returns the ``roofline`` section."""
    import numpy as np
    import torch

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

    for threads in job["threads"]:
        th = int(threads)
        torch.set_num_threads(th)
        for shape in gemms:
            m, k, n = shape
            a32, b32 = torch.randn(m, k), torch.randn(k, n)
            a8 = torch.randint(-127, 127, (m, k), dtype=torch.int8)
            b8 = torch.randint(-127, 127, (k, n), dtype=torch.int8)
            for precision, impl, measure_fn in (
                ("fp32", "torch.matmul", lambda a=a32, b=b32: cpu_fp32(a, b)),
                ("int8", "torch._int_mm", lambda a=a8, b=b8: cpu_int8(a, b)),
                ("fp32", "onnxruntime MatMul", lambda s=shape, t=th: ort("fp32", s, t)),
                ("int8", "onnxruntime MatMulInteger", lambda s=shape, t=th: ort("int8", s, t)),
            ):
                try:
                    seconds = measure_fn()
                except Exception as exc:  # an implementation missing here is noted, not fatal
                    out["errors"].append(
                        f"{impl} {shape}: {type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:160] if str(exc) else ''}"
                    )
                    continue
                record("cpu", th, precision, impl, shape, seconds)
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
    return out
