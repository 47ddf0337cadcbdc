"""Worker child processes, as the parent drives them.

Two ways to use a child (see :mod:`albert_edge.bench.worker` for why measurements run in
one at all): :func:`run_child` starts one, hands it a job and waits for its result; a
:class:`Resident` child loads its artifact once and then times whichever shape the
parent asks for, visit after visit, so that several artifacts can be timed in turn
(:mod:`albert_edge.bench.interleave`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from albert_edge.bench.worker import PROGRESS_PREFIX

# Environment for children: no oversubscription, no TensorFlow import via transformers.
_CHILD_ENV = {
    "USE_TF": "0",
    "USE_TORCH": "1",
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONWARNINGS": "ignore",
}


def child_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(_CHILD_ENV)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _tail(path: Path, n: int = 1) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    useful = [ln for ln in lines if not ln.startswith(("W0", "I0", "INFO:", "WARNING:"))]
    return " | ".join((useful or lines)[-n:])[:300]


def run_child(
    job: Mapping[str, Any],
    workdir: Path,
    *,
    threads: int,
    timeout_s: float,
    on_progress: Any = None,
) -> dict[str, Any]:
    """Run one worker job in a fresh interpreter and return its result (or a failure)."""
    fd, name = tempfile.mkstemp(prefix="job-", suffix=".json", dir=workdir)
    os.close(fd)
    job_path = Path(name)
    out_path = job_path.with_suffix(".out.json")
    err_path = job_path.with_suffix(".err")
    job_path.write_text(json.dumps({**job, "out": str(out_path)}))
    cmd = [sys.executable, "-m", "albert_edge.bench.worker", str(job_path)]
    timed_out = threading.Event()
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=err,
            env=child_env(threads),
            text=True,
            stdin=subprocess.DEVNULL,
        )

        def kill() -> None:  # a hung child prints nothing, so the deadline needs a timer
            timed_out.set()
            proc.kill()

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if line.startswith(PROGRESS_PREFIX) and on_progress is not None:
                    on_progress(json.loads(line[len(PROGRESS_PREFIX) :]))
            proc.wait()
        finally:
            timer.cancel()
            proc.stdout.close()
            if proc.poll() is None:  # interrupted (Ctrl-C): leave no orphan behind
                proc.kill()
                proc.wait()
    if timed_out.is_set():
        return {"status": "failed", "reason": f"timed out after {timeout_s:.0f} s", "shapes": []}
    if proc.returncode != 0 or not out_path.is_file():
        tail = _tail(err_path)
        return {
            "status": "failed",
            "reason": f"worker {describe_exit(proc.returncode)}" + (f": {tail}" if tail else ""),
            "shapes": [],
        }
    result: dict[str, Any] = json.loads(out_path.read_text())
    return result


class Resident:
    """A worker in ``serve`` mode: started and loaded by :meth:`start`, then timed shape by
    shape with :meth:`measure`, and stopped by :meth:`close`.

    ``timeout_s`` bounds each wait on the child (its load, each visit), not its life: a
    resident child lives through every other artifact's visits too, so a whole-life
    deadline would grow with the run. A hung child is killed, and every later call on it
    reports the failure instead of blocking the run.
    """

    def __init__(
        self, job: Mapping[str, Any], workdir: Path, *, threads: int, timeout_s: float
    ) -> None:
        fd, name = tempfile.mkstemp(prefix="serve-", suffix=".json", dir=workdir)
        os.close(fd)
        job_path = Path(name)
        self._err_path = job_path.with_suffix(".err")
        job_path.write_text(
            json.dumps({**job, "mode": "serve", "out": str(job_path.with_suffix(".out.json"))})
        )
        self._timed_out = threading.Event()
        self._timeout_s = timeout_s
        with open(self._err_path, "wb") as err:  # the child holds its own copy
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "albert_edge.bench.worker", str(job_path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=child_env(threads),
                text=True,
                bufsize=1,
            )
        self.failure: str | None = None  # why the child stopped answering, once it has

    def _kill(self) -> None:
        self._timed_out.set()
        self._proc.kill()

    def _event(self) -> dict[str, Any] | None:
        """The child's next progress event, or None once it has stopped answering."""
        assert self._proc.stdout is not None
        timer = threading.Timer(self._timeout_s, self._kill)  # this wait's deadline
        timer.start()
        try:
            for line in self._proc.stdout:  # anything a library prints is skipped
                if line.startswith(PROGRESS_PREFIX):
                    event: dict[str, Any] = json.loads(line[len(PROGRESS_PREFIX) :])
                    return event
        finally:
            timer.cancel()
        self._proc.wait()
        if self._timed_out.is_set():
            self.failure = f"timed out after {self._timeout_s:.0f} s"
        else:
            tail = _tail(self._err_path)
            self.failure = f"worker {describe_exit(self._proc.returncode)}" + (
                f": {tail}" if tail else ""
            )
        return None

    def start(self) -> dict[str, Any]:
        """Wait for the load: the worker's header (``status``, ``import_ms``, ``load_ms``,
        ``info`` ...), or a ``failed`` one if the child died first."""
        event = self._event()
        if event is None or "ready" not in event:
            return {"status": "failed", "reason": self.failure or "no ready event", "shapes": []}
        header: dict[str, Any] = event["ready"]
        return header

    def measure(self, shape: int, policy: Mapping[str, Any]) -> dict[str, Any] | None:
        """Time the job's ``shape``-th shape under ``policy``; None if the child is gone
        (:attr:`failure` says why)."""
        if self.failure is not None:
            return None
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps({"shape": shape, "policy": dict(policy)}) + "\n")
            self._proc.stdin.flush()
        except OSError:
            pass  # it died: reading says how
        event = self._event()
        if event is None or "row" not in event:
            return None
        row: dict[str, Any] = event["row"]
        return row

    def close(self) -> None:
        try:
            if self._proc.poll() is None and self._proc.stdin is not None:
                self._proc.stdin.write("quit\n")
                self._proc.stdin.close()
            self._proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait()
        finally:
            for pipe in (self._proc.stdin, self._proc.stdout):
                if pipe is not None and not pipe.closed:
                    with contextlib.suppress(OSError):  # a dead child's stdin
                        pipe.close()
