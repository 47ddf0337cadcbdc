"""XNNPACK's (LiteRT CPU) matrix-multiply throughput on one exact (M, K, N) shape.

The roofline (``roofline.py``) takes, per shape and precision, the best rate over every
GEMM implementation at hand. Without XNNPACK among them a TFLite artifact is measured
against ONNX Runtime's and torch's kernels only, and a fraction above or below 1.0 says
as much about which library won the ceiling as about the artifact. So the TFLite routes
get their own kernel here, reached the way an artifact reaches it: a ``.tflite`` file
run by LiteRT's ``Interpreter``, whose default delegate is XNNPACK.

The model is a single ``FULLY_CONNECTED`` op, Y[m, n] = A[m, k] @ W[k, n] with W a
constant, built by ``tf.lite.TFLiteConverter`` (the converter albert-edge's TF route
uses):

- ``"fp32"``: a plain float model (XNNPACK's f32 GEMM);
- ``"int8"``: dynamic-range quantization (``Optimize.DEFAULT``, no representative
  data), the scheme of albert-edge's ``int8-dynamic`` TFLite artifacts: W is stored as
  per-channel int8 and the activations are quantized on every call, which XNNPACK runs
  as its dynamically-quantized (qd8 × qc8w) GEMM. The cost of quantizing A is part of
  each call, as it is in the artifacts.

Converted files are cached under ``work`` so that the roofline's many threads × shapes
loops convert each (kind, m, k, n) once; W itself is cached beside them (one per shape,
shared by both kinds), so a test can compare the output with A @ W even when the model
came from the cache.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

KINDS = ("fp32", "int8")


class XnnpackGemm:
    """One LiteRT interpreter holding the GEMM model, its input already set.

    Calling it runs one inference (the roofline's ``Callable[[], Any]`` contract); the
    object, rather than a bare lambda, so that a check can read what the call computed:
    ``a`` is the float32 A[m, k] set at construction, ``w`` the float W[k, n] the model
    was converted from (before any quantization), ``path`` the .tflite file.
    """

    def __init__(self, interpreter: Any, a: np.ndarray, w: np.ndarray, path: Path) -> None:
        self.interpreter = interpreter
        self.a = a
        self.w = w
        self.path = path
        self._out = interpreter.get_output_details()[0]["index"]

    def __call__(self) -> None:
        self.interpreter.invoke()

    def output(self) -> np.ndarray:
        """Y[m, n] of the last call (a copy: the interpreter reuses its buffer)."""
        import numpy as np

        return np.array(self.interpreter.get_tensor(self._out), copy=True)


def _weight(work: Path, k: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """W for this (k, n), drawn once and kept, so a cached model and W always agree."""
    import numpy as np

    path = work / f"xnnpack_gemm_w_{k}x{n}.npy"
    if path.is_file():
        return np.load(path)
    w = rng.standard_normal((k, n), dtype=np.float32)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npy")
    np.save(tmp, w)
    os.replace(tmp, path)  # atomic: parallel roofline children may share ``work``
    return w


def _convert(kind: str, m: int, k: int, w: np.ndarray) -> bytes:
    """The .tflite of Y = A @ W with a fixed [m, k] input (see the module docstring)."""
    # Set before TensorFlow is first imported, or its C++ logging has already started;
    # a user's own setting wins.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    weight = tf.constant(w)

    @tf.function(input_signature=[tf.TensorSpec([m, k], tf.float32, name="a")])
    def gemm(a: Any) -> Any:
        return tf.matmul(a, weight)

    conv = tf.lite.TFLiteConverter.from_concrete_functions([gemm.get_concrete_function()], gemm)
    if kind == "int8":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    data: bytes = conv.convert()
    return data


def _check_graph(interp: Any, kind: str, path: Path) -> None:
    """Refuse to time anything but one FULLY_CONNECTED that XNNPACK took over.

    Why: a rate under the name "xnnpack" must come from XNNPACK's kernel for this scheme.
    The converter leaves weights under 1024 elements unquantized, and a runtime without
    the delegate would run TFLite's builtin kernels; either would time something else
    while looking like a valid result.
    """
    import numpy as np

    ops = interp._get_ops_details()
    names = [op["op_name"] for op in ops]
    fcs = [op for op in ops if op["op_name"] == "FULLY_CONNECTED"]
    if len(fcs) != 1 or set(names) - {"FULLY_CONNECTED", "DELEGATE"}:
        raise RuntimeError(f"{path.name}: expected one FULLY_CONNECTED op, got {names}")
    tensors = {t["index"]: t for t in interp.get_tensor_details()}
    weight = tensors[int(fcs[0]["inputs"][1])]
    want = np.int8 if kind == "int8" else np.float32
    if weight["dtype"] != want:
        raise RuntimeError(
            f"{path.name}: FULLY_CONNECTED weight is {np.dtype(weight['dtype']).name}, "
            f"expected {np.dtype(want).name} for kind {kind!r}"
            + (
                " (the converter quantizes only weights of >= 1024 elements)"
                if kind == "int8"
                else ""
            )
        )
    if "DELEGATE" not in names:
        raise RuntimeError(
            f"{path.name}: the FULLY_CONNECTED op was not delegated to XNNPACK "
            f"(ops {names}); the rate would be TFLite's builtin kernel's"
        )


def xnnpack_session(
    kind: str, m: int, k: int, n: int, threads: int, work: Path, rng: np.random.Generator
) -> XnnpackGemm:
    """A callable running Y[m, n] = A[m, k] @ W[k, n] once through LiteRT + XNNPACK.

    ``kind`` is ``"fp32"`` or ``"int8"`` (dynamic-range quantized, as the int8-dynamic
    artifacts are). The input is set once here so that a call times the GEMM alone, as
    the other roofline implementations do. ``threads`` is the interpreter's (XNNPACK's
    thread pool), matched to the benchmark rows it bounds. Raises RuntimeError when the
    built graph is not what is meant to be timed (see :func:`_check_graph`).
    """
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    w = _weight(work, k, n, rng)
    path = work / f"xnnpack_gemm_{kind}_{m}x{k}x{n}.tflite"
    if not path.is_file():
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
        tmp.write_bytes(_convert(kind, m, k, w))
        os.replace(tmp, path)
    interp = Interpreter(model_path=str(path), num_threads=int(threads))
    interp.allocate_tensors()
    _check_graph(interp, kind, path)
    a = rng.standard_normal((m, k), dtype=np.float32)
    interp.set_tensor(interp.get_input_details()[0]["index"], a)
    return XnnpackGemm(interp, a, w, path)
