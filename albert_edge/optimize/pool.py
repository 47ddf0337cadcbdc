"""Where candidate builds run: processes on this machine, or a Ray cluster (``--cluster``).

Builds, fine-tunes of a candidate and its evaluations are independent, so they run one
per worker, one CPU and one thread each. Locally that is a pool of spawned processes
(:class:`LocalPool`, ``--workers`` of them, default this machine's usable CPUs): what
``pip install 'albert-edge[all]'`` installs is enough, and nothing starts a runtime, a
dashboard or an object store for one machine. ``--cluster ADDRESS`` joins an existing Ray
cluster instead (:class:`RayPool`, the ``[ray]`` extra): its workers must see the work
directory at the same path (a shared filesystem), since every task writes there. The
address is probed before the first stage (:func:`probe_cluster`), so an address nothing
listens on is one line in seconds, never minutes of Ray's retries.
Timing never runs here (see :mod:`albert_edge.optimize.search`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from albert_edge.optimize.work import OptimizeError, disk_full

PROBE_S = 5.0  # a TCP connect to the cluster's address
JOIN_S = 45.0  # a throw-away ray.init to it, in a child process (killed past this)
PARENT_POLL_S = 2.0  # how often a local worker checks that the run still exists


class Pool(Protocol):
    """``submit(fn, *args)`` -> handle; ``wait(handles, timeout)`` -> (done, pending);
    ``result(handle)``; ``cancel(handle)``; ``close()``; ``kind`` in words."""

    kind: str

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any: ...

    def wait(self, handles: list[Any], timeout: float) -> tuple[list[Any], list[Any]]: ...

    def result(self, handle: Any) -> Any: ...

    def cancel(self, handle: Any) -> None: ...

    def close(self) -> None: ...


def make_pool(cluster: str | None, workers: int | None) -> Pool:
    """A :class:`RayPool` on ``cluster``, else a :class:`LocalPool` of ``workers``."""
    if cluster is not None:
        return RayPool(cluster)
    from albert_edge.options import usable_cpus

    return LocalPool(workers or usable_cpus())


# --- this machine ----------------------------------------------------------------------


class LocalPool:
    """Spawned worker processes (``concurrent.futures``), each build alone in one.

    Spawned, not forked: the parent has torch loaded with its threads, which a fork
    copies half-held. A worker ignores Ctrl-C (the parent stops the run and ends its
    workers) and exits on its own when the run's process is gone (a ``kill -9``), so no
    build outlives the run that asked for it."""

    kind = "local processes"

    def __init__(self, workers: int) -> None:
        self.workers = max(1, int(workers))
        self._ex: Any = None

    def _executor(self) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        if self._ex is None:
            self._ex = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_start,
                initargs=(os.getpid(),),
            )
        return self._ex

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        from concurrent.futures.process import BrokenProcessPool

        from albert_edge.io import signals_held

        # a submit may spawn a worker, which reads its start from a pipe the parent
        # writes: a stop signal waits until that write is done, and SIGINT is blocked
        # meanwhile so the worker is born with it blocked (a Ctrl-C reaches the whole
        # process group: the parent stops the pool, never a worker mid-import)
        with signals_held(), _sigint_blocked():
            try:
                return self._executor().submit(_call, fn, *args)
            except BrokenProcessPool:  # a worker died (out of memory?): a fresh pool
                self._end()
                return self._executor().submit(_call, fn, *args)

    def wait(self, handles: list[Any], timeout: float) -> tuple[list[Any], list[Any]]:
        from concurrent.futures import FIRST_COMPLETED
        from concurrent.futures import wait as wait_for

        if not handles:
            return [], []
        done, pending = wait_for(handles, timeout=max(0.0, timeout), return_when=FIRST_COMPLETED)
        return list(done), list(pending)

    def result(self, handle: Any) -> Any:
        from concurrent.futures.process import BrokenProcessPool

        try:
            return handle.result()
        except BrokenProcessPool:
            return {
                "built": False,
                "why_not": "failed: its build process died (killed: out of memory?)",
                "build_s": 0.0,
            }

    def cancel(self, handle: Any) -> None:
        """A queued build is dropped; a running one can only be stopped with its
        process: every worker is ended (the search cancels all it runs at once, when the
        budget runs out), and a later submit starts fresh ones."""
        if not handle.cancel() and not handle.done():
            self._end()

    def close(self) -> None:
        self._end()

    def _end(self) -> None:
        ex, self._ex = self._ex, None
        if ex is None:
            return
        live = list((getattr(ex, "_processes", None) or {}).values())
        for proc in live:  # ProcessPoolExecutor (3.11) has no public call for this
            with contextlib.suppress(Exception):
                proc.kill()
        ex.shutdown(wait=False, cancel_futures=True)
        for proc in live:
            with contextlib.suppress(Exception):
                proc.join(5)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _worker_start(parent: int) -> None:
    """A local worker's start: one thread (each build's bytes do not depend on the
    machine: what a Ray task with one CPU gets), Ctrl-C left to the parent, and a watch
    that ends this worker when the run's process is gone."""
    import threading

    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    # a build's own progress lines and its frameworks' start-up chatter would interleave
    # with the run's on the terminal (Ray's workers were not logged to the driver either):
    # what a build found comes back in its record
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # ignored, not held

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="albert-edge-parent-watch", daemon=True).start()


