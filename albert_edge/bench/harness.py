"""The benchmark harness: targets × backends × shapes, each measured in a child process.

The parent never imports a runtime: it resolves targets, tokenizes the inputs once per
target and shape (so every backend sees the same tokens), starts one child per
(target, backend, threads) — see :mod:`albert_edge.bench.worker` for why — shows a
progress bar, and turns what the children measured into ``albert-edge-bench/1``
results. A backend that cannot run here becomes a ``skipped`` result with the reason;
a child that crashes becomes ``failed`` results with its exit status. Nothing is
estimated or filled in: a field that was not measured is ``null``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from albert_edge.bench.child import run_child
from albert_edge.bench.flops import floor_bytes, gemm_shapes, model_flops, weight_gemms
from albert_edge.bench.inputs import choices_of, load_sentences, make_feeds
from albert_edge.bench.roofline import bound_ms
from albert_edge.bench.schema import empty_result, machine_info, new_report
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
class _Job:
    target: Target
    backend: Backend
    threads: int
    shapes: list[tuple[int, int]]  # (batch, seq) ascending by batch*seq
    skip_reason: str | None = None


def _as_target(t: str | Path | Target | None) -> Target:
    return t if isinstance(t, Target) else resolve_target(t)


def _checkpoint_weights(path: Path) -> Path | None:
    from albert_edge.checkpoint import WEIGHT_FILES

    return next((path / w for w in WEIGHT_FILES if (path / w).is_file()), None)


def _precision(target: Target, backend: Backend) -> str:
    return backend.precision or target.precision or "unknown"


def _size_fields(target: Target, backend: Backend, worker: Mapping[str, Any]) -> dict[str, Any]:
    """file_bytes / floor_bytes / ratio_to_floor for one (target, backend)."""
    precision = _precision(target, backend)
    file_bytes: int | None = None
    floor_precision = precision
    if target.format == "checkpoint":
        info = worker.get("info") or {}
        if isinstance(info.get("file_bytes"), int):
            file_bytes = info["file_bytes"]
        else:
            weights = _checkpoint_weights(target.path)
            file_bytes = weights.stat().st_size if weights else None
            floor_precision = "fp32"  # what is on disk, whatever the backend casts to
    elif target.model_file is not None:
        # An artifact: every size fact from albert_edge.facts, as convert/inspect report it.
        # A file that does not parse is reported by the worker ("load failed"), not here.
        from albert_edge.facts import artifact_facts, model_file_bytes

        try:
            facts = target.extra.get("sizes") or artifact_facts(target.model_file)
        except AlbertEdgeError:
            facts = {"file_bytes": model_file_bytes(target.model_file), "floor_bytes": None}
        sized = {k: facts.get(k) for k in ("file_bytes", "floor_bytes", "ratio_to_floor")}
        sized["floor_precision"] = facts.get("floor_precision")
        if target.floor_bytes is not None:
            sized["manifest_floor_bytes"] = target.floor_bytes
        if sized["floor_bytes"] is not None:
            return sized
        file_bytes = sized["file_bytes"]
    # One definition for every row (albert_edge.accounting's): unique parameters x the
    # precision's bytes per parameter, counted from config.json. An artifact manifest's
    # own floor (unique tensor bytes as stored) is kept beside it for reference only, so
    # that peers without a manifest and albert-edge artifacts are measured alike.
    floor: int | None = None
    if target.config:
        floor = floor_bytes(target.config, target.head, floor_precision)
    elif target.floor_bytes is not None and target.format != "checkpoint":
        floor = target.floor_bytes
    ratio = file_bytes / floor if file_bytes and floor else None
    out: dict[str, Any] = {
        "file_bytes": file_bytes,
        "floor_bytes": floor,
        "ratio_to_floor": ratio,
        "floor_precision": floor_precision,
    }
    if target.floor_bytes is not None and target.format != "checkpoint":
        out["manifest_floor_bytes"] = target.floor_bytes
    return out


def _roofline_key(precision: str, device: str) -> str:
    if device == "cuda":
        return "fp16" if precision == "fp16" else "fp32"
    return "int8" if precision.startswith("int") else "fp32"


def _roof_best(roofline: Mapping[str, Any], device: str, threads: int, key: str) -> float | None:
    table = roofline.get(device) or {}
    per = table.get("0" if device == "cuda" else str(threads)) or {}
    best = per.get(key)
    return float(best["gops"]) if best else None


def _build_results(
    job: _Job, worker: Mapping[str, Any], roofline: Mapping[str, Any]
) -> list[dict[str, Any]]:
    t, b = job.target, job.backend
    precision = _precision(t, b)
    sizes = _size_fields(t, b, worker)
    by_shape = {(s["batch"], s["seq_len"]): s for s in worker.get("shapes", [])}
    k = choices_of(t)
    out = []
    for batch, seq in job.shapes:
        r = empty_result(
            artifact=t.name,
            format=t.format,
            precision=precision,
            backend=b.name,
            device=b.device,
            batch=batch,
            seq_len=seq,
            threads=job.threads,
        )
        r.update(
            file_bytes=sizes["file_bytes"],
            floor_bytes=sizes["floor_bytes"],
            ratio_to_floor=sizes["ratio_to_floor"],
        )
        r.update(
            tool=t.tool,
            target=str(t.path),
            head=t.head,
            choices=k,
            floor_precision=sizes["floor_precision"],
        )
        if "manifest_floor_bytes" in sizes:
            r["manifest_floor_bytes"] = sizes["manifest_floor_bytes"]
        r.update({key: v for key, v in t.extra.items() if key not in r})
        shape = by_shape.get((batch, seq))
        if worker.get("status") != "ok" or shape is None:
            r.update(
                status=worker.get("status") or "failed",
                reason=worker.get("reason") or "the worker reported nothing for this shape",
            )
            if r["status"] == "ok":
                r["status"] = "failed"
            out.append(r)
            continue
        r.update(
            status=shape["status"],
            reason=shape.get("reason"),
            load_ms=worker.get("load_ms"),
            peak_rss_bytes=shape.get("peak_rss_bytes"),
            rss_before_load_bytes=worker.get("rss_before_load_bytes"),
            import_ms=worker.get("import_ms"),
        )
        if worker.get("info"):
            r["runtime_info"] = {k2: v for k2, v in worker["info"].items() if k2 != "file_bytes"}
        if "peak_gpu_bytes" in shape:
            r["peak_gpu_bytes"] = shape["peak_gpu_bytes"]
        if shape["status"] == "ok":
            lat = shape["latency_ms"]
            p50_s = lat["p50"] / 1e3
            r.update(
                first_inference_ms=shape["first_inference_ms"],
                latency_ms=lat,
                warmup_runs=shape.get("warmup_runs"),
                throughput_seq_per_s=batch * k / p50_s if p50_s > 0 else None,
            )
            if "samples_ms" in shape:
                r["samples_ms"] = shape["samples_ms"]
            if "effective_seq_len" in shape:  # padded up to a fixed-length signature
                r["effective_seq_len"] = shape["effective_seq_len"]
            if t.config:
                flops = model_flops(t.config, t.head, batch, shape.get("effective_seq_len", seq), k)
                r["flops"] = flops
                r["gops"] = flops / p50_s / 1e9 if p50_s > 0 else None
                key = _roofline_key(precision, b.device)
                best = _roof_best(roofline, b.device, job.threads, key)
                # the bound is the requested length's: tokens a fixed signature pads on
                # are the artifact's waste, not work the machine had to do
                bound = bound_ms(
                    roofline,
                    weight_gemms(t.config, batch * seq * k),
                    device=b.device,
                    threads=job.threads,
                    precision=key,
                )
                if precision == "unknown":  # no ceiling to compare with
                    best = bound = None
                if best:
                    r["roofline_gops"] = best
                    r["roofline_precision"] = key
                if bound and lat["p50"] > 0:
                    r["roofline_bound_ms"] = bound
                    r["roofline_fraction"] = bound / lat["p50"]
        out.append(r)
    return out


def _check_positive(name: str, values: Iterable[int]) -> tuple[int, ...]:
    vals = tuple(int(v) for v in values)
    if not vals or any(v <= 0 for v in vals):
        raise BenchmarkError(f"--{name} needs positive integers, got {vals}")
    return vals


def _check_rounds(rounds: int, runs: int | None, rows_path: str | Path | None) -> None:
    """Refuse the ``--rounds`` combinations that cannot be pooled, before anything runs."""
    if rounds < 1:
        raise BenchmarkError(f"--rounds must be positive, got {rounds}")
    if rounds > 1 and runs is None:
        raise BenchmarkError("--rounds needs a fixed --runs (the adaptive policy decides per run)")
    if rounds > 1 and rows_path is not None:
        raise BenchmarkError("--rounds cannot resume from a row log; drop one of the two")


def _policies(
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


def _check_memory(
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
        max_pos = _max_positions(t)
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


def _plan_jobs(
    targets: Sequence[Target],
    backends: Sequence[str] | None,
    threads: Sequence[int],
    shapes: list[tuple[int, int]],
) -> list[_Job]:
    """One job per (target, backend, threads): each becomes one child process. A GPU
    backend runs once (threads do not apply to it); one that cannot run here is a job
    with its skip reason, so the report says why instead of leaving the row out."""
    requested = list(backends) if backends else None
    jobs: list[_Job] = []
    for t in targets:
        for name in pick_backends(t, requested):
            b = BACKENDS[name]
            reason = gpu_unavailable_reason(b)
            for th in threads if b.device == "cpu" else threads[:1]:
                jobs.append(_Job(t, b, th, shapes, reason))
    return jobs


def _write_feeds(
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
        max_pos = _max_positions(t)
        for batch, seq in shapes:
            if max_pos is not None and seq > max_pos:
                continue  # a skipped row, never run: its tokens would only cost memory
            path = work / f"feeds-{ti}-b{batch}-s{seq}.npz"
            np.savez(path, **make_feeds(t, sentences, batch, seq))  # type: ignore[arg-type]
            feeds[(ti, batch, seq)] = str(path)
    return feeds


@dataclass
class _Run:
    """What every job of one :func:`bench` call shares: its targets, their token files,
    the policy, the row log, the roofline once measured, and the progress bar's step."""

    targets: list[Target]
    feeds: dict[tuple[int, int, int], str]
    work: Path
    policy: dict[str, Any]
    keep_samples: bool
    timeout_s: float
    log: Any
    advance: Callable[..., None]
    roof: dict[str, Any] = field(default_factory=dict)


