"""``optimize(options)``: checkpoint in, the artifact to ship and its report out."""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path
from typing import Any

from albert_edge.optimize.search import Options, Search, default_work_dir
from albert_edge.optimize.stages import OptimizeError, Work


def check(opts: Options) -> Any:
    """Everything that can be refused before a model loads, one line each; the rows."""
    from albert_edge.io import check_name_fits, check_output
    from albert_edge.optimize.stages import check_rows, read_rows

    if not (math.isfinite(opts.max_drop) and opts.max_drop >= 0):
        raise OptimizeError(f"--max-drop must be a number of points >= 0, got {opts.max_drop}")
    if not (math.isfinite(opts.max_minutes) and opts.max_minutes > 0):
        raise OptimizeError(f"--max-minutes must be a positive number, got {opts.max_minutes}")
    if opts.target not in ("onnx", "tflite"):
        raise OptimizeError(f"--target must be onnx or tflite, got {opts.target!r}")
    if opts.objective not in ("latency", "bytes"):
        raise OptimizeError(f"--objective must be latency or bytes, got {opts.objective!r}")
    check_name_fits(opts.output)
    work = opts.work_dir or default_work_dir(opts.output)
    inputs = [opts.checkpoint, opts.data, opts.corpus, opts.report_data, opts.choose_data]
    check_output(opts.output, overwrite=opts.overwrite, inputs=[*inputs, work])
    for given in inputs:
        if given is not None and Path(work).resolve().is_relative_to(Path(given).resolve()):
            raise OptimizeError(
                f"{work}: --work-dir is inside the input {given}; albert-edge never writes "
                "into an input: give a --work-dir outside it"
            )
    Work(Path(work)).check()
    if opts.corpus is not None and not opts.corpus.is_file():
        raise OptimizeError(f"{opts.corpus}: --corpus is not a file; give the deployment's text")
    rows = read_rows(opts.data, opts.checkpoint)
    check_rows(len(rows.examples), opts.data, rows.kind.value)
    return rows


def _median_length(opts: Options, report: Path) -> int:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.optimize.stages import read_rows
    from albert_edge.tasks import encode

    rows = read_rows(report, opts.checkpoint)
    feats = encode(rows, load_checkpoint(opts.checkpoint).tokenizer(), opts.seq_len)
    return max(2, int(statistics.median(len(x) for x in feats.input_ids)))


def _ship(search: Search, pick: dict[str, Any], report: dict[str, Any]) -> None:
    """``-o``: the pick's artifact as its builder wrote it, the report beside its files,
    the manifest sealed again over both (so ``verify`` finds every file listed)."""
    from albert_edge.io import atomic_output_dir
    from albert_edge.manifest import (
        check_complete,
        check_files,
        load_manifest,
        read_manifest,
        write_manifest,
    )
    from albert_edge.optimize import report as rep

    o = search.opts
    src = search.work.dir("candidates", str(pick["key"])) / "artifact"
    given = (o.checkpoint, o.data, o.corpus, o.report_data, o.choose_data)
    inputs = [Path(p) for p in given if p is not None]
    with atomic_output_dir(o.output, overwrite=o.overwrite, inputs=inputs) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
        rep.write(report, tmp)
        data = read_manifest(tmp)
        data["optimize"] = {
            "candidate": pick["key"],
            "report": ["report.md", "report.json", "front.png"],
            "settings": report["settings"],
        }
        write_manifest(tmp, data)
        m = load_manifest(tmp)
        check_files(tmp, m)
        check_complete(tmp, m)


def optimize(opts: Options) -> dict[str, Any]:
    """Run the search (resuming a work directory), ship the pick into ``opts.output``;
    return the report (what report.json holds)."""
    from albert_edge.optimize.pool import Pool
    from albert_edge.optimize.stages import learned_lines, plan_split

    rows = check(opts)
    # the held rows judged before any model loads: trained-on rows out, given files read
    split = plan_split(opts.data, rows, opts.checkpoint, opts.given_files())
    search = Search(opts, rows, split)
    for line in learned_lines(opts.data, opts.checkpoint, split, opts.given_files()):
        search.warn(line)
    search.work.open()
    (search.work.root / "plan.json").write_text(search.plan.dumps(), encoding="utf-8")
    for line in search.plan.describe():
        search.progress(line)
    ctx = search.run_stages()
    pool = _LazyPool(lambda: Pool(opts.cluster, opts.workers), search)
    try:
        search.run_candidates(ctx, pool)
    finally:
        pool.close()
    w2 = _median_length(opts, Path(ctx["report"]))
    search.time_finalists(w2, Path(ctx["report"]))
    pick = search.pick()
    from albert_edge.optimize import report as rep

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
    _ship(search, pick, result)
    (search.work.root / "report.json").write_text(
        json.dumps(result, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
    )
    return result


class _LazyPool:
    """Ray starts only when a candidate has to be built (a rerun that finds every
    candidate done starts none)."""

    def __init__(self, make: Any, search: Search) -> None:
        self._make, self._pool, self._search = make, None, search

    def _get(self) -> Any:
        if self._pool is None:
            self._search.progress("starting Ray for the builds")
            self._pool = self._make()
        return self._pool

    def submit(self, fn: Any, *args: Any) -> Any:
        return self._get().submit(fn, *args)

    def wait(self, handles: list[Any], timeout: float) -> Any:
        return self._get().wait(handles, timeout)

    def result(self, handle: Any) -> Any:
        return self._get().result(handle)

    def cancel(self, handle: Any) -> None:
        self._get().cancel(handle)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
