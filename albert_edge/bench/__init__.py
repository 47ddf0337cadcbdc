"""``albert-edge bench``: size, latency, memory and throughput, measured, never estimated.

Python API: :func:`bench` returns an ``albert-edge-bench/1`` report (a dict; schema in
``benchmarks/README.md``); :func:`validate_report` checks one; :func:`to_markdown` and
:func:`plot` render one; :func:`bench_adb` runs TFLite's ``benchmark_model`` on a
connected Android device. :func:`run_bench_cli` is what the CLI calls.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from albert_edge.bench.harness import DEFAULT_POLICY, accuracy, bench
from albert_edge.bench.report import plot, print_table, to_markdown
from albert_edge.bench.schema import SCHEMA_ID, validate_report
from albert_edge.bench.targets import BACKENDS, Target, resolve_target
from albert_edge.errors import BenchmarkError

__all__ = [
    "BACKENDS",
    "DEFAULT_POLICY",
    "SCHEMA_ID",
    "Target",
    "accuracy",
    "bench",
    "bench_adb",
    "plot",
    "resolve_target",
    "run_bench_cli",
    "to_markdown",
    "validate_report",
    "write_outputs",
]


def bench_adb(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """See :func:`albert_edge.bench.adb.bench_adb`."""
    from albert_edge.bench.adb import bench_adb as _bench_adb

    return _bench_adb(*args, **kwargs)


def _check_writable(path: Path | None, flag: str) -> None:
    if path is not None and not path.parent.is_dir():
        raise BenchmarkError(
            f"{path}: directory {path.parent} does not exist; create it or "
            f"choose another {flag} path"
        )


def check_report_files(args: argparse.Namespace) -> None:
    """``--json`` (and its ``.rows.jsonl``), ``--markdown``, ``--plot``: never an input
    (the artifacts or checkpoint benchmarked, the data, a search, the work directory) or
    inside one, checked before any work (:func:`albert_edge.io.check_output_file`)."""
    from albert_edge.bench.report import is_report_json, is_report_markdown, is_report_plot
    from albert_edge.bench.rowlog import rows_path_for
    from albert_edge.io import check_output_file

    inputs = [*(args.targets or [])]
    for name in ("data", "report_data", "depth_search", "exit_data", "work_dir", "trim_corpus"):
        inputs.append(getattr(args, name, None))
    json_out = getattr(args, "json_out", None)
    rows = rows_path_for(json_out) if json_out is not None else None
    for path, flag, is_own in (
        (json_out, "--json", is_report_json),
        (rows, "--json", None),  # the row log refuses a file that is not one (rowlog.py)
        (getattr(args, "markdown", None), "--markdown", is_report_markdown),
        (getattr(args, "plot", None), "--plot", is_report_plot),
    ):
        if path is not None:
            check_output_file(Path(path), inputs=inputs, flag=flag, is_own=is_own)


def write_outputs(
    report: dict[str, Any],
    *,
    json_out: Path | None = None,
    markdown: Path | None = None,
    plot_out: Path | None = None,
) -> None:
    """Write the report's JSON, Markdown and plot (each atomically: temp file + rename)."""
    import os

    from albert_edge.io import atomic_write_bytes

    umask = os.umask(0)
    os.umask(umask)

    def write(path: Path, data: bytes) -> None:
        atomic_write_bytes(path, data)
        os.chmod(path, 0o666 & ~umask)  # mkstemp's 0600 would hide reports from others

    if json_out is not None:
        from albert_edge.manifest import dumps_strict  # NaN/Infinity -> null + non_finite

        write(json_out, (dumps_strict(report, indent=2) + "\n").encode())
    if markdown is not None:
        write(markdown, to_markdown(report).encode())
    if plot_out is not None:
        import tempfile

        with tempfile.TemporaryDirectory(dir=plot_out.parent) as tmp:
            tmp_png = Path(tmp) / plot_out.name
            plot(report, tmp_png)
            tmp_png.replace(plot_out)


def run_bench_cli(args: argparse.Namespace) -> int:
    """``albert-edge bench``: run, print a table, write the requested files.

    Exit status 0 when every result is ``ok`` or ``skipped`` (with its reason), 1 when
    any result ``failed`` or when nothing at all was measured.
    """
    json_out = getattr(args, "json_out", None)
    md_out = getattr(args, "markdown", None)
    plot_out = getattr(args, "plot", None)
    for path, flag in ((json_out, "--json"), (md_out, "--markdown"), (plot_out, "--plot")):
        _check_writable(path, flag)
    check_report_files(args)
    targets = list(args.targets) if args.targets else [None]
    from albert_edge.bench.rowlog import rows_path_for

    # With --json, rows stream to OUT.json.rows.jsonl as measured; a re-run resumes.
    rows_path = rows_path_for(json_out) if json_out is not None else None
    if getattr(args, "adb", False):
        report = bench_adb(
            targets,
            serial=args.serial,
            benchmark_model=args.benchmark_model,
            seq_lens=args.seq_lens,
            threads=args.threads,
            batch=args.batch,
            runs=args.runs,
            warmup=args.warmup,
            backends=args.backend,
        )
    else:
        report = bench(
            targets,
            backends=args.backend,
            batches=args.batch,
            seq_lens=args.seq_lens,
            threads=args.threads,
            runs=args.runs,
            warmup=args.warmup,
            progress=True,
            rows_path=rows_path if getattr(args, "rounds", 1) == 1 else None,
            rounds=getattr(args, "rounds", 1),
        )
    write_outputs(report, json_out=json_out, markdown=md_out, plot_out=plot_out)
    if rows_path is not None:
        rows_path.unlink(missing_ok=True)  # the final JSON now holds every row
    print_table(report)
    if not any(r["status"] == "ok" for r in report["results"]):
        print(
            "albert-edge bench: nothing was measured (every result skipped or failed); "
            "see the reasons above",
            file=sys.stderr,
        )
        return 1
    failed = [r for r in report["results"] if r["status"] == "failed"]
    if failed:
        print(
            f"albert-edge bench: {len(failed)} result(s) failed; see the status column",
            file=sys.stderr,
        )
        return 1
    return 0