# --- a Ray cluster ---------------------------------------------------------------------


def cluster_host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a ``--cluster`` address (``HOST:PORT``, ``[IPv6]:PORT``, or
    ``ray://HOST:PORT`` for Ray Client), None for ``auto`` (the cluster this machine
    runs, found by Ray itself); one line for anything else."""
    text = address.strip()
    if text == "auto":
        return None
    if "://" in text:
        scheme, text = text.split("://", 1)
        if scheme != "ray":
            raise OptimizeError(
                f"--cluster {address}: a Ray address is HOST:PORT (the GCS port `ray start "
                "--head` printed, 6379 by default) or ray://HOST:PORT; not a "
                f"{scheme}:// URL"
            )
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise OptimizeError(
            f"--cluster {address}: not HOST:PORT; give the address `ray start --head` "
            "printed (e.g. 10.0.0.5:6379), or leave --cluster out to build on this machine"
        )
    return host, int(port)


def probe_cluster(address: str, timeout: float = PROBE_S) -> None:
    """Refuse, in one line and within ``timeout`` seconds, a ``--cluster`` address that
    nothing listens on (Ray itself retries such an address for minutes, printing its log
    lines, while the budget runs). Only a TCP connect: no Ray import."""
    hp = cluster_host_port(address)
    if hp is None:
        return
    host, port = hp
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise OptimizeError(
            f"--cluster {address}: nothing answers there ({why}); start the cluster "
            "(`ray start --head` prints its address), check the host and port, or leave "
            "--cluster out to build on this machine"
        ) from None


_JOIN = """
import sys
import ray
ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False,
         logging_level="ERROR")
print(int(ray.cluster_resources().get("CPU", 0)))
"""


def join_probe(address: str, timeout: float = JOIN_S) -> None:
    """``ray.init(address)`` once in a child process, killed past ``timeout``: what
    listens there must be a Ray cluster this Ray can join (same version, reachable GCS)
    before this process joins it, since Ray's own retries block for minutes."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _JOIN, address],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "RAY_gcs_server_port_wait_time_s": str(int(timeout) // 3)},
        )
    except subprocess.TimeoutExpired:
        raise OptimizeError(
            f"--cluster {address}: something answers there, but no Ray cluster joined within "
            f"{timeout:.0f} s; give the address `ray start --head` printed, or leave "
            "--cluster out to build on this machine"
        ) from None
    if done.returncode != 0:
        lines = [x.strip() for x in done.stderr.splitlines() if x.strip()]
        last = lines[-1][:300] if lines else f"exit status {done.returncode}"
        if "InvalidAuthToken" in done.stderr or "Authentication token" in done.stderr:
            last = (
                "the cluster wants its authentication token: set RAY_AUTH_MODE=token and "
                "RAY_AUTH_TOKEN (or ~/.ray/auth_token) as its nodes have them"
            )
        raise OptimizeError(
            f"--cluster {address}: cannot join that Ray cluster ({last}); give the address "
            "`ray start --head` printed (the same Ray version on both sides), or leave "
            "--cluster out"
        )


class RayPool:
    """Tasks on an existing Ray cluster, one CPU each, no retries."""

    kind = "the Ray cluster"

    def __init__(self, cluster: str) -> None:
        from albert_edge.extras import require

        require("ray", f"--cluster {cluster}", ("ray",))
        probe_cluster(cluster)
        join_probe(cluster)
        import ray

        self._ray = ray
        self.started = False
        if not ray.is_initialized():
            with _keep_stop_handlers():
                try:
                    ray.init(address=cluster, log_to_driver=False, configure_logging=False)
                except (ConnectionError, ValueError, RuntimeError) as exc:
                    raise OptimizeError(
                        f"--cluster {cluster}: cannot join that Ray cluster ({exc}); give "
                        "the address `ray start --head` printed, or leave --cluster out"
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


@contextlib.contextmanager
def _keep_stop_handlers() -> Iterator[None]:
    """``ray.init`` replaces this process's SIGTERM handler with ``sys.exit``: a stop
    then ended the run without its stop line and without its clean-up. The run's own
    handlers are put back afterwards; a SIGTERM that Ray's handler met meanwhile is
    raised as the stop it is."""
    from albert_edge.errors import Interrupted

    saved = {}
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        with contextlib.suppress(ValueError, OSError):
            saved[sig] = signal.getsignal(sig)
    try:
        yield
    except SystemExit as exc:
        if exc.code == int(signal.SIGTERM):
            raise Interrupted(signal.SIGTERM) from None
        raise
    finally:
        for sig, handler in saved.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, handler)


# --- in a worker -----------------------------------------------------------------------


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn`` in a worker; an error comes back as a value, never a lost task. A full
    disk comes back as ``disk_full``: the run stops there instead of trying every
    remaining candidate against the same disk."""
    t0 = time.monotonic()
    try:
        return fn(*args)
    except Exception as exc:  # the record says why this candidate was not built
        rec = {
            "built": False,
            "why_not": f"failed: {type(exc).__name__}: {exc}",
            "build_s": time.monotonic() - t0,
        }
        full = disk_full(exc)
        if full is not None:
            rec["disk_full"] = full
        return rec
