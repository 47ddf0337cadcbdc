"""Stop signals (SIGINT, SIGTERM, SIGHUP): held while a name is created, raised as
:class:`~albert_edge.errors.Interrupted` where the run is, reported in one line.

A stop signal that arrives while a temp directory or lock is being created is held until
the name is under a ``finally`` that removes it; one that arrives mid-import waits until
the import is done. The CLI and ``python -m albert_edge.train`` run under
:func:`signals_interrupt`; library callers keep Python's own SIGINT behaviour.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from typing import Any

from albert_edge.errors import Interrupted

# Held: a signal between ``mkdir`` and ``try:`` would leave the name behind (a SIGTERM
# sent as the lock appeared left ``.OUT.tmp-<pid>-*``). The CLI's handlers call
# :func:`stop_or_defer`.
_held = {"depth": 0, "pending": 0, "startup": 0, "recheck": 0}
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# The handlers that were in place before :func:`hold_stop_signals` (restored on exit).
_saved: dict[int, object] = {}
# How soon a signal that arrived mid-import is looked at again (seconds).
_IMPORT_RECHECK_S = 0.02


def stop_or_defer(signum: int) -> None:
    """The stop signals' handler body: raise :class:`Interrupted` now, or, inside
    :func:`signals_held`, when the held section ends."""
    if _held["depth"]:
        _held["pending"] = _held["pending"] or signum
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):  # one message, one unwinding
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


def _importing(frame: object) -> bool:
    """Whether the interrupted code runs inside an ``import`` (the import machinery's
    frames are on the stack). An exception raised there leaves a half-initialised module
    in ``sys.modules``: torch, half imported, then fails the clean-up's own imports with
    errors that name neither the signal nor the run (a RecursionError was seen)."""
    f: Any = frame
    while f is not None:
        if f.f_code.co_filename.startswith("<frozen importlib"):
            return True
        f = f.f_back
    return False


def _resend(signum: int) -> None:
    _held["recheck"] = 0
    os.kill(os.getpid(), signum)


def _on_stop(signum: int, frame: object) -> None:
    """The stop handler: mid-import, the signal is kept and looked at again shortly
    (re-sent to this process until the import has finished); otherwise
    :func:`stop_or_defer`."""
    if not _held["depth"] and _importing(frame):
        _held["pending"] = _held["pending"] or signum
        if not _held["recheck"]:  # one re-send in flight at a time
            import threading

            _held["recheck"] = 1
            timer = threading.Timer(_IMPORT_RECHECK_S, _resend, (signum,))
            timer.daemon = True
            timer.start()
        return
    if _held["pending"] and not _held["depth"]:
        signum, _held["pending"] = _held["pending"], 0
    stop_or_defer(signum)


def hold_stop_signals() -> None:
    """First thing an entry point does (before its own imports): SIGINT, SIGTERM and SIGHUP
    get the stop handler and are held until :func:`release_stop_signals`, so that a signal
    during start-up ends the run with the same one line and exit status as one during the
    work, never half-way through an import. A signal the caller ignores (``nohup``, a
    background job's SIGINT) stays ignored. Idempotent."""
    if _held["startup"]:
        return
    for sig in STOP_SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread
            previous = signal.getsignal(sig)
            if previous != signal.SIG_IGN and previous is not _on_stop:
                _saved[int(sig)] = previous
                signal.signal(sig, _on_stop)
    _held["startup"] = 1
    _held["depth"] += 1


def release_stop_signals() -> None:
    """The end of start-up: from here a stop signal raises :class:`Interrupted` where the
    run is; one that came during start-up is raised now (call it inside the ``try`` that
    reports it)."""
    if _held["startup"] != 1:
        return
    _held["startup"] = 2
    _held["depth"] -= 1
    if not _held["depth"] and _held["pending"]:
        signum, _held["pending"] = _held["pending"], 0
        stop_or_defer(signum)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold stop signals for a short section (creating a name and handing it to its
    clean-up); one that came meanwhile is raised at the end, where the caller's ``try``
    already covers the name."""
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
        if not _held["depth"] and _held["pending"]:
            signum, _held["pending"] = _held["pending"], 0
            stop_or_defer(signum)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP stop a run as Ctrl-C does: all three raise
    :class:`Interrupted` (a ``KeyboardInterrupt``), so every ``finally`` removes its temp
    directory, lock and scratch and kills bench children; one that arrives while such a
    name is being created waits until its clean-up covers it (:func:`signals_held`), and
    one that arrives mid-import waits until the import is done. A signal the caller
    ignores stays ignored; repeated SIGTERM/SIGHUP during the clean-up are ignored. The
    CLI and ``python -m albert_edge.train`` both run under it.

    Signals are held from entry (or from an earlier :func:`hold_stop_signals`) until the
    body calls :func:`release_stop_signals` inside the ``try`` that reports them."""
    hold_stop_signals()
    try:
        yield
    finally:
        if _held["startup"] == 1:  # never released: the body failed before its try
            _held["depth"] -= 1
        _held["startup"] = 0
        _held["pending"] = 0
        for sig, previous in _saved.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(sig, previous)  # type: ignore[arg-type]
        _saved.clear()


def report_stopped(prog: str, exc: KeyboardInterrupt) -> int:
    """The one line a stopped run prints (``prog``: ``albert-edge convert``, ...) and its
    exit status, 128 + the signal: the same for the CLI and ``python -m albert_edge.train``."""
    import sys

    signum = exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
    with contextlib.suppress(OSError):  # SIGHUP: the terminal may be gone
        print(
            f"{prog}: stopped by {signal.Signals(signum).name}; temp files and lock removed, "
            "nothing half-written (the output is as it was, or complete)",
            file=sys.stderr,
        )
    return 128 + signum
