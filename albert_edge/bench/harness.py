"""The benchmark harness: targets × backends × shapes, each measured in a child process.

The parent never imports a runtime: it resolves targets, tokenizes the inputs once per
target and shape (so every backend sees the same tokens), starts one child per
(target, backend, threads) — see :mod:`albert_edge.bench.worker` for why — shows a
progress bar, and turns what the children measured into ``albert-edge-bench/1``
results. A backend that cannot run here becomes a ``skipped`` result with the reason;
a child that crashes becomes ``failed`` results with its exit status. Nothing is
estimated or filled in: a field that was not measured is ``null``. What is measured is
planned in :mod:`albert_edge.bench.plan`, the rows are built in
:mod:`albert_edge.bench.rows`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from albert_edge.bench.child import run_child
from albert_edge.bench.flops import gemm_shapes
from albert_edge.bench.inputs import choices_of, load_sentences, make_feeds
from albert_edge.bench.plan import (
    DEFAULT_POLICY,
    Job,
    as_target,
    check_memory,
    check_positive,
    check_rounds,
    job_spec,
    max_positions,
    plan_jobs,
    policies,
    run_length,
    too_long,
    write_feeds,
)
from albert_edge.bench.rows import build_results
from albert_edge.bench.schema import machine_info, new_report
from albert_edge.bench.targets import BACKENDS, Target
from albert_edge.errors import BenchmarkError

__all__ = ["DEFAULT_POLICY", "accuracy", "bench", "run_length"]


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
    check_rounds(rounds, runs, rows_path)
    batches = check_positive("batch", batches)
    seq_lens = check_positive("seq-lens", seq_lens)
    threads = check_positive("threads", threads)
    pol, visit = policies(runs, warmup, policy, rounds)
    resolved = [as_target(t) for t in (targets or (None,))]
    check_memory(resolved, batches, seq_lens)
    shapes = sorted(((b, s) for b in batches for s in seq_lens), key=lambda x: (x[0] * x[1], x))
    sentences, inputs_label = load_sentences(data)
    jobs = plan_jobs(resolved, backends, threads, shapes)

    machine = machine_info()
    log = _row_log(rows_path, resolved, jobs, shapes, pol, inputs_label)
    with tempfile.TemporaryDirectory(prefix="albert-edge-bench-") as tmp:
        work = Path(tmp)
        run = _Run(
            targets=resolved,
            feeds=write_feeds(resolved, shapes, sentences, work),
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
    settings = {"batches": batches, "seq_lens": seq_lens, "threads": threads}
    return _report(results, run, machine, settings, pol, inputs_label, rounds)


def _report(
    results: list[dict[str, Any]],
    run: _Run,
    machine: dict[str, Any],
    shapes: Mapping[str, Sequence[int]],
    policy: dict[str, Any],
    inputs_label: Any,
    rounds: int,
) -> dict[str, Any]:
    """The ``albert-edge-bench/1`` report of ``results``: the settings they were measured
    with, the roofline, and a note when a row log's rows were kept."""
    settings: dict[str, Any] = {
        "batches": list(shapes["batches"]),
        "seq_lens": list(shapes["seq_lens"]),
        "threads": list(shapes["threads"]),
        "policy": policy,
        "inputs": inputs_label,
    }
    if rounds > 1:
        settings["rounds"] = rounds
    report = new_report(results, roofline=run.roof, machine=machine, settings=settings)
    if run.log is not None and run.log.resumed:
        report.setdefault("notes", []).append(
            f"resumed: {run.log.resumed} row(s) measured by an interrupted run were kept"
        )
    return report


def _measure(
    run: _Run,
    jobs: Sequence[Job],
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


def _measure_job(run: _Run, job: Job) -> list[dict[str, Any]]:
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
    built = build_results(job, worker, run.roof)
    if run.log is not None:
        run.log.append(built)  # complete rows (load time included) win on resume
    return kept + built


def _time_job(run: _Run, job: Job, desc: str) -> dict[str, Any]:
    """Time ``job``'s shapes in its child; each row is logged as soon as the child
    reports it (an interrupted run loses at most the row being timed). Lengths past the
    model's positions come back as skipped rows, not timed."""
    run.advance(desc, 0)
    todo, skipped = too_long(job)
    spec = job_spec(
        job, todo, run.feeds, run.targets.index(job.target), run.policy, run.keep_samples
    )
    reported: list[Any] = []

    def on_progress(event: Mapping[str, Any]) -> None:
        reported.append(event)
        row = event.get("row")
        if run.log is not None and isinstance(row, dict):
            one = replace(job, shapes=[(row["batch"], row["seq_len"])])
            run.log.append(build_results(one, {"status": "ok", "shapes": [row]}, run.roof))
        run.advance(desc)

    if todo:
        worker = run_child(
            spec, run.work, threads=job.threads, timeout_s=run.timeout_s, on_progress=on_progress
        )
    else:
        worker = {"status": "ok", "shapes": []}
    run.advance(desc, len(job.shapes) - len(reported))
    worker.setdefault("shapes", []).extend(skipped)
    return worker


def _measure_rounds(
    resolved: Sequence[Target],
    jobs: Sequence[Job],
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
        todo, skipped = too_long(job) if job.skip_reason is None else ([], [])
        plans.append((job, todo, skipped))
    timed = [(job, todo) for job, todo, _ in plans if job.skip_reason is None and todo]
    specs = [
        (job_spec(job, todo, feeds, resolved.index(job.target), visit, keep_samples), job.threads)
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
        results.extend(build_results(job, worker, roof))
    return results


def _row_log(
    rows_path: str | Path | None,
    targets: Sequence[Target],
    jobs: Sequence[Job],
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


def _logged_rows(log: Any, job: Job) -> list[dict[str, Any]]:
    kept = []
    for b, s in job.shapes:
        row = log.done((str(job.target.path), job.backend.name, job.threads, b, s))
        if row is not None:
            kept.append(row)
    return kept


def _run_roofline(
    targets: Sequence[Target],
    jobs: Sequence[Job],
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
        k, max_pos = choices_of(t), max_positions(t)
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

    t = as_target(target)
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
