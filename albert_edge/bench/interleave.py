"""Interleaved rounds: every artifact resident in its own child, timed in turn.

Why: a small shared machine has slow phases (measured here 2026-11-23: for minutes at a
time, 2-thread runs went at 1-thread speed and no steal time showed). Timed one artifact
after another, such a phase lands on whichever artifact is running and makes it look up to
1.6x slower than its neighbours; one fresh child per artifact and round still puts a whole
sweep of one artifact (tens of seconds) inside one phase. Here each artifact loads once in
its own child (:class:`~albert_edge.bench.child.Resident`), and the parent visits them
shape by shape, the order rotating from visit to visit, so that a phase of a few seconds
or more hits every artifact alike and the ratios between rows stay true.

Why a gap between visits: every runtime's thread pool spins for a while after a run; on
few cores the previous artifact's spinning threads would slow the next one down.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from albert_edge.bench.child import Resident
from albert_edge.bench.worker import summarize

GAP_S = 0.05


def _pool(rows: list[dict[str, Any]], keep_samples: bool) -> dict[str, Any]:
    """One row from a shape's visits: the first visit's fields (first inference, peak
    memory: visits run shapes in ascending size in the first round), the pooled samples'
    statistics. A visit that did not time it decides the row."""
    first = dict(rows[0])
    bad = next((r for r in rows if r.get("status") != "ok"), None)
    if bad is not None:
        first.update(status=bad["status"], reason=bad.get("reason"))
        for key in ("latency_ms", "samples_ms", "first_inference_ms", "warmup_runs"):
            first.pop(key, None)
        return first
    pool = [ms for r in rows for ms in r["samples_ms"]]
    first["latency_ms"] = summarize(pool)
    first["warmup_runs"] = sum(int(r.get("warmup_runs") or 0) for r in rows)
    if keep_samples:
        first["samples_ms"] = pool
    else:
        first.pop("samples_ms", None)
    return first


def measure_interleaved(
    jobs: Sequence[tuple[Mapping[str, Any], int]],
    workdir: Path,
    *,
    rounds: int,
    policy: Mapping[str, Any],
    timeout_s: float,
    keep_samples: bool = False,
    gap_s: float = GAP_S,
    on_visit: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Time every job's shapes in ``rounds`` interleaved passes under ``policy`` (per
    visit); return one worker result per job, in the worker's own format.

    ``jobs`` are (worker bench spec, threads) pairs. Children are loaded one at a time
    (so ``load_ms`` is not contended), then each round visits the shapes in ascending
    order and, for each shape, every job that has it, the job order rotating by one from
    visit to visit. ``on_visit(job_index)`` is called after each visit (progress).
    """
    children: list[Resident | None] = []
    results: list[dict[str, Any]] = []
    shapes = [[(s["batch"], s["seq_len"]) for s in spec["shapes"]] for spec, _ in jobs]
    try:
        for spec, threads in jobs:
            started = Resident(
                {**spec, "keep_samples": True}, workdir, threads=threads, timeout_s=timeout_s
            )
            children.append(started)
            header = started.start()
            results.append({**header, "shapes": []})
            if header.get("status") != "ok":
                started.close()
                children[-1] = None
        visits = _visit(children, shapes, rounds, policy, gap_s, on_visit)
        for i, c in enumerate(children):
            if c is not None:
                results[i]["shapes"] += _pooled(visits, i, shapes[i], rounds, c, keep_samples)
    finally:
        for c in children:
            if c is not None:
                c.close()
    return results


def _visit(
    children: Sequence[Resident | None],
    shapes: Sequence[Sequence[tuple[int, int]]],
    rounds: int,
    policy: Mapping[str, Any],
    gap_s: float,
    on_visit: Callable[[int], None] | None,
) -> dict[tuple[int, tuple[int, int]], list[dict[str, Any]]]:
    """The ``rounds`` passes: each visits the shapes in ascending order and, for each
    shape, every live child that has it, the order rotating by one from visit to visit.
    Returns every visit's row keyed (child index, shape)."""
    order = sorted({s for job in shapes for s in job}, key=lambda s: (s[0] * s[1], s))
    visits: dict[tuple[int, tuple[int, int]], list[dict[str, Any]]] = {}
    turn = 0
    for _ in range(rounds):
        for shape in order:
            live = [i for i, c in enumerate(children) if c is not None and shape in shapes[i]]
            if not live:
                continue
            shift = turn % len(live)
            turn += 1
            for i in live[shift:] + live[:shift]:
                c = children[i]
                if c is None or c.failure is not None:
                    continue
                time.sleep(gap_s)
                row = c.measure(list(shapes[i]).index(shape), policy)
                if row is not None:
                    visits.setdefault((i, shape), []).append(row)
                if on_visit is not None:
                    on_visit(i)
    return visits


def _pooled(
    visits: Mapping[tuple[int, tuple[int, int]], list[dict[str, Any]]],
    i: int,
    shapes: Sequence[tuple[int, int]],
    rounds: int,
    child: Resident,
    keep_samples: bool,
) -> list[dict[str, Any]]:
    """Child ``i``'s rows: each shape's visits pooled, or ``failed`` when the child died
    on the way (no partial statistics)."""
    rows = []
    for shape in shapes:
        seen = visits.get((i, shape), [])
        if len(seen) == rounds:
            rows.append(_pool(seen, keep_samples))
        else:
            rows.append(
                {
                    "batch": shape[0],
                    "seq_len": shape[1],
                    "status": "failed",
                    "reason": child.failure or "the worker stopped answering",
                }
            )
    return rows
