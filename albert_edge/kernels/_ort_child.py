"""Child process: run one ONNX model with ONNX Runtime, feeds in, outputs out.

Started by :class:`albert_edge.kernels.remote.RemoteRunner`, usually under qemu-user so
that ONNX Runtime picks the kernels of another CPU (``qemu-x86_64 -cpu Haswell`` → the
AVX2 u8s8 kernels; ``qemu-aarch64`` → the ARM64 NEON/dot-product kernels). It imports
only numpy, onnxruntime and the sibling ``_wire`` module, by path, because the child's
interpreter (an aarch64 Python) has no albert-edge installed.

Usage: python _ort_child.py MODEL THREADS
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _wire


def main() -> int:
    import numpy as np
    import onnxruntime as ort

    model, threads = sys.argv[1], int(sys.argv[2])
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    hello = {
        "runtime": f"onnxruntime {ort.__version__}",
        "machine": platform.machine(),
        "inputs": [{"name": i.name, "type": i.type, "shape": i.shape} for i in sess.get_inputs()],
        "outputs": [o.name for o in sess.get_outputs()],
    }
    names = hello["outputs"]

    def run(feeds: dict) -> dict:
        values = sess.run(names, feeds)
        return {n: np.asarray(v) for n, v in zip(names, values, strict=True)}

    return _wire.serve(hello, run)


if __name__ == "__main__":
    sys.exit(main())