def _advancer(bar: Any, total: int) -> Callable[..., None]:
    """``advance(desc=None, n=1)``: step the progress bar (a no-op under --quiet)."""
    task = bar.add_task("benchmark", total=total) if bar is not None else None

    def advance(desc: str | None = None, n: int = 1) -> None:
        if bar is not None and task is not None:
            bar.update(task, advance=n, **({"description": desc} if desc else {}))

    return advance


def bench(
    targets: Sequence[str | Path | Target | None] = (None,),
    *,
    backends: Sequence[str] | None = None,
    batches: Sequence[int] = (1,),
    seq_lens: Sequence[int] = (128,),
    threads: Sequence[int] = (2,),
    runs: int | None = None,
    warmup: int | None = None,
    policy: Mapping[str, Any] | None = None,
    roofline: bool = True,
    roofline_min_time_s: float = 0.2,
    data: str | Path | None = None,
    timeout_s: float = 3600.0,
    progress: bool = True,
    keep_samples: bool = False,
    rows_path: str | Path | None = None,
    rounds: int = 1,
) -> dict[str, Any]:
    """Benchmark ``targets`` (None: the embedded SST-2 checkpoint) and return the report.

    Every (target, backend, batch, seq_len, threads) becomes one result in the
    ``albert-edge-bench/1`` schema (see ``benchmarks/README.md``). ``runs``/``warmup``
    fix the counts; otherwise the adaptive :data:`DEFAULT_POLICY` (or ``policy``) decides.
    ``rows_path``: a JSON Lines log each row is appended to as soon as it is measured; a
    run with the same settings resumes from it (see :mod:`albert_edge.bench.rowlog`).
    ``rounds`` > 1 splits ``runs`` into that many interleaved passes and pools their
    samples: every (target, backend, threads) stays loaded in its own child, and each pass
    visits every shape of every one in turn, the order rotating (see
    :mod:`albert_edge.bench.interleave`), so that load which comes and goes hits every
    artifact alike instead of whichever row was being timed (rows measured one after
    another drifted by up to 1.6x on a 2-core VM). A batch × length whose activations
    cannot fit in the memory available is refused before anything is tokenized.
    """
    _check_rounds(rounds, runs, rows_path)
    batches = _check_positive("batch", batches)
    seq_lens = _check_positive("seq-lens", seq_lens)
    threads = _check_positive("threads", threads)
    pol, visit = _policies(runs, warmup, policy, rounds)
    resolved = [_as_target(t) for t in (targets or (None,))]
    _check_memory(resolved, batches, seq_lens)
    shapes = sorted(((b, s) for b in batches for s in seq_lens), key=lambda x: (x[0] * x[1], x))
    sentences, inputs_label = load_sentences(data)
    jobs = _plan_jobs(resolved, backends, threads, shapes)

    machine = machine_info()
    log = _row_log(rows_path, resolved, jobs, shapes, pol, inputs_label)
    with tempfile.TemporaryDirectory(prefix="albert-edge-bench-") as tmp:
        work = Path(tmp)
        run = _Run(
            targets=resolved,
            feeds=_write_feeds(resolved, shapes, sentences, work),
            work=work,
            policy=pol,
            keep_samples=keep_samples,
            timeout_s=timeout_s,
            log=log,
            advance=_advancer(None, 0),  # a no-op until _measure opens the progress bar
        )
        results = _measure(
            run,
            jobs,
            shapes,
            threads,
            machine,
            progress=progress,
            rounds=rounds,
            visit=visit,
            roofline=roofline,
            roofline_min_time_s=roofline_min_time_s,
        )
    settings: dict[str, Any] = {
        "batches": list(batches),
        "seq_lens": list(seq_lens),
        "threads": list(threads),
        "policy": pol,
        "inputs": inputs_label,
    }
    if rounds > 1:
        settings["rounds"] = rounds
    report = new_report(results, roofline=run.roof, machine=machine, settings=settings)
    if log is not None and log.resumed:
        report.setdefault("notes", []).append(
            f"resumed: {log.resumed} row(s) measured by an interrupted run were kept"
        )
    return report


