"""W1 and W2 of every finalist as users meet them: one row at a time over report rows.

A dynamic-exit artifact's latency is a distribution over inputs (a row that stops at the
first exit costs a fraction of one that runs every layer), so one sentence timed many
times says little of it. Every finalist, fixed depth or dynamic exit alike, is run on the
same :data:`TIMING_ROWS` report rows (all where fewer): W1 each row padded to
``--seq-len`` (what a fixed-shape deployment feeds), W2 each row at its own length. Each
(row, artifact) is timed in ``rounds`` interleaved rounds (row by row, the artifacts in a
rotating order, so a slow spell of a shared machine falls on all of them) and its fastest
round kept: the row's cost without the machine's noise. The mean over rows is what the
objective compares; p50 and p95 sit beside it in the report.

A fixed-depth artifact at W1 runs the same shapes and operators whatever the row, so its
per-row figures differ only by noise; it is timed on the same rows all the same, so every
candidate's mean is taken the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

TIMING_ROWS = 128  # report rows each finalist is timed on (at least 100 where available)
ROUNDS = 3
WARMUP = 3


def _padded(feeds: Mapping[str, Any], width: int, pad_id: int) -> dict[str, Any]:
    """``feeds`` (batch 1) right-padded to ``width`` tokens: ids with ``pad_id``, the
    attention mask and token types with 0."""
    import numpy as np

    out = {}
    for name, x in feeds.items():
        n = x.shape[-1]
        if n >= width:
            out[name] = x[..., :width]
            continue
        fill = pad_id if name == "input_ids" else 0
        pad = np.full((*x.shape[:-1], width - n), fill, dtype=x.dtype)
        out[name] = np.concatenate([x, pad], axis=-1)
    return out


def _feeds(path: Path, runner: Any, rows: Any, seq_len: int, count: int) -> dict[str, list[Any]]:
    """(W1, W2) feeds of the first ``count`` features of ``rows``, tokenized by the
    artifact's own tokenizer (a trimmed vocabulary has its own ids)."""
    from albert_edge.evaluate import artifact_tokenizer
    from albert_edge.tasks import encode

    width = min(seq_len, int(runner.max_seq_len))
    feats = encode(rows, artifact_tokenizer(path), width)
    names = set(runner.input_names)
    w1, w2 = [], []
    for i in range(min(count, len(feats.input_ids) // max(1, feats.rows))):
        f = {k: v for k, v in feats.feeds([i]).items() if k in names}
        w2.append(f)
        w1.append(_padded(f, width, int(feats.pad_id)))
    return {"w1": w1, "w2": w2}


def stats(ms: list[float]) -> dict[str, float]:
    import numpy as np

    a = np.asarray(ms, dtype=np.float64)
    return {
        "mean": float(a.mean()),
        "p50": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
        "min": float(a.min()),
        "max": float(a.max()),
        "rows": int(a.size),
    }


def time_rows(
    paths: Mapping[str, Path],
    rows: Any,
    seq_len: int,
    *,
    seconds: float,
    count: int = TIMING_ROWS,
    rounds: int = ROUNDS,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Per-row W1 and W2 of every artifact in ``paths`` (one thread each, this process)
    on the first ``count`` rows of ``rows``: ``{"by_key": {key: {"w1": stats, "w2":
    stats}}, "rounds": r, "rows": n}``. ``seconds``: the time it may take; fewer rounds
    (at least one) where the first pass says all would not fit."""
    from albert_edge.early_exit.runner import open_any_runner

    runners = {k: open_any_runner(p, threads=1) for k, p in paths.items()}
    try:
        feeds = {k: _feeds(paths[k], r, rows, seq_len, count) for k, r in runners.items()}
        n = min(len(f["w1"]) for f in feeds.values())
        keys = list(paths)
        one = {}
        for k in keys:  # warm each session, and what one row costs
            for _ in range(WARMUP):
                runners[k].run(feeds[k]["w1"][0])
            t0 = time.perf_counter()
            runners[k].run(feeds[k]["w1"][0])
            one[k] = time.perf_counter() - t0
        per_round = 2 * n * sum(one.values())  # W1 and W2 (W2 at most W1's width)
        fit = max(1, min(rounds, int(seconds // max(per_round, 1e-9))))
        if progress is not None:
            progress(
                f"timing {len(keys)} files on {n} report rows each (W1 at {seq_len} tokens and "
                f"W2 at each row's length), {fit} interleaved rounds, one thread, ~"
                f"{per_round * fit:.0f} s"
            )
        best: dict[str, dict[str, list[float]]] = {
            k: {w: [float("inf")] * n for w in ("w1", "w2")} for k in keys
        }
        for r in range(fit):
            for i in range(n):
                for w in ("w1", "w2"):
                    for j in range(len(keys)):
                        k = keys[(i + j + r) % len(keys)]
                        t0 = time.perf_counter()
                        runners[k].run(feeds[k][w][i])
                        ms = 1000.0 * (time.perf_counter() - t0)
                        if ms < best[k][w][i]:
                            best[k][w][i] = ms
        by_key = {k: {w: stats(best[k][w]) for w in ("w1", "w2")} for k in keys}
        return {"by_key": by_key, "rounds": fit, "rows": n}
    finally:
        for r in runners.values():
            close = getattr(r, "close", None)
            if close is not None:
                close()
