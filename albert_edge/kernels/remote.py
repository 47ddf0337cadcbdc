"""``RemoteRunner``: an ONNX or TFLite artifact run on another kernel family, behind the Runner protocol.

Verification (grid and accuracy) is written once against :class:`albert_edge.runtime.Runner`;
this runner keeps one child process alive (ONNX Runtime or LiteRT under qemu-user,
or onnxruntime-web in Node), sends it the feeds as raw arrays and reads the outputs back, so
``verify --on arm64`` is the same code as a native verify with a different runner. A
child that is missing or dies is a one-line :class:`KernelSetupError`, never a pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import AlbertEdgeError, KernelSetupError
from albert_edge.kernels import check_kernel_name, host_kernel
from albert_edge.kernels import setup as ksetup

if TYPE_CHECKING:
    import numpy as np

_HERE = Path(__file__).resolve().parent
_PACKAGE_PARENT = _HERE.parents[1]  # the directory that holds the albert_edge package
_LOAD_TIMEOUT_S = 900  # an emulated ORT import + session build of albert-base takes minutes


def child_command(kernel: str, model: Path, threads: int) -> tuple[list[str], dict[str, str]]:
    """The command (and extra environment) that runs ``model`` on ``kernel``'s kernels.

    ``.onnx`` runs in ONNX Runtime (``_ort_child.py``, or onnxruntime-web for wasm);
    ``.tflite`` in LiteRT with XNNPACK (``_litert_child.py``, which imports albert-edge's
    own TFLite runner from :data:`_PACKAGE_PARENT`).
    """
    check_kernel_name(kernel)
    tflite = model.suffix == ".tflite"
    child = str(_HERE / ("_litert_child.py" if tflite else "_ort_child.py"))
    env: dict[str, str] = {}
    if tflite:
        env["PYTHONPATH"] = _pythonpath(str(_PACKAGE_PARENT), os.environ.get("PYTHONPATH"))
    if kernel == host_kernel():
        return [sys.executable, child, str(model), str(threads)], env
    env["ALBERT_EDGE_EMULATED_KERNEL"] = kernel  # /proc/cpuinfo is the host's under qemu-user
    if kernel == "x86-avx2":
        qemu = ksetup.require_qemu("x86_64")
        return [str(qemu), "-cpu", "Haswell", sys.executable, child, str(model), str(threads)], env
    if kernel == "arm64":
        qemu = ksetup.require_qemu("aarch64")
        root, site = ksetup.require_arm64_sysroot(litert=tflite)
        env["PYTHONPATH"] = _pythonpath(str(site), str(_PACKAGE_PARENT) if tflite else None)
        env["PYTHONNOUSERSITE"] = "1"
        python = root / "usr" / "bin" / "python3"
        cmd = [str(qemu), "-cpu", "neoverse-n1", "-L", str(root), str(python), child]
        return [*cmd, str(model), str(threads)], env
    if kernel == "wasm":
        if tflite:
            raise KernelSetupError(
                f"{model}: --on wasm runs ONNX artifacts (onnxruntime-web); a .tflite runs in "
                "the browser through LiteRT.js (see tests/clients/), verify it on x86-avx2 or arm64"
            )
        node, modules = ksetup.require_wasm()
        env["ALBERT_EDGE_NODE_MODULES"] = str(modules)
        return [str(node), str(_HERE / "ort_web_child.mjs"), str(model), str(threads)], env
    raise KernelSetupError(
        f"{kernel}: cannot be reached from this {host_kernel()} machine (AVX-512 VNNI cannot "
        "be emulated: qemu's TCG has no AVX-512); run verify on a VNNI machine"
    )


def _pythonpath(first: str, rest: str | None) -> str:
    return first if not rest else f"{first}{os.pathsep}{rest}"


class RemoteRunner:
    """One long-lived child process that runs ``model`` on ``kernel``."""

    def __init__(self, path: str | Path, kernel: str, threads: int = 1) -> None:
        self.path = Path(path)
        self.kernel = kernel
        if not self.path.is_file():
            raise AlbertEdgeError(f"{self.path}: model not found; pass an existing model file")
        if self.path.suffix not in (".onnx", ".tflite"):
            raise KernelSetupError(
                f"{self.path}: --on {kernel} runs .onnx and .tflite models; pass an artifact's "
                "model file or directory"
            )
        cmd, extra = child_command(kernel, self.path, threads)
        self._tmp = Path(tempfile.mkdtemp(prefix="albert-edge-kernel-"))
        self._stderr = open(self._tmp / "stderr.txt", "w+b")  # noqa: SIM115 (closed in close())
        env = {**os.environ, **extra}
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            text=True,
        )
        hello = self._read_line()
        if "error" in hello:
            self.close()
            raise KernelSetupError(f"{self.path}: {kernel} runtime failed: {hello['error']}")
        self.runtime: str = str(hello.get("runtime", "?"))
        self.machine: str = str(hello.get("machine", "?"))
        self.providers = (f"{self.runtime} on {kernel} ({' '.join(cmd[:3])})",)
        self.input_names: tuple[str, ...] = tuple(i["name"] for i in hello["inputs"])
        self.output_names: tuple[str, ...] = tuple(hello["outputs"])
        if "max_seq_len" in hello:  # a TFLite child knows its largest signature
            self.max_seq_len: int = int(hello["max_seq_len"])
        else:
            from albert_edge.layout import find_artifact
            from albert_edge.onnx.runtime import DEFAULT_MAX_SEQ_LEN

            found = find_artifact(self.path).max_sequence_length()
            self.max_seq_len = found or DEFAULT_MAX_SEQ_LEN

    def _read_line(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            self._proc.wait(timeout=30)
            self._stderr.seek(0)
            tail = self._stderr.read().decode(errors="replace").strip().splitlines()[-3:]
            raise KernelSetupError(
                f"{self.path}: the {self.kernel} child exited with status {self._proc.returncode}"
                f" ({' | '.join(tail) or 'no output'}); re-run `albert-edge kernels setup "
                f"{self.kernel}`"
            )
        data: dict[str, Any] = json.loads(line)
        return data

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        import numpy as np

        from albert_edge.kernels import _wire

        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise AlbertEdgeError(f"{self.path}: the model needs input(s) {missing}")
        req_dir = Path(tempfile.mkdtemp(dir=self._tmp))
        try:
            sent = {n: np.asarray(feeds[n], dtype=np.int64) for n in self.input_names}
            described = _wire.write_arrays(req_dir, sent, "in")
            assert self._proc.stdin is not None
            self._proc.stdin.write(_wire.dumps({"dir": str(req_dir), "feeds": described}) + "\n")
            self._proc.stdin.flush()
            answer = self._read_line()
            if "error" in answer:
                raise KernelSetupError(f"{self.path}: {self.kernel} run failed: {answer['error']}")
            outs = _wire.read_arrays(req_dir, answer["outputs"])
            return {n: np.asarray(outs[n], dtype=np.float32) for n in self.output_names}
        finally:
            shutil.rmtree(req_dir, ignore_errors=True)

    def close(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                assert self._proc.stdin is not None
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._stderr.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def __repr__(self) -> str:
        return f"RemoteRunner({str(self.path)!r}, kernel={self.kernel!r})"