def _measure(
    run: _Run,
    jobs: Sequence[_Job],
    shapes: Sequence[tuple[int, int]],
    threads: Sequence[int],
    machine: dict[str, Any],
    *,
    progress: bool,
    rounds: int,
    visit: Mapping[str, Any],
    roofline: bool,
    roofline_min_time_s: float,
) -> list[dict[str, Any]]:
    """Under one progress bar: the roofline first (every row's bound needs it), then every
    job, one after another or interleaved (``rounds`` > 1). ``machine`` gains the GPU's
    name when the roofline child saw one."""
    runnable = [j for j in jobs if j.skip_reason is None]
    total = sum(len(j.shapes) for j in runnable) * rounds + (1 if roofline and runnable else 0)
    bar = _progress(progress)
    results: list[dict[str, Any]] = []
    with bar if bar is not None else nullcontext():
        run.advance = _advancer(bar, total)
        if roofline and runnable:
            run.advance("roofline: GEMM throughput", 0)
            run.roof = _run_roofline(
                run.targets,
                runnable,
                shapes,
                threads,
                run.work,
                run.timeout_s,
                roofline_min_time_s,
            )
            run.advance()
            if run.roof.get("gpu_name"):
                machine["gpu"] = run.roof["gpu_name"]
        if rounds > 1:
            results.extend(
                _measure_rounds(
                    run.targets,
                    jobs,
                    run.feeds,
                    visit,
                    rounds,
                    run.roof,
                    run.work,
                    run.timeout_s,
                    run.keep_samples,
                    run.advance,
                )
            )
        for job in jobs if rounds == 1 else ():
            results.extend(_measure_job(run, job))
    return results


