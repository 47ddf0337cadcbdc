"""Child process: run one ``.tflite`` artifact with LiteRT (XNNPACK), feeds in, outputs out.

The TFLite twin of ``_ort_child.py``, started by
:class:`albert_edge.kernels.remote.RemoteRunner` under qemu-user so that XNNPACK's
``cpuinfo`` sees another CPU (``-cpu Haswell`` → its AVX2 int8 kernels; ``qemu-aarch64`` →
its NEON dot-product kernels). Unlike the ONNX child it reuses albert-edge's own
:class:`~albert_edge.tflite.runtime.LiteRTRunner` (bucket choice, padding, batch loop), so
an emulated run is the same code path as a native one. That module imports only numpy and
the stdlib from albert-edge, so the parent puts the package's source directory on
``PYTHONPATH`` even for the aarch64 interpreter, which has nothing else installed.

Usage: python _litert_child.py MODEL THREADS
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _wire


def main() -> int:
    import numpy as np

    from albert_edge.tflite.runtime import LiteRTRunner

    model, threads = sys.argv[1], int(sys.argv[2])
    try:
        runner = LiteRTRunner(model, threads=threads)
    except Exception as exc:  # reported to the host as one line
        print(_wire.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    version = "?"
    try:
        from importlib.metadata import version as _v

        version = _v(runner.package.replace("_", "-"))
    except Exception:  # a missing dist-info only costs the version string
        pass
    hello = {
        "runtime": f"{runner.package} {version}",
        "machine": platform.machine(),
        "inputs": [{"name": n} for n in runner.input_names],
        "outputs": list(runner.output_names),
        "max_seq_len": runner.max_seq_len,
    }
    return _wire.serve(
        hello, lambda feeds: {n: np.asarray(v) for n, v in runner.run(feeds).items()}
    )


if __name__ == "__main__":
    sys.exit(main())
