"""One report from several: ``bench --adb`` rows (benchmark_model on the phone) and the
Android app's rows (``BenchmarkActivity`` / its instrumented test) side by side.

Both sides write ``albert-edge-bench/1``; each input is validated with the harness's own
validator before anything is merged, so a row the Python side cannot read is refused
with the file's name rather than silently dropped. Every row keeps where it came from
(``source``) and which machine measured it (``machine`` of its report, in ``sources``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from albert_edge.bench.schema import new_report, validate_report
from albert_edge.errors import BenchmarkError


def merge_reports(paths: Sequence[str | Path]) -> dict[str, Any]:
    """Read, validate and concatenate reports; the first report's machine heads the result."""
    if not paths:
        raise BenchmarkError("nothing to merge: pass at least one albert-edge-bench/1 JSON file")
    reports = []
    for p in map(Path, paths):
        try:
            report = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BenchmarkError(
                f"{p}: not a readable JSON report ({exc}); re-run the bench"
            ) from None
        problems = validate_report(report) if isinstance(report, dict) else ["not an object"]
        if problems:
            raise BenchmarkError(
                f"{p}: not an albert-edge-bench/1 report ({problems[0]}; {len(problems)} problems)"
            )
        reports.append((p, report))
    results = [
        {**row, "source": row.get("source") or p.name} for p, r in reports for row in r["results"]
    ]
    merged = new_report(
        results,
        machine=reports[0][1]["machine"],
        settings={
            "merged_from": [p.name for p, _ in reports],
            "sources": {
                p.name: {"machine": r["machine"], "settings": r["settings"]} for p, r in reports
            },
        },
    )
    return merged
