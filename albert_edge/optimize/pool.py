"""Where candidate builds run: Ray (a local one by default, or ``--cluster ADDRESS``).

Builds, fine-tunes of a candidate and its evaluations are independent, so they run as
Ray tasks, one CPU each. A local Ray is started with this machine's CPUs (or
``--workers``), no dashboard, and stopped at the end; an existing cluster must see the
work directory at the same path (a shared filesystem), since every task writes there.
Timing never runs here (see :mod:`albert_edge.optimize.search`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from albert_edge.optimize.stages import OptimizeError


class Pool:
    """``submit(fn, *args)`` -> handle; ``wait(handles, timeout)`` -> (done, pending);
    ``result(handle)``; ``cancel(handle)``; ``close()``."""

    def __init__(self, cluster: str | None, workers: int | None) -> None:
        try:
            import ray
        except ImportError:
            raise OptimizeError(
                "optimize runs its builds on Ray, which is not installed: "
                "pip install 'albert-edge[ray]'"
            ) from None
        self._ray = ray
        self.started = False
        if not ray.is_initialized():
            if cluster is None:
                cpus = workers or os.cpu_count() or 1
                ray.init(
                    num_cpus=cpus,
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                )
            else:
                try:
                    ray.init(address=cluster, log_to_driver=False, configure_logging=False)
                except (ConnectionError, ValueError, RuntimeError) as exc:
                    raise OptimizeError(
                        f"--cluster {cluster}: cannot join that Ray cluster ({exc}); give the "
                        "address `ray start --head` printed, or leave --cluster out"
                    ) from None
            self.started = True
        self.cpus = int(ray.cluster_resources().get("CPU", 1))
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_call)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._remote.remote(fn, *args)

    def wait(self, handles: list[Any], timeout: float) -> tuple[list[Any], list[Any]]:
        if not handles:
            return [], []
        done, pending = self._ray.wait(
            handles, num_returns=1, timeout=max(0.0, timeout), fetch_local=True
        )
        return list(done), list(pending)

    def result(self, handle: Any) -> Any:
        return self._ray.get(handle)

    def cancel(self, handle: Any) -> None:
        self._ray.cancel(handle, force=True)

    def close(self) -> None:
        if self.started:
            self._ray.shutdown()
            self.started = False


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn`` in a worker; an error comes back as a value, never a lost task."""
    t0 = time.monotonic()
    try:
        return fn(*args)
    except Exception as exc:  # the record says why this candidate was not built
        return {
            "built": False,
            "why_not": f"failed: {type(exc).__name__}: {exc}",
            "build_s": time.monotonic() - t0,
        }
