"""Rendering benchmark reports: a Markdown table, a console table, and plots.

All three read only the ``albert-edge-bench/1`` JSON, so a report produced elsewhere
(``benchmarks/peers.py``, the Android demo, an ``--adb`` run) renders the same way.
A number that was not measured prints as "—", never as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

DASH = "—"


def mb(n: float | None) -> str:
    return DASH if n is None else f"{n / 1e6:.2f}"


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return DASH if x is None else fmt.format(x)


def sig(x: float | None, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits (no exponent for everyday magnitudes)."""
    if x is None:
        return DASH
    if x == 0:
        return "0"
    text = f"{x:.{digits}g}"
    if "e" in text:
        text = f"{x:.0f}" if abs(x) >= 1 else text
    return text


def _p(r: Mapping[str, Any], key: str) -> float | None:
    lat = r.get("latency_ms") or {}
    v = lat.get(key)
    return float(v) if isinstance(v, int | float) else None


COLUMNS = (
    "artifact",
    "backend",
    "precision",
    "batch",
    "seq",
    "threads",
    "size MB",
    "× floor",
    "load ms",
    "first ms",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "runs",
    "seq/s",
    "peak RSS MB",
    "GOP/s",
    "roofline",
    "status",
)


def row_cells(r: Mapping[str, Any]) -> list[str]:
    lat = r.get("latency_ms") or {}
    status = r.get("status", "?")
    if status != "ok" and r.get("reason"):
        status = f"{status}: {r['reason']}"
    frac = r.get("roofline_fraction")
    return [
        str(r.get("artifact")),
        str(r.get("backend")),
        str(r.get("precision")),
        str(r.get("batch")),
        str(r.get("seq_len")),
        str(r.get("threads")),
        mb(r.get("file_bytes")),
        _num(r.get("ratio_to_floor")),
        _num(r.get("load_ms"), "{:.0f}"),
        _num(r.get("first_inference_ms"), "{:.1f}"),
        sig(_p(r, "p50")),
        sig(_p(r, "p90")),
        sig(_p(r, "p99")),
        str(lat.get("runs", DASH)),
        sig(r.get("throughput_seq_per_s")),
        mb(r.get("peak_rss_bytes")),
        sig(r.get("gops")),
        DASH if frac is None else f"{sig(100 * frac, 2)}%",
        status,
    ]


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def grouped_rows(results: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Table rows: one per measured result; a backend skipped for the same reason at
    every shape collapses into one row (batch/seq/threads "*") instead of one per shape."""
    rows: list[list[str]] = []
    seen: dict[tuple[Any, ...], int] = {}
    for r in results:
        if r.get("status") == "skipped":
            key = (r.get("artifact"), r.get("backend"), r.get("reason"))
            if key in seen:
                row = rows[seen[key]]
                for col, field in ((3, "batch"), (4, "seq_len"), (5, "threads")):
                    if row[col] != str(r.get(field)):
                        row[col] = "*"
                continue
            seen[key] = len(rows)
        rows.append(row_cells(r))
    return rows


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def machine_line(report: Mapping[str, Any]) -> str:
    m = report.get("machine") or {}
    versions = ", ".join(f"{k} {v}" for k, v in (m.get("versions") or {}).items())
    ram = m.get("ram_bytes")
    ram_s = f", {ram / 2**30:.0f} GiB RAM" if isinstance(ram, int) else ""
    gpu = f", GPU {m['gpu']}" if m.get("gpu") else ", no GPU"
    kernel = ""
    if m.get("kernel") or m.get("cpu_flags"):
        kernel = f", kernel {m.get('kernel') or '?'} [{' '.join(m.get('cpu_flags') or [])}]"
    return (
        f"{m.get('cpu', '?')} ({m.get('logical_cores', '?')} logical cores{ram_s}{gpu}{kernel}); "
        f"{m.get('os', '?')}; Python {m.get('python', '?')}; {versions}"
    )


def roofline_lines(report: Mapping[str, Any]) -> list[str]:
    roof = report.get("roofline") or {}
    lines = []
    for device in ("cpu", "cuda"):
        for threads, table in sorted((roof.get(device) or {}).items()):
            for precision, best in sorted(table.items()):
                where = f"{device}, {threads} threads" if device == "cpu" else device
                lines.append(
                    f"- {where}, {precision}: {best['gops']:.1f} GOP/s "
                    f"({best['impl']}, M={best['m']} K={best['k']} N={best['n']})"
                )
    return lines


# What marks a report file as one bench wrote, so a re-run may replace it and nothing else
# (albert_edge.io.check_output_file): the JSON's schema, the Markdown's first line, the
# PNG's Software text chunk.
PLOT_SOFTWARE = "albert-edge bench"


def is_report_json(path: Path) -> bool:
    """A JSON report bench (or ``bench --recommend``) wrote: a ``schema`` of ours."""
    import json

    data = json.loads(path.read_text())
    return isinstance(data, dict) and str(data.get("schema", "")).startswith("albert-edge-")


def is_report_markdown(path: Path) -> bool:
    """A Markdown report :func:`to_markdown` wrote: its first line is our heading."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.readline().startswith("## albert-edge")


def is_report_plot(path: Path) -> bool:
    """A PNG :func:`plot` wrote: matplotlib puts ``Software`` in a text chunk up front."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    return head.startswith(b"\x89PNG") and PLOT_SOFTWARE.encode() in head


def to_markdown(report: Mapping[str, Any], title: str = "albert-edge benchmark") -> str:
    results = report.get("results") or []
    parts = [
        f"## {title}\n",
        f"{report.get('created', '')}: {machine_line(report)}\n",
    ]
    settings = report.get("settings") or {}
    if settings.get("inputs"):
        parts.append(f"Inputs: {settings['inputs']}.\n")
    roof = roofline_lines(report)
    if roof:
        parts.append(
            "Roofline (best measured GEMM throughput on the models' shapes; a row's "
            "fraction is the time its weight GEMMs take at the best rate of each exact "
            "shape ÷ its p50):\n"
        )
        parts.append("\n".join(roof) + "\n")
    parts.append(markdown_table(COLUMNS, grouped_rows(results)))
    return "\n".join(parts)


CONSOLE_COLUMNS = (
    "artifact",
    "backend",
    "precision",
    "batch",
    "seq",
    "threads",
    "size MB",
    "× floor",
    "load ms",
    "p50 ms",
    "p99 ms",
    "runs",
    "seq/s",
    "peak RSS MB",
    "GOP/s",
    "roofline",
    "status",
)


def text_table(report: Mapping[str, Any]) -> str:
    """A plain fixed-width table (any terminal width, pipes, logs); reasons as notes below."""
    idx = [COLUMNS.index(c) for c in CONSOLE_COLUMNS]
    rows = []
    notes: list[str] = []
    for cells in grouped_rows(report.get("results") or []):
        row = [cells[i] for i in idx]
        status = row[-1]
        if ": " in status:
            word, reason = status.split(": ", 1)
            if reason not in notes:
                notes.append(reason)
            row[-1] = f"{word} [{notes.index(reason) + 1}]"
        rows.append(row)
    header = [c.replace("peak RSS MB", "RSS MB") for c in CONSOLE_COLUMNS]
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines += [f"[{i}] {n}" for i, n in enumerate(notes, start=1)]
    return "\n".join(lines)


def print_table(report: Mapping[str, Any], file: Any = None) -> None:
    import sys

    print(text_table(report), file=file or sys.stdout)


def _label(r: Mapping[str, Any]) -> str:
    return f"{r.get('artifact')} · {r.get('backend')} · {r.get('precision')}"


def plot(report: Mapping[str, Any], out: str | Path) -> Path:
    """Latency (p50) vs sequence length per artifact/backend, and file size bars."""
    from albert_edge.extras import require

    require("plots", "plotting a bench report")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    results = [r for r in report.get("results") or [] if r.get("status") == "ok"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5.5))
    series: dict[tuple[str, int, int], list[tuple[int, float]]] = {}
    for r in results:
        p50 = _p(r, "p50")
        if p50 is None:
            continue
        key = (_label(r), int(r["batch"]), int(r["threads"]))
        series.setdefault(key, []).append((int(r["seq_len"]), p50))
    for (label, batch, threads), pts in sorted(series.items()):
        pts.sort()
        ax1.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker="o",
            label=f"{label} (b{batch}, t{threads})",
        )
    ax1.set_xlabel("sequence length (tokens)")
    ax1.set_ylabel("p50 latency (ms)")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_title("Latency vs sequence length")
    ax1.grid(True, which="both", alpha=0.3)
    if series:
        ax1.legend(fontsize=7, loc="upper left")
    sizes: dict[str, tuple[float, float | None]] = {}
    for r in report.get("results") or []:
        if r.get("file_bytes"):
            label = f"{r.get('artifact')} · {r.get('precision')}"
            sizes[label] = (r["file_bytes"] / 1e6, (r.get("floor_bytes") or 0) / 1e6 or None)
    labels = list(sizes)
    ax2.barh(labels, [sizes[k][0] for k in labels], color="#4c72b0", label="file")
    floors = [sizes[k][1] for k in labels]
    if any(f is not None for f in floors):
        ax2.scatter(
            [f if f is not None else float("nan") for f in floors],
            labels,
            color="#c44e52",
            marker="|",
            s=300,
            label="floor (unique params at precision)",
            zorder=3,
        )
        ax2.legend(fontsize=7)
    ax2.set_xlabel("MB")
    ax2.set_title("Size on disk")
    ax2.tick_params(axis="y", labelsize=7)
    fig.suptitle(machine_line(report)[:160], fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, metadata={"Software": PLOT_SOFTWARE})
    plt.close(fig)
    return out
