"""report.json, report.md and front.png: every candidate, what shipped, and why the rest not."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPORT_FORMAT = "albert-edge-optimize-report/1"


def _pt(x: float | None) -> str:
    return "" if x is None else f"{100 * x:+.2f}"


def _ms(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def candidate_row(rec: Mapping[str, Any], pick: str) -> dict[str, Any]:
    """One candidate in report.json: bytes, W1, W2, the metric with its intervals, and
    shipped or why not."""
    row: dict[str, Any] = {
        "key": rec["key"],
        "spec": rec.get("spec"),
        "built": bool(rec.get("built")),
        "file_bytes": rec.get("file_bytes"),
        "ratio_to_floor": rec.get("ratio_to_floor"),
        "w1_ms": rec.get("w1_ms"),
        "w2_ms": rec.get("w2_ms"),
        "w1": rec.get("w1"),
        "w2": rec.get("w2"),
        "choose": rec.get("choose"),
        "report": rec.get("report"),
        "exit": rec.get("exit"),
        "prune": rec.get("prune"),
        "shipped": rec["key"] == pick,
    }
    if rec["key"] != pick:
        why = rec.get("why_not")
        row["why_not"] = (
            why if why is not None else "admitted; another candidate wins the objective"
        )
    return row


def build_report(
    *,
    plan: Mapping[str, Any],
    stages: Mapping[str, Any],
    records: Mapping[str, Mapping[str, Any]],
    pick: Mapping[str, Any],
    settings: Mapping[str, Any],
    notes: Sequence[str],
    timing: Mapping[str, Any] | None,
    elapsed_s: float,
    baseline: Mapping[str, Any] | None,
    rows_of: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """report.json. ``rows_of``: each part's rows (fit, choose, report): the file they
    came from, how many, and whether the model had trained on them."""
    rows = [candidate_row(r, str(pick["key"])) for r in records.values()]
    ratios: dict[str, Any] = {}
    if baseline is not None and baseline.get("file_bytes"):
        ratios["bytes_vs_full_depth_int8"] = pick["file_bytes"] / baseline["file_bytes"]
        if pick.get("w1_ms") and baseline.get("w1_ms"):
            ratios["w1_vs_full_depth_int8"] = pick["w1_ms"] / baseline["w1_ms"]
    return {
        "format": REPORT_FORMAT,
        "settings": dict(settings),
        "elapsed_s": round(elapsed_s, 1),
        "stages": dict(stages),
        "plan": dict(plan),
        "shipped": {
            "key": pick["key"],
            "file_bytes": pick["file_bytes"],
            "w1_ms": pick.get("w1_ms"),
            "w2_ms": pick.get("w2_ms"),
            "w1": pick.get("w1"),
            "w2": pick.get("w2"),
            "choose": pick.get("choose"),
            "report": pick.get("report"),
            "prune": pick.get("prune"),
            **ratios,
        },
        "timing": dict(timing or {}),
        "rows": {
            **dict(rows_of or {}),
            "figures": {
                "choose": "the rule's verdict (choose Δ) is measured on the choose rows",
                "report": "report Δ and the metric are measured on the report rows, never "
                "fitted or chosen on",
                "w1_w2": "W1 and W2 are timed on the first report rows "
                f"({(timing or {}).get('rows')} of them)",
            },
        },
        "notes": list(notes),
        "candidates": rows,
    }


def _cell(block: Mapping[str, Any] | None) -> str:
    if not block:
        return ""
    return f"{_pt(block['delta'])} [{_pt(block['low'])}, {_pt(block['high'])}]"


def pruned_cell(prune: Mapping[str, Any] | None) -> str:
    """A candidate's pruning in a table cell: heads and FFN neurons kept per shared
    layer, the encoder FLOPs factor; empty for an unpruned candidate."""
    if not prune:
        return ""
    from albert_edge.prune.plan import heads_label

    flops = prune.get("flops_ratio")
    return (
        f"heads {heads_label(prune['heads_keep'])}/{prune['of_heads']}, FFN {prune['ffn_keep']}/"
        f"{prune['of_ffn']}" + (f", FLOPs x{flops:.3f}" if flops is not None else "")
    )


def pruning_lines(stages: Mapping[str, Any]) -> list[str]:
    """The prune stage's result: per shared layer the heads kept and FFN neurons kept,
    the FLOPs factor, the weights kept (healed or not); or why it did not run."""
    st = stages.get("prune")
    if not st:
        return []
    if not st.get("ran"):
        return ["", "## Pruning", "", f"Not run: {st.get('why')}."]
    p = st.get("pruned") or {}
    lines = ["", "## Pruning", ""]
    if p:
        lines.append(
            f"The searched model at full depth, pruned on the fit rows: {pruned_cell(p)} "
            f"(encoder FLOPs at 128 tokens); {p.get('healed')}. The `-pruned-` candidates "
            "build from it (with its own depth search) and are judged by the same rule."
        )
        lines += ["", "| shared layer | heads kept | FFN neurons kept |", "|---|---|---:|"]
        for layer, x in sorted((p.get("layers") or {}).items(), key=lambda kv: int(kv[0])):
            lines.append(f"| {layer} | {x['heads_kept']} | {x['ffn_kept']} |")
    return lines


def markdown(report: Mapping[str, Any]) -> str:
    s = report["settings"]
    sh = report["shipped"]
    metric = (sh.get("report") or sh.get("choose") or {}).get("metric", "metric")
    lines = [
        "# albert-edge optimize",
        "",
        f"Shipped **{sh['key']}**: {sh['file_bytes']:,} bytes"
        + (f", W1 {sh['w1_ms']:.3f} ms" if sh.get("w1_ms") else "")
        + (f", W2 {sh['w2_ms']:.3f} ms" if sh.get("w2_ms") else "")
        + f"; {metric} vs the given model in PyTorch: choose rows {_cell(sh.get('choose'))} "
        f"points, report rows (never chosen on) {_cell(sh.get('report'))} points (paired 95 %)."
        + (f" Pruned: {pruned_cell(sh['prune'])}." if sh.get("prune") else ""),
        "",
        f"Budget: `--max-drop {s['max_drop_points']}` points of {metric} (and a 95 % lower "
        f"bound >= {s['min_lower_bound_points']}), objective {s['objective']}, target "
        f"{s['target']}, {s['max_minutes']} min; ran {report['elapsed_s'] / 60:.1f} min.",
    ]
    if report.get("verify_command"):  # the shipped artifact vs the given checkpoint, again
        lines += [
            "",
            f"Reproduce it against the given checkpoint: `{report['verify_command']}` (from the "
            "directory holding the output; rows optimize never read give an unbiased figure)",
            "",
        ]
    for k in ("bytes_vs_full_depth_int8", "w1_vs_full_depth_int8"):
        if k in sh:
            lines.append(f"- {k.replace('_', ' ')}: {sh[k]:.3f}x")
    for n in report["notes"]:
        lines.append(f"- note: {n}")
    lines += ["", "## Rows", ""]
    lines += rows_lines(report.get("rows") or {})
    lines += ["", "## Stages", ""]
    for name, st in report["stages"].items():
        state = "ran" if st.get("ran") else f"not run: {st.get('why')}"
        if st.get("cached"):
            state += " (by an earlier run, reused)"
        lines.append(f"- {name}: {state}")
    lines += pruning_lines(report["stages"])
    lines += [
        "",
        "## Candidates",
        "",
        "W1: batch 1, each timed report row padded to the --seq-len tokens; W2: batch 1, "
        "each row at its own length; 1 thread, the rows one at a time, the finalists "
        "interleaved, each row's fastest round: mean, p50 and p95 over the rows (a dynamic "
        "exit's cost depends on where each row stops). The objective compares means.",
        "",
        f"| candidate | pruned | bytes | W1 ms mean | W1 p50 | W1 p95 | W2 ms mean | W2 p95 | "
        f"choose Δ pt [95 %] | report Δ pt [95 %] | {metric} (report) | shipped / why not |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|---|",
    ]
    for r in report["candidates"]:
        rep = r.get("report") or {}
        verdict = "**shipped**" if r["shipped"] else str(r.get("why_not", ""))
        size = "" if r["file_bytes"] is None else f"{r['file_bytes']:,}"
        value = f"{100 * rep['value']:.2f}" if rep else ""
        w1, w2 = r.get("w1") or {}, r.get("w2") or {}
        lines.append(
            f"| {r['key']} | {pruned_cell(r.get('prune'))} | {size} | {_ms(r.get('w1_ms'))} | {_ms(w1.get('p50'))} | "
            f"{_ms(w1.get('p95'))} | {_ms(r.get('w2_ms'))} | {_ms(w2.get('p95'))} | "
            f"{_cell(r.get('choose'))} | {_cell(rep)} | {value} | {verdict} |"
        )
    return "\n".join(lines) + "\n"


def rows_lines(rows: Mapping[str, Any]) -> list[str]:
    """Which rows each figure was measured on, and whether the model had seen them."""
    out = []
    for part in ("fit", "choose", "report"):
        p = rows.get(part)
        if not p:
            continue
        seen = p.get("trained_on")
        if part == "fit":
            said = f"; {seen} of them trained on by the model" if seen else ""
        else:
            said = f"; trained on by the model: {seen}" if seen is not None else ""
        dropped = ", ".join(
            f"{p[k]} {k.removeprefix('dropped_').replace('_', ' ')} rows dropped"
            for k in ("dropped_trained", "dropped_fit")
            if p.get(k)
        )
        model = next(
            (
                f"; the given model scores {100 * v:.2f} {k[6:]} on them"
                for k, v in p.items()
                if k.startswith("model_")
            ),
            "",
        )
        lines = f"- {part}: {p.get('rows')} rows of {p.get('file')} ({p.get('from')}){said}"
        out.append(lines + (f"; {dropped}" if dropped else "") + model)
    for what in (rows.get("figures") or {}).values():
        out.append(f"- {what}")
    return out


def front_png(report: Mapping[str, Any], path: Path) -> None:
    """Accuracy against latency and against size, every built candidate, the pick marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    built = [r for r in report["candidates"] if r["built"] and r.get("choose")]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, key, label in (
        (axes[0], "w1_ms", "W1 p50 (ms)"),
        (axes[1], "file_bytes", "artifact bytes"),
    ):
        for r in built:
            x = r.get(key)
            if x is None:
                continue
            y = 100 * r["choose"]["delta"]
            admitted = r["shipped"] or r.get("why_not", "").startswith("admitted")
            ax.scatter([x], [y], marker="o", s=30, color="tab:blue" if admitted else "tab:gray")
            if r["shipped"]:
                ax.scatter([x], [y], marker="*", s=300, color="tab:red", zorder=3)
                ax.annotate(r["key"], (x, y), textcoords="offset points", xytext=(6, 6))
        ax.axhline(-float(report["settings"]["max_drop_points"]), ls="--", color="tab:red", lw=1)
        ax.set_xlabel(label)
        ax.set_ylabel("Δ vs PyTorch on the choose rows (points)")
        ax.grid(alpha=0.3)
    axes[0].set_title("accuracy / latency (timed finalists)")
    axes[1].set_title("accuracy / size (blue: admitted, star: shipped)")
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def write(report: Mapping[str, Any], out: Path, plot: bool = True) -> None:
    """``plot``: draw front.png (matplotlib, the [plots] extra; optimize says up front when
    it will not)."""
    (out / "report.json").write_text(
        json.dumps(report, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
    )
    (out / "report.md").write_text(markdown(report), encoding="utf-8")
    if plot:
        front_png(report, out / "front.png")
