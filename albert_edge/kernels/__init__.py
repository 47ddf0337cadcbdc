"""The CPU kernel families an int8 artifact meets, and how to run it on each from here.

The same int8 ``.onnx`` file computes differently per kernel family: ONNX Runtime's x86
AVX2 (and AVX-512 without VNNI) u8s8 kernels add pairs of u8×s8 products into int16 with
saturation (``VPMADDUBSW``); AVX-512 VNNI / AVX-VNNI (``VPDPBUSD``), ARM64 (``SDOT``/
``UDOT``, i8mm) and wasm SIMD accumulate in int32. A recipe is only portable if it is right
on the saturating one, so albert-edge verifies on each family without owning the
hardware:

==========  ==========================================================================
x86-avx2    qemu-x86_64 ``-cpu Haswell`` runs this very interpreter; ORT then picks its
            AVX2 kernels (TCG has no AVX-512, so the reverse cannot be emulated)
x86-vnni    the host, when it has avx512_vnni or avx_vnni
arm64       qemu-aarch64 ``-cpu neoverse-n1`` (qemu ≥ 8: Debian 12's 7.2 gives wrong results)
            with a Debian arm64 Python and ORT's aarch64 wheel in a cached sysroot
wasm        onnxruntime-web (WebAssembly SIMD) in Node
==========  ==========================================================================

``albert-edge kernels setup NAME`` installs what a family needs (apt, pip wheels, npm)
into :func:`cache_dir`; ``albert-edge verify ART --on NAME`` then runs the usual grid and
accuracy there. Emulation is 30-60× slower than native: ``--on`` verifies on a sample.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

from albert_edge.errors import UnsupportedError

__all__ = [
    "KERNELS",
    "KernelFamily",
    "cache_dir",
    "host_cpu_flags",
    "host_kernel",
]


@dataclass(frozen=True)
class KernelFamily:
    """One integer-GEMM kernel family and what it takes to run there from an x86 host."""

    name: str
    description: str
    saturating_u8s8: bool  # adds u8×s8 pairs into int16 with saturation
    how: str  # how albert-edge reaches it from this machine


KERNELS: dict[str, KernelFamily] = {
    k.name: k
    for k in (
        KernelFamily(
            "x86-avx2",
            "x86-64 AVX2 (and AVX-512 without VNNI): u8s8 via VPMADDUBSW, int16 pair sums saturate",
            True,
            "qemu-x86_64 -cpu Haswell",
        ),
        KernelFamily(
            "x86-vnni",
            "x86-64 AVX-512 VNNI / AVX-VNNI: u8s8 via VPDPBUSD, int32 accumulation",
            False,
            "native (host CPU)",
        ),
        KernelFamily(
            "arm64",
            "ARM64 NEON dot-product / i8mm: int32 accumulation",
            False,
            "qemu-aarch64 -cpu neoverse-n1 + Debian arm64 sysroot",
        ),
        KernelFamily(
            "wasm",
            "WebAssembly SIMD (onnxruntime-web): int32 accumulation",
            False,
            "onnxruntime-web in Node",
        ),
    )
}


def host_cpu_flags() -> set[str]:
    """The flags of this machine's first CPU (empty off Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return set(line.split(":", 1)[1].split())
    return set()


def host_kernel() -> str:
    """The kernel family ONNX Runtime uses on this machine."""
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return "arm64"
    flags = host_cpu_flags()
    if flags & {"avx512_vnni", "avx_vnni"}:
        return "x86-vnni"
    if "avx2" in flags:
        return "x86-avx2"
    raise UnsupportedError(
        f"this CPU ({machine}, no AVX2) is below what albert-edge supports; ONNX Runtime's "
        "x86 int8 kernels need AVX2"
    )


def cache_dir() -> Path:
    """Where set-up puts emulators, sysroots and npm packages (``ALBERT_EDGE_CACHE``)."""
    base = os.environ.get("ALBERT_EDGE_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "albert-edge" / "kernels"


def check_kernel_name(name: str) -> KernelFamily:
    if name not in KERNELS:
        raise UnsupportedError(
            f"unknown kernel family {name!r}; choose one of {', '.join(KERNELS)}"
        )
    return KERNELS[name]
