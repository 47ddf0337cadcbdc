"""Process-wide framework settings every entry point (CLI, bench worker) applies first.

Why its own module: the bench worker process needs the same settings as the CLI, and a
worker importing the CLI put the bottom layer on top of the top one.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator


def quiet_frameworks() -> None:
    """Keep transformers from importing TensorFlow (it does whenever TF is installed).

    albert-edge never uses transformers' TF classes (its TF route builds Keras layers
    itself), and importing TF costs seconds and a screen of C++ log lines per process.
    ``setdefault``: a user's explicit ``USE_TF``/``TF_CPP_MIN_LOG_LEVEL`` wins.
    """
    import logging
    import os
    import warnings

    os.environ.setdefault("USE_TF", "0")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Import-time chatter of transformers' optional torchao integration (CUDA kernels
    # that a CPU build cannot load) and of torch's pytree deprecations: not actionable.
    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=r".*LeafSpec.*", category=FutureWarning)


# Start-up lines TensorFlow, LiteRT, absl and torch write at import, whatever the log
# level: absl prints everything logged before its InitializeLog() (TF 2.21 never calls
# it) straight to file descriptor 2, so TF_CPP_MIN_LOG_LEVEL does not reach them.
NATIVE_NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|[IW]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] "
    r"|INFO: (Created|Initialized) TensorFlow Lite"
    r"|To enable the following instructions: .*rebuild TensorFlow"
)


@contextlib.contextmanager
def native_stderr_filtered(noise: re.Pattern[str] = NATIVE_NOISE) -> Iterator[None]:
    """Within the block, drop lines matching ``noise`` from file descriptor 2 (``-q``).

    Why at the descriptor and not in Python's logging: the lines come from C++ and from
    the child processes that bench starts, which inherit descriptor 2; a pipe in its
    place, read by a thread, sees them all. Every other line (errors, tracebacks) passes
    through unchanged and in order.
    """
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all: nothing to filter
        yield
        return
    # Everything after the dup sits inside the try: a stop signal during the set-up (its
    # KeyboardInterrupt can land between any two lines) must still find descriptor 2
    # restored, or the run's one-line stop message goes into a pipe nobody reads.
    thread: threading.Thread | None = None
    read_fd = -1
    try:
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, 2)
        os.close(write_fd)
        thread = threading.Thread(target=_pump, args=(read_fd, saved, noise), daemon=True)
        thread.name = "stderr-filter"
        thread.start()
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe closes once no process holds it: the pump sees EOF
        if thread is not None and (thread.ident is not None or thread.is_alive()):  # pump owns it
            thread.join(timeout=5.0)
            if not thread.is_alive():  # else a leftover child still writes: keep fd open
                os.close(saved)
        else:
            with contextlib.suppress(OSError):
                if read_fd >= 0:
                    os.close(read_fd)
                os.close(saved)


def _pump(read_fd: int, saved: int, noise: re.Pattern[str]) -> None:
    """Copy the lines of ``read_fd`` that do not match ``noise`` to ``saved``."""
    with os.fdopen(read_fd, "rb") as pipe:
        for line in pipe:  # keeps draining whatever happens: a full pipe would block
            try:
                keep = not noise.match(line.decode("utf-8", "replace"))
            except Exception:  # never lose a line to the filter itself
                keep = True
            while keep and line:
                try:
                    line = line[os.write(saved, line) :]
                except OSError:  # the real stderr is gone: drop, keep draining
                    break


# What libgomp (torch's OpenMP) accepts: positive integers, comma-separated per nesting
# level. Anything else it reports with two lines of its own per library that loads it.
_OMP_THREADS = re.compile(r"\s*[1-9]\d*\s*(,\s*[1-9]\d*\s*)*")


def check_thread_env() -> None:
    """Refuse an ``OMP_NUM_THREADS`` that OpenMP would reject, before torch or ONNX
    Runtime loads it (each prints its own ``libgomp: Invalid value`` lines and goes on
    with a thread count nobody chose)."""
    from albert_edge.errors import ConfigError

    value = os.environ.get("OMP_NUM_THREADS")
    if value is not None and not _OMP_THREADS.fullmatch(value):
        raise ConfigError(
            f"OMP_NUM_THREADS={value!r} is not a thread count; set a positive integer "
            "(e.g. OMP_NUM_THREADS=1) or unset it"
        )


def describe_resource_error(exc: BaseException) -> str | None:
    """One line for a run that the process's own limits stopped (``ulimit -v``: a library
    that cannot map its code, or ``MemoryError``; ``ulimit -n``: too many open files), naming
    the limit and the fix; None when ``exc`` is not one of those."""
    import errno
    import resource

    def limit(which: int, unit: str) -> str:
        soft = resource.getrlimit(which)[0]
        return "unlimited" if soft == resource.RLIM_INFINITY else f"{soft}{unit}"

    text = str(exc)
    if isinstance(exc, MemoryError) or (
        isinstance(exc, ImportError | OSError) and "failed to map segment" in text
    ):
        return (
            "out of memory: the process may use at most "
            f"{limit(resource.RLIMIT_AS, ' bytes')} of address space (ulimit -v); raise "
            "the limit (ulimit -v unlimited) or free memory"
        )
    if (isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE)) or (
        "Too many open files" in text  # libraries that wrap the OSError in their own
    ):
        return (
            f"too many open files: the limit is {limit(resource.RLIMIT_NOFILE, '')} "
            "(ulimit -n); raise it (e.g. ulimit -n 4096) and run again"
        )
    return None
