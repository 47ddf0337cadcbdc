"""``optimize(options)``: checkpoint in, the artifact to ship and its report out.

:func:`check` judges everything a run will need before its first stage (flags, input
files, the optional packages its flags call for, the cluster's address), one line each;
:func:`optimize` then holds the work directory's lock for the whole run, plans with what
an earlier run left sealed there, and stops at the first write a full disk refuses.
"""

from __future__ import annotations

import contextlib
import json
import math
import shlex
import shutil
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError
from albert_edge.optimize.options import Options
from albert_edge.optimize.search import REQUIRED, Search
from albert_edge.optimize.work import DiskFullError, OptimizeError, Work, disk_full


def check(opts: Options) -> Any:
    """Everything that can be refused before a model loads, one line each; the rows."""
    from albert_edge.extras import require
    from albert_edge.io import check_name_fits, check_output
    from albert_edge.optimize.splits import check_rows, read_rows

    if not (math.isfinite(opts.max_drop) and opts.max_drop >= 0):
        raise OptimizeError(f"--max-drop must be a number of points >= 0, got {opts.max_drop}")
    if not (math.isfinite(opts.max_minutes) and opts.max_minutes > 0):
        raise OptimizeError(f"--max-minutes must be a positive number, got {opts.max_minutes}")
    if opts.target not in ("onnx", "tflite"):
        raise OptimizeError(f"--target must be onnx or tflite, got {opts.target!r}")
    if opts.objective not in ("latency", "bytes"):
        raise OptimizeError(f"--objective must be latency or bytes, got {opts.objective!r}")
    if opts.cluster is not None and opts.workers is not None:
        raise OptimizeError(
            f"--workers {opts.workers} sizes the local build processes; with --cluster the "
            "builds run on the cluster's CPUs: drop one of the two"
        )
    if opts.corpus is not None and not opts.trim:
        raise OptimizeError(
            "--corpus is the text the vocabulary trim keeps pieces for, and --no-trim skips "
            "the trim: drop one of the two"
        )
    if opts.target == "tflite":
        require("tflite", "--target tflite")
    check_seq_len(opts)
    check_name_fits(opts.output)
    work = opts.work()
    inputs = [opts.checkpoint, opts.data, opts.corpus, opts.report_data, opts.choose_data]
    check_output(opts.output, overwrite=opts.overwrite, inputs=[*inputs, work])
    for given in inputs:
        if given is not None and Path(work).resolve().is_relative_to(Path(given).resolve()):
            raise OptimizeError(
                f"{work}: --work-dir is inside the input {given}; albert-edge never writes "
                "into an input: give a --work-dir outside it"
            )
    Work(Path(work)).check()
    if opts.corpus is not None:
        check_corpus(opts)
    rows = read_rows(opts.data, opts.checkpoint)
    check_rows(len(rows.examples), opts.data, rows.kind.value)
    if opts.cluster is not None:  # a TCP connect; Ray itself retries for minutes
        from albert_edge.optimize.pool import probe_cluster

        probe_cluster(opts.cluster)
        require("ray", f"--cluster {opts.cluster}", ("ray",))
    return rows


def check_seq_len(opts: Options) -> None:
    """``--seq-len`` within the model's positions (config.json; no model loads)."""
    from albert_edge.layout import DEFAULT_MODEL

    path = Path(opts.checkpoint if opts.checkpoint is not None else DEFAULT_MODEL)
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        positions = int(cfg["max_position_embeddings"])
    except (OSError, ValueError, KeyError, TypeError):
        return  # the checkpoint's own reader names what is wrong with it
    if opts.seq_len > positions:
        raise OptimizeError(
            f"--seq-len {opts.seq_len}: {path.name} has {positions} positions; give "
            f"--seq-len {positions} or less"
        )


def check_corpus(opts: Options) -> None:
    """``--corpus`` read as the trim stage will read it (text, its encoding, a task
    file's rows against the model's head), before any stage: a binary or non-UTF-8 file
    is refused here, not when the trim stage meets it minutes in."""
    from albert_edge.vocab.corpus import read_corpus
    from albert_edge.vocab.trim import TrimOptions, held_out_task_data

    corpus = opts.corpus
    assert corpus is not None
    if not corpus.is_file():
        raise OptimizeError(f"{corpus}: --corpus is not a file; give the deployment's text")
    scored = held_out_task_data(corpus, opts.checkpoint, TrimOptions())
    read_corpus(corpus, None, scored=scored)


