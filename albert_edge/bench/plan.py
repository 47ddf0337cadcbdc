"""What one :func:`albert_edge.bench.bench` call measures, settled before anything runs.

The arguments checked (positive shapes, ``--rounds`` that can be pooled, activations
that fit in memory), the run policy, one :class:`Job` per (target, backend, threads),
the token files every backend of a target reads, and the worker spec of a job. Nothing
here starts a child or times anything: :mod:`albert_edge.bench.harness` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from albert_edge.bench.inputs import choices_of, make_feeds
from albert_edge.bench.targets import (
    BACKENDS,
    Backend,
    Target,
    gpu_unavailable_reason,
    pick_backends,
    resolve_target,
)
from albert_edge.errors import AlbertEdgeError, BenchmarkError

# Adaptive run policy (see benchmarks/README.md, "Stability"): warm up >= 3 runs and
# >= 0.5 s, then time >= 20 runs and >= 3 s; stop at 2000 runs, or after 60 s once 5
# runs are in (a large model at a long sequence).
DEFAULT_POLICY: dict[str, Any] = {
    "warmup": None,
    "warmup_min_runs": 3,
    "warmup_min_s": 0.5,
    "warmup_max_s": 20.0,
    "runs": None,
    "min_runs": 20,
    "min_time_s": 3.0,
    "max_runs": 2000,
    "max_time_s": 60.0,
    "floor_runs": 5,
}


@dataclass
class Job:
    """One child's work: ``target`` on ``backend`` at ``threads``, every shape in turn;
    ``skip_reason`` set when the backend cannot run here (the rows say why)."""

    target: Target
    backend: Backend
    threads: int
    shapes: list[tuple[int, int]]  # (batch, seq) ascending by batch*seq
    skip_reason: str | None = None


def as_target(t: str | Path | Target | None) -> Target:
    """``t`` as a resolved :class:`Target` (None: the embedded SST-2 checkpoint)."""
    return t if isinstance(t, Target) else resolve_target(t)


def check_positive(name: str, values: Iterable[int]) -> tuple[int, ...]:
    """``values`` of flag ``--name`` as ints, refused in one line unless all positive."""
    vals = tuple(int(v) for v in values)
    if not vals or any(v <= 0 for v in vals):
        raise BenchmarkError(f"--{name} needs positive integers, got {vals}")
    return vals


def check_rounds(rounds: int, runs: int | None, rows_path: str | Path | None) -> None:
    """Refuse the ``--rounds`` combinations that cannot be pooled, before anything runs."""
    if rounds < 1:
        raise BenchmarkError(f"--rounds must be positive, got {rounds}")
    if rounds > 1 and runs is None:
        raise BenchmarkError("--rounds needs a fixed --runs (the adaptive policy decides per run)")
    if rounds > 1 and rows_path is not None:
        raise BenchmarkError("--rounds cannot resume from a row log; drop one of the two")


def policies(
    runs: int | None, warmup: int | None, policy: Mapping[str, Any] | None, rounds: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run policy the report records, and one interleaved visit's share of it.

    Why two: with ``rounds`` > 1 each visit times ``ceil(runs / rounds)`` runs after the
    same warm-up, and the report must say how many runs were pooled in all."""
    if runs is not None and runs <= 0:
        raise BenchmarkError(f"--runs must be positive, got {runs}")
    if warmup is not None and warmup < 0:
        raise BenchmarkError(f"--warmup must be >= 0, got {warmup}")
    pol = {**DEFAULT_POLICY, **(policy or {})}
    if runs is not None:
        pol["runs"] = runs
    if warmup is not None:
        pol["warmup"] = warmup
    # one visit of an interleaved round: its share of the runs, the same warm-up
    visit = dict(pol, runs=max(1, -(-runs // rounds))) if runs is not None else pol
    if rounds > 1:
        pol["runs"] = visit["runs"] * rounds
    return pol, visit


def check_memory(
    targets: Sequence[Target], batches: Sequence[int], seq_lens: Sequence[int]
) -> None:
    """Refuse, before anything is tokenized or timed, a batch × length whose activations
    cannot fit in the memory available now, in one line naming the batch, length and GiB.

    Why: ``--batch 1000000000`` died of a MemoryError traceback while tokenizing (or, at
    a batch the parent could still tokenize, would have grown a child until the kernel
    killed it). The bound is verify's (:func:`albert_edge.grid.grid_memory_bytes`, a
    lower estimate read from the config), for one model: verify holds the PyTorch
    reference beside the artifact, a benchmark child holds only the artifact. Lengths past
    the model's positions are skipped rows, never run, so they are not bounded here; a
    target without a config.json cannot be bounded and is let through.
    """
    import psutil

    from albert_edge.grid import grid_memory_bytes

    available = int(psutil.virtual_memory().available)
    for t in targets:
        if not t.config:
            continue
        max_pos = max_positions(t)
        runnable = [s for s in seq_lens if max_pos is None or s <= max_pos]
        if not runnable:
            continue
        batch, seq = max(batches), max(runnable)
        config = SimpleNamespace(**t.config)
        need = grid_memory_bytes(config, batch * choices_of(t), seq, models=1)
        if need > available:
            raise BenchmarkError(
                f"{t.path}: batch {batch} at sequence length {seq} needs at least "
                f"{need / 2**30:,.1f} GiB of memory for activations, "
                f"{available / 2**30:.1f} GiB is available; use a smaller --batch or --seq-lens"
            )


def plan_jobs(
    targets: Sequence[Target],
    backends: Sequence[str] | None,
    threads: Sequence[int],
    shapes: list[tuple[int, int]],
) -> list[Job]:
    """One job per (target, backend, threads): each becomes one child process. A GPU
    backend runs once (threads do not apply to it); one that cannot run here is a job
    with its skip reason, so the report says why instead of leaving the row out."""
    requested = list(backends) if backends else None
    jobs: list[Job] = []
    for t in targets:
        for name in pick_backends(t, requested):
            b = BACKENDS[name]
            reason = gpu_unavailable_reason(b)
            for th in threads if b.device == "cpu" else threads[:1]:
                jobs.append(Job(t, b, th, shapes, reason))
    return jobs


def write_feeds(
    targets: Sequence[Target],
    shapes: Sequence[tuple[int, int]],
    sentences: Sequence[str],
    work: Path,
) -> dict[tuple[int, int, int], str]:
    """Tokenize once per target and shape into ``work``: every backend then reads the
    same tokens from the same file. Keyed (target index, batch, seq)."""
    import numpy as np

    feeds: dict[tuple[int, int, int], str] = {}
    for ti, t in enumerate(targets):
        max_pos = max_positions(t)
        for batch, seq in shapes:
            if max_pos is not None and seq > max_pos:
                continue  # a skipped row, never run: its tokens would only cost memory
            path = work / f"feeds-{ti}-b{batch}-s{seq}.npz"
            np.savez(path, **make_feeds(t, sentences, batch, seq))  # type: ignore[arg-type]
            feeds[(ti, batch, seq)] = str(path)
    return feeds


def job_spec(
    job: Job,
    todo: Sequence[tuple[int, int]],
    feeds: Mapping[tuple[int, int, int], str],
    ti: int,
    policy: Mapping[str, Any],
    keep_samples: bool,
) -> dict[str, Any]:
    """The worker job that times ``todo`` of ``job``."""
    return {
        "mode": "bench",
        "backend": job.backend.name,
        "format": job.target.format,
        "device": job.backend.device,
        "runner_backend": job.backend.runner_backend,
        "target_path": str(job.target.model_file or job.target.path),
        "threads": job.threads,
        "shapes": [{"batch": b, "seq_len": s, "feeds": feeds[(ti, b, s)]} for b, s in todo],
        "policy": dict(policy),
        "keep_samples": keep_samples,
    }


def max_positions(target: Target) -> int | None:
    """The model's position count from its config.json (None: unknown). Longer lengths
    are skipped rows: never tokenized, bounded or timed."""
    max_pos = (target.config or {}).get("max_position_embeddings")
    return max_pos if isinstance(max_pos, int) else None


def too_long(job: Job) -> tuple[list[tuple[int, int]], list[dict[str, Any]]]:
    """The shapes ``job`` can time, and skipped rows for those past the model's positions."""
    max_pos = max_positions(job.target)
    todo, skipped = [], []
    for b, s in job.shapes:
        if max_pos is not None and s > max_pos:
            skipped.append(
                {
                    "batch": b,
                    "seq_len": s,
                    "status": "skipped",
                    "reason": f"longer than the model's {max_pos} positions",
                }
            )
        else:
            todo.append((b, s))
    return todo, skipped


def run_length(target: Target, seq: int) -> int:
    """The sequence length ``target`` really computes for ``seq`` tokens.

    A TFLite artifact with fixed-length signatures pads to the smallest bucket >= ``seq``;
    its rows count FLOPs at that length (``effective_seq_len``), so the roofline must be
    measured on GEMMs of that length too. Measured only at the requested length, the
    ceiling came from small-M GEMMs (far below the machine's best) while the row's
    FLOPs were the bucket's: a "181 %" fraction on a 128-token bucket row asked for 8.
    """
    if target.format != "tflite" or target.model_file is None:
        return seq
    try:
        from albert_edge.manifest import read_manifest

        signatures = read_manifest(target.model_file).get("signatures") or []
        buckets = sorted(int(s["seq_len"]) for s in signatures if "seq_len" in s)
    except (AlbertEdgeError, TypeError, ValueError, KeyError):
        return seq
    return next((b for b in buckets if b >= seq), seq)