def _measure_job(run: _Run, job: _Job) -> list[dict[str, Any]]:
    """The rows of one job: those a resumed row log already holds are kept, the rest
    timed in one child (or skipped with the job's reason); the complete rows are then
    logged, load time included, so that they win over the streamed ones on resume."""
    desc = f"{job.target.name} · {job.backend.name} · {job.threads} thr"
    kept: list[dict[str, Any]] = []
    if run.log is not None:  # resume: keep what an interrupted run measured
        kept = _logged_rows(run.log, job)
        if kept:
            done = {(r["batch"], r["seq_len"]) for r in kept}
            if job.skip_reason is None:
                run.advance(desc, len(done))
            job = replace(job, shapes=[x for x in job.shapes if x not in done])
            if not job.shapes:
                return kept
    if job.skip_reason is not None:
        worker: dict[str, Any] = {"status": "skipped", "reason": job.skip_reason}
    else:
        worker = _time_job(run, job, desc)
    built = _build_results(job, worker, run.roof)
    if run.log is not None:
        run.log.append(built)  # complete rows (load time included) win on resume
    return kept + built


def _time_job(run: _Run, job: _Job, desc: str) -> dict[str, Any]:
    """Time ``job``'s shapes in its child; each row is logged as soon as the child
    reports it (an interrupted run loses at most the row being timed). Lengths past the
    model's positions come back as skipped rows, not timed."""
    run.advance(desc, 0)
    todo, too_long = _too_long(job)
    spec = _spec(job, todo, run.feeds, run.targets.index(job.target), run.policy, run.keep_samples)
    reported: list[Any] = []

    def on_progress(event: Mapping[str, Any]) -> None:
        reported.append(event)
        row = event.get("row")
        if run.log is not None and isinstance(row, dict):
            one = replace(job, shapes=[(row["batch"], row["seq_len"])])
            run.log.append(_build_results(one, {"status": "ok", "shapes": [row]}, run.roof))
        run.advance(desc)

    if todo:
        worker = run_child(
            spec, run.work, threads=job.threads, timeout_s=run.timeout_s, on_progress=on_progress
        )
    else:
        worker = {"status": "ok", "shapes": []}
    run.advance(desc, len(job.shapes) - len(reported))
    worker.setdefault("shapes", []).extend(too_long)
    return worker


