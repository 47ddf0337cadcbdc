"""The fault-injection machinery, in one place: the fault tests (tests/faults/) and the
benchmark that runs the same trials at scale (benchmarks/fault_injection.py) both import it,
so a trial means the same thing in CI and in the published figures.

What a trial judges, and how:

* **inputs lost**: the sha256 of every input file differs afterwards (:func:`tree_sums`);
* **half-written**: the output exists but is not a complete albert-edge artifact (sealed
  manifest, every file matching its sha256, no file the manifest does not list), or an
  artifact that ``--overwrite`` was replacing is gone (:func:`complete_artifact`);
* **leftovers**: temp / old / lock names beside the output (:func:`names_left`) or anything
  in the run's private ``TMPDIR`` once the *next* run has run: a kill -9 may leave them,
  the next run must clean them;
* **tracebacks**: ``Traceback`` on stderr; a refusal must be one line
  (:func:`one_line_error`; TensorFlow's native log lines are not ours and not counted).

A kill -9 trial (:func:`kill_trial`) counts as a kill only when SIGKILL ended a running
process: ``poll()`` is None right before the signal and the exit status is -SIGKILL (a
process that exited between the two reports its own status, not -9). Delays are drawn
inside the command's running window, measured by :func:`calibrate`, not guessed.

The same trial with SIGTERM or SIGHUP (``sig``; issue 26) counts when the signal ended a
running process: exit status 128 + N (albert-edge's handler: one line, its own clean-up)
or -N (the signal came before the handler was installed, at interpreter start-up, when
nothing is written yet). Stricter than kill -9: the run must clean up after itself, so
anything it leaves right after the signal is a leftover, and a 128 + N exit must say so
in exactly one line.

Not a test module (no ``test_`` prefix): plain functions, no pytest import, so the
benchmark can use it without pytest.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "albert_edge" / "models" / "sst2-albert-tiny"
_QUIET = ("convert", "quantize", "verify", "bench", "train")
_NATIVE_LOG = re.compile(r"^(WARNING: All log messages before absl|[IWEF]\d{4} |INFO: )")


# --- running the CLI ----------------------------------------------------------------------


def cli_env(tmpdir: Path | None = None) -> dict[str, str]:
    """The child's environment: this checkout's albert_edge, one thread (the machine is
    shared), and optionally a private ``TMPDIR`` so leftovers are this run's alone."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return env


