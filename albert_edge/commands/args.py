"""The argparse pieces every subcommand shares: comma-separated integer lists, thread
counts, ``-q/--quiet`` and strict JSON printing (one definition, one meaning)."""

from __future__ import annotations

import argparse
from typing import Any

from albert_edge.options import INT64_MAX, thread_count


def ints(text: str) -> tuple[int, ...]:
    """Comma-separated integers, each at least 1 and at most the largest tensor dimension."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:  # sizes, lengths and thread counts: >= 1 each
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= 1, got {text!r}")
    if max(values) > INT64_MAX:  # no tensor dimension holds more
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers <= {INT64_MAX}, got {text[:40]!r}"
        )
    return values


def thread_counts(text: str) -> tuple[int, ...]:
    """bench --threads: comma-separated counts, each within :func:`thread_count`'s cap."""
    values = ints(text)
    for v in values:
        thread_count(str(v))
    return values


def print_json(data: Any) -> None:
    """Strict JSON (no NaN/Infinity: ``null``, and ``non_finite`` says why)."""
    from albert_edge.manifest import dumps_strict

    print(dumps_strict(data, indent=2, default=str))


def add_quiet(p: argparse.ArgumentParser) -> None:
    """``-q/--quiet``: no progress on stderr (every subcommand has it)."""
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output on stderr")