def _spec(
    job: _Job,
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


def _max_positions(target: Target) -> int | None:
    """The model's position count from its config.json (None: unknown). Longer lengths
    are skipped rows: never tokenized, bounded or timed."""
    max_pos = (target.config or {}).get("max_position_embeddings")
    return max_pos if isinstance(max_pos, int) else None


def _too_long(job: _Job) -> tuple[list[tuple[int, int]], list[dict[str, Any]]]:
    """The shapes ``job`` can time, and skipped rows for those past the model's positions."""
    max_pos = _max_positions(job.target)
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


def _measure_rounds(
    resolved: Sequence[Target],
    jobs: Sequence[_Job],
    feeds: Mapping[tuple[int, int, int], str],
    visit: Mapping[str, Any],
    rounds: int,
    roof: Mapping[str, Any],
    work: Path,
    timeout_s: float,
    keep_samples: bool,
    advance: Any,
) -> list[dict[str, Any]]:
    """``rounds`` > 1: every job resident in its own child, timed shape by shape in turn
    with the others (:mod:`albert_edge.bench.interleave`), ``visit["runs"]`` runs a visit."""
    from albert_edge.bench.interleave import measure_interleaved

    plans = []
    for job in jobs:
        todo, skipped = _too_long(job) if job.skip_reason is None else ([], [])
        plans.append((job, todo, skipped))
    timed = [(job, todo) for job, todo, _ in plans if job.skip_reason is None and todo]
    specs = [
        (_spec(job, todo, feeds, resolved.index(job.target), visit, keep_samples), job.threads)
        for job, todo in timed
    ]

    def on_visit(i: int) -> None:
        job = timed[i][0]
        advance(f"{job.target.name} · {job.backend.name} · {job.threads} thr")

    workers = measure_interleaved(
        specs,
        work,
        rounds=rounds,
        policy=visit,
        timeout_s=timeout_s,
        keep_samples=keep_samples,
        on_visit=on_visit,
    )
    by_job = {id(job): w for (job, _), w in zip(timed, workers, strict=True)}
    results: list[dict[str, Any]] = []
    for job, todo, skipped in plans:
        worker: dict[str, Any]
        if job.skip_reason is not None:
            worker = {"status": "skipped", "reason": job.skip_reason}
        else:
            worker = by_job.get(id(job), {"status": "ok", "shapes": []})
            worker.setdefault("shapes", []).extend(skipped)
            advance(None, (len(job.shapes) - len(todo)) * rounds)
        results.extend(_build_results(job, worker, roof))
    return results


def _row_log(
    rows_path: str | Path | None,
    targets: Sequence[Target],
    jobs: Sequence[_Job],
    shapes: Sequence[tuple[int, int]],
    policy: Mapping[str, Any],
    inputs_label: Any,
) -> Any:
    """The resumable row log, or None. Its header pins what the rows were measured with."""
    if rows_path is None:
        return None
    from albert_edge.bench.rowlog import RowLog, content_sha256

    # every kept row is keyed on what its target holds now: a replaced artifact is re-measured
    contents = {str(t.path): content_sha256(t.path, t.model_file) for t in targets}
    settings = {
        "targets": [str(t.path) for t in targets],
        "jobs": sorted({(j.backend.name, j.threads) for j in jobs}),
        "shapes": [list(s) for s in shapes],
        "policy": dict(policy),
        "inputs": inputs_label,
    }
    return RowLog(rows_path, settings, contents)


def _logged_rows(log: Any, job: _Job) -> list[dict[str, Any]]:
    kept = []
    for b, s in job.shapes:
        row = log.done((str(job.target.path), job.backend.name, job.threads, b, s))
        if row is not None:
            kept.append(row)
    return kept


def _run_roofline(
    targets: Sequence[Target],
    jobs: Sequence[_Job],
    shapes: Sequence[tuple[int, int]],
    threads: Sequence[int],
    work: Path,
    timeout_s: float,
    min_time_s: float = 0.2,
) -> dict[str, Any]:
    gemms: set[tuple[int, int, int]] = set()
    for t in targets:
        if not t.config:
            continue
        k, max_pos = choices_of(t), _max_positions(t)
        for batch, seq in shapes:
            if max_pos is not None and seq > max_pos:
                continue  # a skipped row has no bound to compute
            for length in {seq, run_length(t, seq)}:
                gemms.update(gemm_shapes(t.config, batch * length * k))
    if not gemms and any(t.config for t in targets):
        return {"errors": ["every length is past the model's positions: nothing to bound"]}
    if not gemms:
        return {"errors": ["no target has a config.json: the model's GEMM shapes are unknown"]}
    cpu_threads = sorted({j.threads for j in jobs if j.backend.device == "cpu"}) or list(threads)
    spec = {
        "mode": "roofline",
        "threads": cpu_threads,
        "gemms": sorted(gemms),
        "min_time_s": min_time_s,
        "cuda": any(j.backend.device == "cuda" for j in jobs),
        # XNNPACK's rates need TensorFlow's converter: measured when LiteRT is benchmarked
        "xnnpack": any(j.backend.name.startswith("litert") for j in jobs),
    }
    res = run_child(spec, work, threads=max(cpu_threads), timeout_s=timeout_s)
    if "shapes" in res and res.get("status") == "failed":  # the child itself failed
        return {"errors": [f"roofline {res['reason']}"]}
    return res


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


def _progress(enabled: bool) -> Any:
    from albert_edge import progress

    if not enabled or not progress.enabled():  # the CLI's --quiet
        return None
    return progress.bar()


def accuracy(
    target: str | Path | Target | None,
    backend: str,
    data: str | Path,
    *,
    seq_len: int = 128,
    threads: int = 2,
    limit: int | None = None,
    timeout_s: float = 3600.0,
) -> dict[str, Any]:
    """Classification accuracy of ``target`` run by ``backend`` on an SST-2 style .tsv.

    Runs in a child process like the benchmarks (one example per call), so any artifact
    the harness can time it can also score. Returns ``{"status", "accuracy",
    "examples"}`` or ``{"status", "reason"}``.
    """
    import numpy as np

    from albert_edge.data import read_sst2

    t = _as_target(target)
    if backend not in BACKENDS or BACKENDS[backend].format != t.format:
        raise BenchmarkError(f"{t.path}: backend {backend!r} does not run a {t.format} target")
    rows = read_sst2(data)[:limit] if limit else read_sst2(data)
    feeds = make_feeds(t, [s for _, s in rows], len(rows), seq_len)
    feeds["labels"] = np.asarray([label for label, _ in rows], dtype=np.int64)
    b = BACKENDS[backend]
    with tempfile.TemporaryDirectory(prefix="albert-edge-acc-") as tmp:
        path = Path(tmp) / "feeds.npz"
        np.savez(path, **feeds)  # type: ignore[arg-type]
        spec = {
            "mode": "accuracy",
            "backend": b.name,
            "format": t.format,
            "device": b.device,
            "runner_backend": b.runner_backend,
            "threads": threads,
            "feeds": str(path),
            "target_path": str(t.model_file or t.path),
        }
        result = run_child(spec, Path(tmp), threads=threads, timeout_s=timeout_s)
    result.pop("shapes", None)
    return result