def cli_argv(*args: str, user: int | None = None) -> list[str]:
    """``python -m albert_edge.cli ARGS`` (``--quiet`` where the command has it: progress
    lines are not error lines), optionally as another user (``setpriv``, root only)."""
    if args and args[0] in _QUIET:
        args = (*args, "--quiet")
    cmd = [sys.executable, "-m", "albert_edge.cli", *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return cmd


def run_cli(
    *args: str, timeout: float = 600, user: int | None = None, tmpdir: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess (from ``/``: no path may depend on the cwd)."""
    return subprocess.run(
        cli_argv(*args, user=user),
        capture_output=True,
        text=True,
        env=cli_env(tmpdir),
        timeout=timeout,
        cwd="/",
    )


def error_lines(stderr: str) -> list[str]:
    """stderr without TensorFlow's native (absl/glog) log lines, which the TFLite
    converter prints from C++ before any Python code can silence them."""
    return [ln for ln in stderr.strip().splitlines() if ln and not _NATIVE_LOG.match(ln)]


def one_line_error(r: subprocess.CompletedProcess[str]) -> bool:
    """Failed, with exactly one line of our own on stderr and no traceback."""
    return r.returncode != 0 and "Traceback" not in r.stderr and len(error_lines(r.stderr)) == 1


# --- judging the filesystem ---------------------------------------------------------------


def tree_sums(path: Path) -> dict[str, str]:
    """sha256 of every file under ``path`` (relative POSIX path -> hex)."""
    out = {}
    for p in sorted(path.rglob("*")):
        if p.is_file():
            out[p.relative_to(path).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def complete_artifact(path: Path) -> bool:
    """A finished albert-edge artifact: sealed manifest, every recorded file intact, and no
    file it does not record (a half-copied extra file would otherwise pass)."""
    from albert_edge.errors import AlbertEdgeError
    from albert_edge.io import is_albert_edge_artifact
    from albert_edge.manifest import check_files, load_manifest

    try:
        check_files(path, load_manifest(path))
    except AlbertEdgeError:
        return False
    return is_albert_edge_artifact(path)


def names_left(parent: Path, out_name: str) -> list[str]:
    """albert-edge's temp, old and lock names for output ``out_name`` in ``parent``."""
    pat = re.compile(rf"^\.{re.escape(out_name)}\.(tmp|old|lock)")
    return sorted(p.name for p in parent.iterdir() if pat.match(p.name))


def dir_left(tmpdir: Path) -> list[str]:
    """Everything in a private TMPDIR (nothing of ours runs: it must be empty)."""
    return sorted(p.name for p in tmpdir.iterdir()) if tmpdir.is_dir() else []


class MountUnavailable(RuntimeError):
    """A tmpfs cannot be mounted here (not root, or no mount namespace)."""


@contextlib.contextmanager
def tmpfs(where: Path, size: str, ro: bool = False) -> Iterator[Path]:
    """A small tmpfs at ``where`` (disk full and read-only cases); unmounted afterwards."""
    where.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if ro else "")
    try:
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)],
            capture_output=True,
            text=True,
        )
    except FileNotFoundError as exc:
        raise MountUnavailable(str(exc)) from None
    if r.returncode:
        raise MountUnavailable(r.stderr.strip() or f"mount exited {r.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False, capture_output=True)


# --- kill -9 ------------------------------------------------------------------------------


@dataclass
class KillCommand:
    """One command to kill: how to run it into ``out``, what it reads, and (for the
    ``--overwrite`` trials) the previous artifact of its kind that it replaces."""

    name: str
    argv: Callable[[Path], list[str]]  # CLI args writing to the given output (no --overwrite)
    inputs: list[Path]
    previous: Path
    durations: list[float] = field(default_factory=list)
    # what a finished output of this command is (train writes a checkpoint, not an artifact)
    complete: Callable[[Path], bool] = complete_artifact

    def estimate(self) -> float:
        """The running window: median of the latest uninterrupted runs (the machine is
        shared, so the window follows the load instead of a figure measured once)."""
        return statistics.median(self.durations[-5:])


def _timed_run(args: list[str], tmpdir: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.monotonic()
    r = subprocess.run(
        cli_argv(*args), capture_output=True, text=True, env=cli_env(tmpdir), cwd="/"
    )
    return time.monotonic() - t0, r


def calibrate(cmd: KillCommand, work: Path, tmpdir: Path, runs: int = 3) -> list[float]:
    """Run ``cmd`` uninterrupted ``runs`` times; its wall times are the kill window."""
    for i in range(runs):
        out = work / f"calib-{cmd.name}-{i}"
        seconds, r = _timed_run(cmd.argv(out), tmpdir)
        if r.returncode or not cmd.complete(out):
            raise RuntimeError(f"calibration run of {cmd.name} failed: {r.stderr.strip()}")
        cmd.durations.append(seconds)
        shutil.rmtree(out)
    return cmd.durations


@dataclass
class KillResult:
    command: str
    overwrite: bool
    fraction: float
    delay_s: float
    killed: bool  # SIGKILL ended a running process
    exited_before: bool  # the command had finished before the kill was due
    returncode: int | None
    inputs_lost: bool
    half_written: bool
    tracebacks: bool
    leftovers: bool
    next_run_failed: bool
    output_after_kill: str  # absent | previous | new | damaged
    left_by_kill: list[str]
    left_after_next_run: list[str]
    next_run_s: float
    next_run_error: str = ""
    signal: str = "SIGKILL"
    message_ok: bool = True  # SIGTERM/SIGHUP handled (128 + N): exactly one line, it says so

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def kill_trial(
    cmd: KillCommand,
    out: Path,
    fraction: float,
    *,
    overwrite: bool,
    tmpdir: Path,
    sig: signal.Signals = signal.SIGKILL,
) -> KillResult:
    """Start ``cmd`` into ``out``, SIGKILL it at ``fraction`` of its running window, judge
    what is on disk, then run it again uninterrupted: it must succeed and leave nothing.

    With ``overwrite``, ``out`` first holds a copy of the previous artifact, which must be
    intact (and verify its sha256s) or replaced by a complete new one, never damaged.
    """
    tmpdir.mkdir(exist_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    old_sums = None
    if overwrite:
        shutil.copytree(cmd.previous, out)
        old_sums = tree_sums(out)
    in_sums = {p: tree_sums(p) if p.is_dir() else {"": _sha(p)} for p in cmd.inputs}
    args = [*cmd.argv(out), *(["--overwrite"] if overwrite else [])]
    delay = fraction * cmd.estimate()
    with tempfile.TemporaryFile("w+") as err:  # ours, not in the child's TMPDIR
        proc = subprocess.Popen(
            cli_argv(*args),
            env=cli_env(tmpdir),
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            cwd="/",
        )
        sent = False
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            if proc.poll() is None:
                os.kill(proc.pid, sig)
                sent = True
        proc.wait()
        err.seek(0)
        stderr = err.read()
    killed = sent and proc.returncode in (-sig, 128 + sig)
    message_ok = proc.returncode != 128 + sig or (
        f"stopped by {sig.name}" in stderr and len(error_lines(stderr)) == 1
    )
    lost = any(
        (tree_sums(p) if p.is_dir() else {"": _sha(p)}) != sums for p, sums in in_sums.items()
    )
    if out.exists():
        complete = cmd.complete(out)
        if not complete:
            state = "damaged"
        elif old_sums is not None and tree_sums(out) == old_sums:
            state = "previous"
        else:
            state = "new"
        half = not complete
    else:
        state = "absent"
        half = old_sums is not None  # the artifact --overwrite was replacing is gone
    left_by_kill = names_left(out.parent, out.name) + dir_left(tmpdir)
    # a handled signal cleans up itself; only kill -9 may leave work for the next run
    left_by_signal = bool(left_by_kill) and sig != signal.SIGKILL
    # the next run: the same command, uninterrupted; it cleans what the kill left
    seconds, r = _timed_run([*cmd.argv(out), "--overwrite"], tmpdir)
    next_failed = r.returncode != 0 or not cmd.complete(out)
    if r.returncode == 0:
        cmd.durations.append(seconds)
    left_after = names_left(out.parent, out.name) + dir_left(tmpdir)
    lost = lost or any(
        (tree_sums(p) if p.is_dir() else {"": _sha(p)}) != sums for p, sums in in_sums.items()
    )
    shutil.rmtree(out, ignore_errors=True)
    return KillResult(
        command=cmd.name,
        overwrite=overwrite,
        fraction=round(fraction, 4),
        delay_s=round(delay, 3),
        killed=killed,
        # died of something else after the signal (e.g. SIGABRT: a native library aborted
        # when the signal interrupted it) is neither a handled stop nor an early exit
        exited_before=not killed and not (sent and (proc.returncode or 0) < 0),
        returncode=proc.returncode,
        inputs_lost=lost,
        half_written=half,
        tracebacks="Traceback" in stderr or "Traceback" in r.stderr,
        leftovers=bool(left_after) or left_by_signal,
        next_run_failed=next_failed,
        output_after_kill=state,
        left_by_kill=left_by_kill,
        left_after_next_run=left_after,
        next_run_s=round(seconds, 2),
        next_run_error="" if r.returncode == 0 else (error_lines(r.stderr) or [""])[-1][:200],
        signal=sig.name,
        message_ok=message_ok,
    )


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


# --- concurrency --------------------------------------------------------------------------


def concurrent_converts(
    outs: list[Path], *, overwrite: bool, tmpdir: Path | None = None
) -> list[tuple[int, str]]:
    """Start one ``convert`` per entry of ``outs`` at once (repeat a path to race writers
    on one output); return each one's exit status and stderr."""
    extra = ["--overwrite"] if overwrite else []
    procs = [
        subprocess.Popen(
            cli_argv("convert", "-o", str(o), "--no-verify", *extra),
            env=cli_env(tmpdir),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd="/",
        )
        for o in outs
    ]
    return [(p.wait(), p.stderr.read() if p.stderr else "") for p in procs]


def refused_as_busy(rc: int, stderr: str) -> bool:
    """A losing concurrent writer: one line saying another process writes the output."""
    return rc != 0 and "writing this output" in stderr and len(error_lines(stderr)) == 1
