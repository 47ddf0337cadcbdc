"""Progress for long steps, on stderr, through one library (rich); ``--quiet`` silences it.

Why one module: converting albert-xxlarge takes minutes; a user must see which step is
running (export, graph passes, quantize, verify, TFLite conversion). Every long step
goes through :func:`step` (a named phase with its elapsed time) or :func:`track` (a
counted loop), so the look, the stream (stderr: stdout stays for ``--json``) and the
off switch are decided once, here.

On a terminal a step shows a live spinner; elsewhere (CI logs, a subprocess, stderr to a
file or a pipe) it prints one line when it starts and one when it ends, so logs still name
the step that hung, and a counted loop (:func:`track`, :class:`Counter`) also prints a line
at each tenth of its total (count, elapsed, ETA, and what ``status`` adds, e.g. the running
loss): a two-minute training epoch in a log is not silent between its start and its end.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

T = TypeVar("T")

_state = {"enabled": True}
_console: list[Console] = []


def set_enabled(enabled: bool) -> None:
    """Turn progress output on or off for this process (the CLI's ``--quiet``)."""
    _state["enabled"] = bool(enabled)


def enabled() -> bool:
    return _state["enabled"]


def console() -> Console:
    """The stderr console every progress line goes to."""
    if not _console:
        from rich.console import Console

        _console.append(Console(stderr=True, highlight=False))
    return _console[0]


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    """Announce a named step and report its duration (or its failure) when it ends."""
    if not _state["enabled"]:
        yield
        return
    con = console()
    t0 = time.perf_counter()
    ok = False
    try:
        if con.is_terminal:
            with con.status(f"[bold]{name}[/bold] …"):
                yield
        else:
            con.print(f"albert-edge: {name} …")
            yield
        ok = True
    finally:
        dt = time.perf_counter() - t0
        mark = "[green]✓[/green]" if ok else "[red]✗[/red]"
        con.print(f"albert-edge: {mark} {name} ({dt:.1f} s)")


def bar() -> Progress:
    """The one timed progress bar (name, bar, n/total, elapsed, ETA) on :func:`console`;
    ``track`` and the benchmark harness both draw with it."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console(),
        transient=False,
    )


TENTHS = 10  # outside a terminal, a counted loop says where it is this many times


class _Tenths:
    """The plain-text progress of a counted loop outside a terminal: a line at each tenth of
    ``total`` (none when the total is unknown or below two), each naming the count, the
    share done, the elapsed time and the time left at the rate so far."""

    def __init__(self, total: int | None, description: str, status: Callable[[], str] | None):
        self.total, self.description, self.status = total, description, status
        self.t0 = time.perf_counter()
        self.next_tenth = 1

    def update(self, done: int) -> None:
        total = self.total
        if not total or total < 2 or self.next_tenth >= TENTHS:
            return
        if done * TENTHS < self.next_tenth * total:
            return
        while self.next_tenth < TENTHS and done * TENTHS >= self.next_tenth * total:
            self.next_tenth += 1  # a chunk past several tenths: one line for all of them
        if done >= total:
            return  # the closing line says it
        dt = time.perf_counter() - self.t0
        eta = dt / done * (total - done)
        extra = ""
        if self.status is not None:
            with contextlib.suppress(Exception):  # a status that fails never stops the loop
                extra = f", {self.status()}"
        console().print(
            f"albert-edge: {self.description} {done}/{total} ({100 * done // total} %) "
            f"{dt:.1f} s, ETA {eta:.1f} s{extra}",
            soft_wrap=True,  # one line in a log whatever its length (rich wraps at 80 there)
        )


def track(
    items: Iterable[T],
    *,
    total: int | None = None,
    description: str = "",
    status: Callable[[], str] | None = None,
) -> Iterator[T]:
    """Iterate ``items`` with a progress bar named ``description`` (plain when disabled).

    Outside a terminal: a line when it starts, one per tenth of ``total`` (``status()``
    appended, e.g. ``"loss 0.6931"``, read after the item's work is done), one when it ends.
    """
    if not _state["enabled"]:
        yield from items
        return
    con = console()
    if not con.is_terminal:
        t0 = time.perf_counter()
        con.print(f"albert-edge: {description} …", soft_wrap=True)
        tenths = _Tenths(total, description, status)
        n = 0
        for n, item in enumerate(items, 1):
            yield item
            tenths.update(n)  # after the caller's work on the item
        con.print(
            f"albert-edge: ✓ {description} ({n} in {time.perf_counter() - t0:.1f} s)",
            soft_wrap=True,
        )
        return
    with bar() as progress_bar:
        task = progress_bar.add_task(description, total=total)
        for item in items:
            yield item
            progress_bar.advance(task)


class Counter:
    """A bar advanced by hand (``advance(n)``), for loops that move in uneven chunks."""

    def __init__(self, total: int, description: str) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.total, self.description, self.done = total, description, 0
        self._t0 = time.perf_counter()
        self._closed = not _state["enabled"]
        self._bar: Progress | None = None
        self._tenths = _Tenths(total, description, None)
        if self._closed:
            return
        con = console()
        if con.is_terminal:
            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                console=con,
            )
            self._bar.start()
            self._task = self._bar.add_task(description, total=total)
        else:
            con.print(f"albert-edge: {description} ({total}) …", soft_wrap=True)

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.advance(self._task, n)
        elif not self._closed:
            self._tenths.update(self.done)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.stop()
        else:
            console().print(
                f"albert-edge: ✓ {self.description} ({self.done}/{self.total} in "
                f"{time.perf_counter() - self._t0:.1f} s)",
                soft_wrap=True,
            )

    def __enter__(self) -> Counter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
