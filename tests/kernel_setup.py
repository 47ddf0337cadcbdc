"""Emulated kernels for the slow tests: set up on first use, never skipped as a pass.

The slow suite must be green on a fresh clone (issue 26), so a kernel that *can* be set
up here (qemu, an arm64 sysroot, the wasm runtime: Debian, PyPI and npm packages) is set
up by the test that needs it, with the same idempotent code as ``albert-edge kernels
setup``. A kernel this machine cannot emulate at all (AVX-512 VNNI under qemu, x86 from an
ARM host) is skipped with the reason; a set-up that fails fails the test.
"""

from __future__ import annotations

import pytest

from albert_edge.errors import KernelSetupError


def ready(kernel: str, *, litert: bool = False) -> None:
    """Make ``kernel`` runnable here, or skip when no set-up could make it so."""
    from albert_edge.kernels.setup import require_arm64_sysroot, setup, status

    def why_not() -> str | None:
        why = status(kernel)
        if why is None and litert and kernel == "arm64":
            try:
                require_arm64_sysroot(litert=True)
            except KernelSetupError as exc:
                why = str(exc)
        return why

    why = why_not()
    if why is None:
        return
    if "kernels setup" not in why:  # no set-up command helps on this machine
        pytest.skip(why)
    try:
        setup(kernel, log=lambda _line: None)
    except KernelSetupError as exc:
        pytest.fail(f"{kernel}: set-up failed: {exc}")
    why = why_not()
    if why is not None:
        pytest.fail(f"{kernel}: still not runnable after set-up: {why}")