def plots_available() -> bool:
    from albert_edge.extras import missing

    return not missing("plots")


def check_plan(search: Search) -> None:
    """What the plan says about the flags, refused before the first stage: the split
    and the depth search must fit ``--max-minutes`` (every candidate needs them), and a
    trim ``--corpus`` asks for is never dropped to fit it."""
    o = search.opts
    need = sum(s.estimate_s for s in search.plan.stages if s.name in REQUIRED)
    room = search.budget_s - search.reserve()
    if need > room:
        least = math.ceil((need + search.reserve()) / 60.0 * 1.2)
        raise OptimizeError(
            f"--max-minutes {o.max_minutes:g}: the split and the depth search alone take "
            f"about {need / 60:.1f} min here and {search.reserve() / 60:.1f} min are kept for "
            f"timing and writing; give at least --max-minutes {least}"
        )
    trim = next((s for s in search.plan.stages if s.name == "trim"), None)
    if o.corpus is not None and trim is not None and not trim.will_run:
        raise OptimizeError(
            f"--corpus {o.corpus.name} asks for the vocabulary trim, which the plan drops: "
            f"{trim.why}; raise --max-minutes, or leave --corpus out"
        )


def _median_length(opts: Options, report: Path) -> int:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.optimize.splits import read_rows
    from albert_edge.tasks import encode

    rows = read_rows(report, opts.checkpoint)
    feats = encode(rows, load_checkpoint(opts.checkpoint).tokenizer(), opts.seq_len)
    return max(2, int(statistics.median(len(x) for x in feats.input_ids)))


def check_intact(work: Work, keys: list[str]) -> None:
    """Every candidate of ``keys`` as it was sealed when built: a file changed in the
    work directory since (by hand, or another program) is named in one line with what
    optimize does about it, before it is timed or shipped."""
    from albert_edge.optimize.work import STAGE
    from albert_edge.sealed import sealed_reason

    for key in keys:
        why = sealed_reason(work.dir("candidates", key), STAGE)
        if why is not None:
            raise OptimizeError(f"candidate {key} changed after it was built: {why}")


def _ship(search: Search, pick: dict[str, Any], report: dict[str, Any], plot: bool = True) -> None:
    """``-o``: the pick's artifact as its builder wrote it, the report beside its files,
    the manifest sealed again over both (so ``verify`` finds every file listed)."""
    from albert_edge.io import atomic_output_dir
    from albert_edge.layout import path_source, reanchor, relative_to_artifact
    from albert_edge.manifest import (
        check_complete,
        check_files,
        load_manifest,
        read_manifest,
        write_manifest,
    )
    from albert_edge.optimize import report as rep

    o = search.opts
    check_intact(search.work, [str(pick["key"])])
    src = search.work.dir("candidates", str(pick["key"])) / "artifact"
    given = (o.checkpoint, o.data, o.corpus, o.report_data, o.choose_data)
    inputs = [Path(p) for p in given if p is not None]
    # report.md's reproduction line, from the directory holding the output (no machine path)
    data_rel = relative_to_artifact(o.data, Path(o.output).parent)
    out_name, data_q = shlex.quote(Path(o.output).name), shlex.quote(data_rel)
    report["verify_command"] = f"albert-edge verify {out_name} --data {data_q}"
    with atomic_output_dir(o.output, overwrite=o.overwrite, inputs=inputs) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
        rep.write(report, tmp, plot=plot)
        data = read_manifest(tmp)
        # the intermediate it was converted from, found from the output, not the candidate
        data["source"] = reanchor(data.get("source"), src, tmp)
        data["optimize"] = {
            # what `verify OUT --data F` measures it against: the checkpoint the user gave
            "checkpoint": path_source(o.checkpoint, tmp),
            "candidate": pick["key"],
            "report": ["report.md", "report.json", *(["front.png"] if plot else [])],
            "settings": report["settings"],
        }
        write_manifest(tmp, data)
        m = load_manifest(tmp)
        check_files(tmp, m)
        check_complete(tmp, m)


NO_PLOT = (
    "front.png will not be drawn: matplotlib is not installed (pip install "
    "'albert-edge[plots]'); report.md and report.json are written"
)


