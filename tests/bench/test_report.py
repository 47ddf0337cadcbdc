"""Markdown, console table and plot render what was measured, and only that."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from albert_edge.bench import plot, to_markdown
from albert_edge.bench.report import grouped_rows, text_table


def test_markdown_has_a_row_per_measurement(tiny_report: dict[str, Any]) -> None:
    md = to_markdown(tiny_report)
    ok = [r for r in tiny_report["results"] if r["status"] == "ok"]
    table_rows = [ln for ln in md.splitlines() if ln.startswith("| ") and "| ok |" in ln]
    assert len(table_rows) == len(ok)
    assert "Roofline" in md and "GOP/s" in md
    assert "sentences from" in md or "builtin sentences" in md


def test_skipped_backends_collapse_with_their_reason(tiny_report: dict[str, Any]) -> None:
    skipped = [r for r in tiny_report["results"] if r["status"] == "skipped"]
    rows = grouped_rows(tiny_report["results"])
    assert len(rows) == len(tiny_report["results"]) - len(skipped) + len(
        {(r["artifact"], r["backend"], r["reason"]) for r in skipped}
    )
    text = text_table(tiny_report)
    for r in skipped:
        assert r["reason"] in text


def test_unmeasured_numbers_print_as_dash(tiny_report: dict[str, Any]) -> None:
    skipped = [r for r in tiny_report["results"] if r["status"] == "skipped"]
    for cells in grouped_rows(skipped):
        assert cells[10] == "—"  # p50
        assert cells[15] == "—"  # peak RSS


def test_plot_is_a_png(tiny_report: dict[str, Any], tmp_path: Path) -> None:
    out = plot(tiny_report, tmp_path / "bench.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
