"""``bench --recommend``'s printout: the candidates' table (size, min, typical and p50
latency, the metric with its paired difference), the comparisons the pick rests on, each
axis's section (depth and exit, vocabulary, pruning), the accuracy split, then the pick."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from albert_edge.bench.recommend_rank import MARGIN, RULE, name_of, tie_key


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %"


def _acc_cell(row: Mapping[str, Any]) -> str:
    if not isinstance(row.get("accuracy"), float):
        return "-"
    d = row.get("delta_vs_checkpoint") or {}
    return f"{_pct(row['accuracy'])} ({d.get('points', 0.0):+.2f})"


def _mark(row: Mapping[str, Any], decision: Mapping[str, Any]) -> str:
    pick = decision.get("pick")
    if pick is not None and name_of(row) == name_of(pick):
        return "SHIP"
    if row.get("why_not"):
        return f"({row['why_not']})"
    for c in decision.get("relied_on", []):
        if name_of(row) in (c["a"], c["b"]):
            if c["verdict"] != "tie":
                return "slower"
            smaller = tie_key(pick or {})[0] < tie_key(row)[0]
            return "tie (ship is smaller)" if smaller else "tie (ship wins the tie-break)"
    return ""


def format_recommendation(result: Mapping[str, Any]) -> str:
    """The human answer: the table (min, p10, p50 per candidate, ties marked), the pairwise
    comparisons the pick rests on, the accuracy split, then the pick (or why none)."""
    cpu = (result.get("machine") or {}).get("cpu", "this CPU")
    t = result.get("timing") or {}
    decision = result.get("decision") or {}
    w = max([20, *(len(name_of(r)) for r in result["candidates"])])
    lines = [
        f"recommend: {result['checkpoint']} at seq {result['seq_lens']}, "
        f"{result['threads']} threads, on {cpu}",
        f"  timed interleaved: {t.get('rounds')} rounds x {t.get('runs_per_visit')} runs per "
        f"candidate and length (warm-up {t.get('warmup')} per visit); ms: mean over lengths; "
        "typ.: median over rounds of each visit's fastest run",
        f"  {'candidate':{w}} {'size':>9} {'min ms':>8} {'typ. ms':>8} "
        f"{'p50 ms':>8} {_metric_name(result) + ' (Δ pts)':>18}",
    ]
    for r in result["candidates"]:
        size = f"{r['file_bytes'] / 1e6:.2f} MB" if r.get("file_bytes") else "-"
        cells = [f"{r[k]:.3f}" if r.get(k) is not None else "-" for k in ("min_ms", "stat_ms")]
        p50 = f"{r['mean_p50_ms']:.3f}" if r.get("mean_p50_ms") is not None else "-"
        lines.append(
            f"  {name_of(r):{w}} {size:>9} {cells[0]:>8} {cells[1]:>8} {p50:>8} "
            f"{_acc_cell(r):>18}  {_mark(r, decision)}"
        )
    lines += _comparison_lines(decision)
    if result.get("depth_exit"):
        from albert_edge.bench.recommend_depth import format_depth_exit

        lines += format_depth_exit(result)
    if result.get("vocabulary"):
        from albert_edge.bench.recommend_vocab import format_vocab

        lines += format_vocab(result)
    if result.get("pruning"):
        from albert_edge.bench.recommend_prune import format_prune

        lines += format_prune(result)
    acc = result.get("accuracy")
    if acc:
        lines += _accuracy_lines(acc)
        ruled = result.get("depth_exit") or result.get("vocabulary")
        if ruled:
            lines.append(f"  and the rule: {ruled['rule_text']}")
    pick = decision.get("pick")
    if pick is None:
        lines.append("ship: none of the candidates ran and kept accuracy (see the reasons)")
    else:
        lines.append(
            f"ship: {name_of(pick)} — {pick['file_bytes'] / 1e6:.2f} MB, "
            f"typical {pick['stat_ms']:.3f} ms (min {pick['min_ms']:.3f}, "
            f"p50 {pick['mean_p50_ms']:.3f}), verified against the checkpoint" + _shape_note(pick)
        )
    return "\n".join(lines)


def _shape_note(pick: Mapping[str, Any]) -> str:
    """What the pick is beyond its precision: a depth, or a dynamic exit (not one file)."""
    if pick.get("kind") == "depth":
        return f"; depth {pick['depth']} (a truncated checkpoint, converted as usual)"
    if pick.get("kind") == "vocab":
        v = pick["vocab"]
        return (
            f"; vocabulary trimmed to {v['pieces_kept']} of {v['of_pieces']} pieces for "
            f"{v['corpus']['file']} (ship its own tokenizer: the artifact's spiece.model)"
        )
    if pick.get("kind") == "prune":
        from albert_edge.prune.plan import heads_label

        lv = pick["prune"]
        heads = heads_label(lv["heads_keep"])
        return (
            f"; pruned to {heads} of {lv['of_heads']} heads and {lv['ffn_keep']} of "
            f"{lv['of_ffn']} FFN neurons per shared layer (encoder FLOPs x{lv['flops_ratio']:.3f}),"
            " unhealed: `albert-edge prune CKPT --data ROWS -o DIR --heads-keep "
            f"{heads} --ffn-keep {lv['ffn_keep']}` also heals it"
        )
    if pick.get("kind") == "early-exit":
        from albert_edge.bench.recommend_depth import NOT_STANDARD

        return (
            f"; dynamic exit, policy {pick.get('policy')} (mean depth "
            f"{pick.get('mean_depth', 0):.2f} on the choose split); {NOT_STANDARD}"
        )
    return ""


def _comparison_lines(decision: Mapping[str, Any]) -> list[str]:
    relied = decision.get("relied_on") or []
    pick = decision.get("pick")
    if pick is None or not relied:
        return []
    me = name_of(pick)
    lines = [f"comparisons the pick rests on (rule: {decision.get('rule', RULE)}):"]
    for c in relied:
        other = c["b"] if c["a"] == me else c["a"]
        flip = c["a"] != me  # show as pick / other
        ratio, low, high = c["ratio"], c["low"], c["high"]
        if flip:
            ratio, low, high = 1 / ratio, 1 / high, 1 / low
        if c["verdict"] == "tie" and low <= 1.0 <= high:
            why = "TIE: the data cannot separate them"
        elif c["verdict"] == "tie":
            why = f"TIE: not shown to differ by more than {MARGIN * 100:g} %"
        else:
            why = (
                f"{'faster' if ratio < 1 else 'slower'}, decided by {c['rounds']} rounds, "
                f"{c['runs']} timed runs each"
            )
        lines.append(f"  {me} / {other}: {ratio:.3f} [95 % {low:.3f}, {high:.3f}] — {why}")
    return lines


def _metric_name(result: Mapping[str, Any]) -> str:
    """The metric the accuracy column holds: accuracy, or a task file's (entity F1,
    SQuAD F1)."""
    task, metric = result.get("task"), result.get("metric") or "accuracy"
    if task == "token-classification":
        return "entity F1"
    if task == "question-answering":
        return "SQuAD F1"
    return str(metric)


def _accuracy_lines(acc: Mapping[str, Any]) -> list[str]:
    metric = acc.get("metric", "accuracy")
    lines = [
        f"{metric if metric == 'accuracy' else metric + ' (the task metric)'}: {acc['split']}",
        "  eligible: built, verified, timed at every length, and on the choose split within "
        "the precision's bar of the checkpoint (fp32 0.1, fp16 0.2, int8 0.5, int4 1.5 points)",
    ]
    ck = acc["checkpoint"]
    lo, hi = ck["accuracy_interval"]
    lines.append(
        f"  report split ({ck['examples']} {'rows' if metric == 'accuracy' else 'examples'}, "
        "not used to choose): checkpoint "
        f"{_pct(ck['accuracy'])} [95 % {_pct(lo)}, {_pct(hi)}]"
    )
    pick = acc.get("pick")
    if pick:
        lo, hi = pick["accuracy_interval"]
        d = pick["delta_vs_checkpoint"]
        lines.append(
            f"  report split: pick {_pct(pick['accuracy'])} [95 % {_pct(lo)}, {_pct(hi)}], "
            f"{d['points']:+.2f} points vs checkpoint [paired 95 % {d['low']:+.2f}, "
            f"{d['high']:+.2f}]"
        )
    return lines