def optimize(opts: Options) -> dict[str, Any]:
    """Run the search (resuming a work directory), ship the pick into ``opts.output``;
    return the report (what report.json holds)."""
    from albert_edge.optimize.splits import learned_lines, plan_split

    rows = check(opts)
    # the held rows judged before any model loads: trained-on rows out, given files read
    split = plan_split(opts.data, rows, opts.checkpoint, opts.given_files())
    search = Search(opts, rows, split)
    for line in learned_lines(opts.data, opts.checkpoint, split, opts.given_files()):
        search.warn(line)
    if search.work.root.is_dir():  # stages an earlier run sealed here cost ~0
        # read without the lock (another run may be writing): the locked pass below
        # decides; this one only keeps check_plan from refusing what is already done
        with contextlib.suppress(OSError, ValueError, AlbertEdgeError):
            search.reuse_plan()
    check_plan(search)  # before the work directory is made: nothing left behind
    plot = plots_available()
    with _work_dir(search):
        search.reuse_plan()  # again, now that no other run can change it
        check_plan(search)
        (search.work.root / "plan.json").write_text(search.plan.dumps(), encoding="utf-8")
        for line in search.plan.describe():
            search.progress(line)
        if not plot:
            search.progress(NO_PLOT)
            search.notes.append(NO_PLOT)
        return _run(search, plot)


@contextlib.contextmanager
def _work_dir(search: Search) -> Iterator[None]:
    """The work directory, made or accepted, locked for the run; a write a full disk
    refuses, here or in a build, ends the run in one line that blames the disk."""
    work = search.work
    try:
        work.open()
        with work.lock():
            yield
    except DiskFullError:
        raise
    except Exception as exc:
        full = disk_full(exc, work.root)
        if full is None:
            raise
        raise DiskFullError(full) from None


def _run(search: Search, plot: bool) -> dict[str, Any]:
    from albert_edge.optimize import report as rep
    from albert_edge.optimize.pool import make_pool

    opts = search.opts
    builds = _Builds(search)
    try:
        if opts.cluster is not None:  # joined before the first stage: refused there
            search.progress(f"joining the Ray cluster at {opts.cluster}")
            builds.pool = make_pool(opts.cluster, None)
        ctx = search.run_stages()
        if opts.corpus is not None and not search.stages.get("trim", {}).get("ran"):
            why = search.stages.get("trim", {}).get("why", "")
            search.notes.append(f"the vocabulary trim --corpus asked for did not run: {why}")
        if builds.pool is None:
            builds.pool = make_pool(None, opts.workers)
        search.run_candidates(ctx, builds)
    finally:
        builds.close()
    check_intact(search.work, [str(r["key"]) for r in search.admitted()])
    w2 = _median_length(opts, ctx.report)
    search.time_finalists(w2, ctx.report)
    pick = search.pick()

    baseline = search.records.get(search.baseline_key())
    result = rep.build_report(
        plan=search.plan.to_json(),
        stages=search.stages,
        records=search.records,
        pick=pick,
        settings={**search.settings(), "w2_len": w2},
        rows_of=search.rows_of,
        notes=search.notes,
        timing=search.timing,
        elapsed_s=search.progress.elapsed(),
        baseline=baseline,
    )
    _ship(search, pick, result, plot)
    (search.work.root / "report.json").write_text(
        json.dumps(result, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
    )
    return result


class _Builds:
    """The pool the candidates build on, as the search uses it: says where the builds
    run when the first is submitted, and ends the run at the first build that met a full
    disk (every later one would meet it too) instead of recording it as a candidate that
    failed."""

    def __init__(self, search: Search) -> None:
        self.pool: Any = None
        self._search = search
        self._said = False

    def submit(self, fn: Any, *args: Any) -> Any:
        if not self._said:
            self._said = True
            workers = getattr(self.pool, "workers", None)
            size = f" ({workers})" if workers else ""
            self._search.progress(f"building candidates on {self.pool.kind}{size}")
        return self.pool.submit(fn, *args)

    def wait(self, handles: list[Any], timeout: float) -> Any:
        return self.pool.wait(handles, timeout)

    def result(self, handle: Any) -> Any:
        rec = self.pool.result(handle)
        if isinstance(rec, dict) and rec.get("disk_full"):
            raise DiskFullError(str(rec["disk_full"]))
        return rec

    def cancel(self, handle: Any) -> None:
        self.pool.cancel(handle)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
