"""``bench --recommend`` over precision × depth × exit policy (issue 27 item 4).

Beside the full-depth precisions, two more kinds of candidate:

* **a fixed depth** ``k < L``: for every depth the depth search admits on *its own*
  held-out rows (``albert-edge depth search``; the depth package's rule), each asked
  (target, precision) converted from the truncated checkpoint, as ``convert --depth k``
  does (:func:`albert_edge.depth.convert_at_depth`). Depths the search rejects are listed
  with its reason and not built;
* **a dynamic exit** (ONNX fp32 / int8-dynamic): exit heads fitted on ``--exit-data``
  exactly as ``albert-edge early-exit`` fits them, the policy (a confidence threshold or a
  PABEE patience) chosen on the *choose* split by the same rule — the lowest mean depth
  among the admitted — and recorded in the artifact as its default policy.

**One rule.** Every candidate is judged on the choose split against the checkpoint, on
the same rows, by :class:`albert_edge.depth.Rule` (point loss and the paired 95 % lower
bound), in addition to its precision's bar; it is not restated here.

**Timing a dynamic exit.** Its latency depends on how far each sentence runs, but the
interleaved timing repeats one input per length and ranks by each visit's fastest run,
which would time one sentence's exit depth. So the stepped artifact is timed once per
exit depth ``k`` that occurs, with every row exiting at ``k``
(:class:`albert_edge.early_exit.policy.FixedDepth`: the steps and head runs a row that
exits at ``k`` costs under the chosen policy), each interleaved with all other
candidates, and its time in round ``r`` is ``sum_k p_k t_k(r)``, ``p_k`` the share of
choose-split rows the chosen policy stops at exit ``k``. :func:`mix_timing` is that sum.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.early_exit.choose import exit_policies, pick_policy
from albert_edge.errors import AlbertEdgeError, BenchmarkError

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.depth import Rule
    from albert_edge.early_exit.policy import ExitPolicy

NOT_STANDARD = (
    "not a single standard model file: ONNX graphs stepped by albert_edge.early_exit "
    "(optimum / transformers.js cannot load it as written)"
)


def rule_why_not(row: Mapping[str, Any], rule: Rule) -> str | None:
    """The depth package's rule on a row's choose-split difference to the checkpoint
    (``delta_vs_checkpoint`` in points, converted to the rule's fractions)."""
    d = row.get("delta_vs_checkpoint")
    if not isinstance(d, Mapping):
        return rule.why_not({})
    return rule.why_not({"delta": d["points"] / 100.0, "delta_low": d["low"] / 100.0})


def policy_evidence(
    per_exit: np.ndarray,
    labels: Sequence[int],
    reference_right: Sequence[bool],
    rule: Rule,
    policies: Sequence[ExitPolicy],
) -> list[dict[str, Any]]:
    """Per policy on the same rows: mean depth, share of rows per exit, accuracy, the
    paired difference to the checkpoint with its interval, and the rule's verdict
    (:func:`albert_edge.early_exit.choose.policy_evidence` under the depth rule)."""
    from albert_edge.early_exit import choose

    return choose.policy_evidence(
        per_exit, labels, reference_right, lambda row: rule_why_not(row, rule), policies
    )


def mix_timing(row: dict[str, Any], variants: Sequence[tuple[float, Mapping[str, Any]]]) -> None:
    """Give ``row`` the timing fields of ``sum_k p_k t_k``: ``variants`` are (p_k, the
    timed row of the artifact with every row exiting at k). Per round, each variant's
    visit minimum is weighted (so the round pairing with other candidates holds); min
    and p50 are weighted the same way. A variant without timings leaves ``row`` untimed."""
    import numpy as np

    from albert_edge.bench.evidence import latency_stat, round_matrix, timed_rounds

    timed = [(p, timed_rounds(v), v) for p, v in variants if p > 0]
    row["rounds_ms"] = {}
    if not timed or not all(t for _, t, _ in timed):
        return
    lengths = sorted(set.intersection(*(set(t) for _, t, _ in timed)), key=int)
    if not lengths:
        return
    for s in lengths:
        n = min(len(t[s]) for _, t, _ in timed)
        mins = sum(p * np.nanmin(round_matrix(t[s][:n]), axis=1) for p, t, _ in timed)
        row["rounds_ms"][s] = [[float(v)] for v in mins]
    row["p50_ms"] = {s: sum(p * v["p50_ms"][s] for p, _, v in timed) for s in lengths}
    row["min_ms_by_len"] = {s: sum(p * v["min_ms_by_len"][s] for p, _, v in timed) for s in lengths}
    row["mean_p50_ms"] = sum(row["p50_ms"].values()) / len(lengths)
    row["min_ms"] = sum(row["min_ms_by_len"].values()) / len(lengths)
    row["stat_ms"] = latency_stat(row)


# --- building ------------------------------------------------------------------------------


def depth_candidates(
    ckpt: Any,
    search_dir: Path,
    candidates: Sequence[tuple[str, str]],
    build: Callable[..., tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Path]]]],
    rule: Rule,
) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Path]], dict[str, Any]]:
    """Rows and built artifacts for every depth k < L the search admits (each candidate
    precision), rows with the search's reason for the others; and the search's verdict.

    ``build(candidates, at_depth=(search, k))`` converts (``recommend._build``)."""
    from albert_edge.depth import choose, load_search, search_candidates
    from albert_edge.depth.truncate import check_same_source

    search = load_search(search_dir)
    check_same_source(ckpt, search)  # heads fitted on another model: refuse in one line
    layers = int(ckpt.config.num_hidden_layers)
    verdict = choose(search_candidates(search), rule)
    rows: list[dict[str, Any]] = []
    built: list[tuple[dict[str, Any], Path]] = []
    for ev in verdict["evidence"]:
        k = int(ev["depth"])
        if k >= layers:
            continue
        held = {
            "delta": ev["delta"],
            "low": ev["delta_low"],
            "high": ev["delta_high"],
            "why_not": ev["why_not"],
        }
        if ev["why_not"] is not None:
            rows.append(
                {
                    "kind": "depth",
                    "name": f"depth {k} (any precision)",
                    "target": "-",
                    "precision": "-",
                    "depth": k,
                    "search_held_out": held,
                    "error": f"not built: the depth search's held-out rows: {ev['why_not']}",
                }
            )
            continue
        r, b = build(candidates, at_depth=(search, k))
        for row in r:
            row["search_held_out"] = held
        rows += r
        built += b
    return rows, built, {"search": str(search_dir), "data": search.data, "rule": verdict["rule"]}


def _exit_row(precision: str) -> dict[str, Any]:
    return {
        "kind": "early-exit",
        "target": "onnx",
        "precision": precision,
        "name": f"onnx {precision} exit",
        "standard_file": False,
    }


def exit_candidates(
    ckpt: Any,
    exit_data: Path,
    fit_rows: int,
    candidates: Sequence[tuple[str, str]],
    scorer: Any,
    work: Path,
    rule: Rule,
    say: Callable[[str], None],
) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Path]], list[Any]]:
    """(rows, built: the artifacts to score, timing variants: (row, [(p_k, variant row)],
    [(variant row, dir)])) for each ONNX precision dynamic exit supports."""
    from albert_edge.early_exit.artifact import PRECISIONS, build_early_exit_artifact
    from albert_edge.early_exit.fit import fit_heads_on, fit_rows_of
    from albert_edge.sealed import made_from

    precisions = [p for t, p in candidates if t == "onnx" and p in PRECISIONS]
    if not precisions:
        return [], [], []
    fit = fit_rows_of(exit_data, fit_rows, 0, ckpt.path)
    say(f"recommend: fitting exit heads on {len(fit.examples)} rows of {exit_data} ...")
    heads = fit_heads_on(ckpt, fit, 0)
    rows, built, variants = [], [], []
    for precision in precisions:
        row = _exit_row(precision)
        rows.append(row)
        base = work / f"onnx-{precision}-exit-off"
        say(f"recommend: building the dynamic-exit artifact at {precision} ...")
        try:
            fitted_on = made_from(data={"data": exit_data}, with_checkpoint=False)
            build_early_exit_artifact(
                ckpt, base, heads, precision=precision, overwrite=True, made_from=fitted_on
            )
            done = _choose_and_copy(row, base, scorer, work, rule)
        except AlbertEdgeError as exc:
            row["error"] = f"dynamic exit failed: {exc}"
            continue
        if done is not None:
            built.append((row, Path(row["artifact"])))
            variants.append((row, *done))
    return rows, built, variants


def _choose_and_copy(
    row: dict[str, Any], base: Path, scorer: Any, work: Path, rule: Rule
) -> tuple[list[tuple[float, dict[str, Any]]], list[tuple[dict[str, Any], Path]]] | None:
    """Choose the policy on the choose split, write the candidate (its default policy) and
    one fixed-depth copy per exit that occurs; None (and ``row["error"]``) when no policy
    passes the rule."""
    from albert_edge.bench.evidence import per_row_outputs
    from albert_edge.early_exit.artifact import with_policy
    from albert_edge.early_exit.policy import FixedDepth, parse_policy
    from albert_edge.early_exit.runner import EarlyExitRunner

    runner = EarlyExitRunner(base, threads=scorer.threads)
    choose_rows = scorer.splits["choose"]
    per_exit = per_row_outputs(
        runner.all_exits,
        scorer.ckpt.tokenizer(),
        [t for _, t in choose_rows],
        min(scorer.max_len, int(runner.embed.max_seq_len)),
    )
    evidence = policy_evidence(
        per_exit,
        [y for y, _ in choose_rows],
        scorer.checkpoint("choose"),
        rule,
        exit_policies(runner.num_exits),
    )
    row["policy_evidence"] = evidence
    pick = pick_policy(evidence)
    if pick is None:
        row["error"] = "no exit policy passes the rule on the choose split"
        return None
    tag = f"onnx-{row['precision']}-exit"
    manifest = with_policy(base, work / tag, parse_policy(pick["policy"]), overwrite=True)
    sizes = manifest.get("sizes") or {}
    row.update(
        policy=pick["policy"],
        mean_depth=pick["mean_depth"],
        exit_share=pick["exit_share"],
        artifact=str(work / tag),
        verified=True,  # build_early_exit_artifact verified the graph it cut (convert's check)
        file_bytes=sizes.get("file_bytes"),
        ratio_to_floor=sizes.get("ratio_to_floor"),
    )
    mix, timed = [], []
    for k, share in enumerate(pick["exit_share"], start=1):
        if share <= 0:
            continue
        out = work / f"{tag}-at{k}"
        with_policy(base, out, FixedDepth(k), overwrite=True)
        variant = {**_exit_row(row["precision"]), "kind": "exit-timing", "exit_at": k}
        mix.append((share, variant))
        timed.append((variant, out))
    return mix, timed


def check_flags(
    depth_search: Path | None,
    exit_data: Path | None,
    data: Path | None,
    *,
    exit_fit_rows: int = 2000,
    candidates: Sequence[tuple[str, str]] | None = None,
) -> None:
    """Refuse, before any work, what cannot give a depth or exit candidate a verdict:
    a missing ``--data``, a missing path, ``--exit-data`` that is ``--data``, exit rows that
    cannot fit a head (empty, one class, too few per class), and ``--exit-data`` when no
    candidate can run dynamic exit (it would be ignored)."""
    if (depth_search is not None or exit_data is not None) and data is None:
        flag = "--depth-search" if depth_search is not None else "--exit-data"
        raise BenchmarkError(
            f"{flag} needs --data: depth and exit candidates are admitted by their accuracy "
            "on the choose split"
        )
    for path, flag in ((depth_search, "--depth-search"), (exit_data, "--exit-data")):
        if path is not None and not Path(path).exists():
            raise BenchmarkError(f"{path}: no such file or directory (given as {flag})")
    if exit_data is not None and data is not None and exit_data.resolve() == data.resolve():
        raise BenchmarkError(
            f"{exit_data}: --exit-data is also --data; fit the exit heads on other rows "
            "(e.g. the training set) than the ones that choose the policy and report"
        )
    if exit_data is not None:
        from albert_edge.early_exit.artifact import PRECISIONS
        from albert_edge.early_exit.fit import fit_rows_of, read_rows

        if candidates is not None and not any(
            t == "onnx" and p in PRECISIONS for t, p in candidates
        ):
            raise BenchmarkError(
                "--exit-data adds dynamic-exit candidates, which run on ONNX "
                f"({', '.join('onnx:' + p for p in PRECISIONS)}); none is in --candidates, "
                "so it would be ignored: add one or drop --exit-data"
            )
        fit_rows_of(exit_data, exit_fit_rows, 0)  # empty, one class, too few rows: refused
        if depth_search is None:  # --recommend runs the depth search on these rows itself
            from albert_edge.depth import SplitSettings
            from albert_edge.depth.search import split_sizes

            total = len(read_rows(exit_data).examples)
            split = SplitSettings(fit_rows=exit_fit_rows)
            try:
                split_sizes(total, split)
            except AlbertEdgeError as exc:
                raise BenchmarkError(
                    f"{exit_data}: --exit-data also feeds the depth search --recommend runs "
                    f"without --depth-search, and {exc}"
                ) from None


# --- printing -------------------------------------------------------------------------------


def _delta_cell(d: Mapping[str, Any] | None) -> str:
    if not isinstance(d, Mapping):
        return "-"
    return f"{d['points']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]"


def _depth_of(row: Mapping[str, Any], layers: int) -> str:
    k = row.get("depth")
    return f"{k if k is not None else layers}/{layers}"


def format_depth_exit(result: Mapping[str, Any]) -> list[str]:
    """The evidence over depth × exit policy: per candidate depth, policy, mean depth,
    choose-split Δ vs the checkpoint [paired 95 %], typical ms, verdict; then how each
    exit policy was chosen, and which candidates are not a standard model file."""
    info = result["depth_exit"]
    layers = int(info["layers"])
    lines = [
        f"depth x exit policy: rule on the choose split vs the checkpoint: {info['rule_text']}",
        f"  {'candidate':28} {'depth':>5} {'policy':>16} {'mean d':>6} "
        f"{'Δ pts [95 %]':>22} {'typ. ms':>8}  verdict",
    ]
    for r in result["candidates"]:
        policy = str(r.get("policy", "off"))
        mean = r.get("mean_depth", r.get("depth", layers))
        typ = f"{r['stat_ms']:.3f}" if r.get("stat_ms") is not None else "-"
        verdict = "eligible" if r.get("eligible") else f"not eligible: {r.get('why_not')}"
        lines.append(
            f"  {r.get('name') or r['target'] + ' ' + r['precision']:28} "
            f"{_depth_of(r, layers):>5} {policy:>16} {float(mean):>6.2f} "
            f"{_delta_cell(r.get('delta_vs_checkpoint')):>22} {typ:>8}  {verdict}"
        )
        held = r.get("search_held_out")
        if held and not r.get("error"):
            lines.append(
                f"    depth search, its held-out rows: {100 * held['delta']:+.2f} points "
                f"[{100 * held['low']:+.2f}, {100 * held['high']:+.2f}] vs full depth: admitted"
            )
        if r.get("kind") == "early-exit" and r.get("exit_share"):
            shares = ", ".join(f"{100 * p:.0f} % at {k}" for k, p in enumerate(r["exit_share"], 1))
            lines.append(f"    exits on the choose split: {shares}; {NOT_STANDARD}")
    lines += _policy_lines(result["candidates"])
    if any(r.get("kind") == "early-exit" for r in result["candidates"]):
        lines.append(
            "  dynamic-exit time = sum over k of (share of choose rows exiting at k) x (the "
            "stepped artifact timed with every row exiting at k, interleaved with the rest)"
        )
    return lines


def _policy_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for r in rows:
        evidence = r.get("policy_evidence")
        if not evidence:
            continue
        admitted = [e for e in evidence if e["why_not"] is None]
        lines.append(
            f"  {r['name']}: exit policy chosen on the choose split ({len(admitted)} of "
            f"{len(evidence)} admitted; lowest mean depth wins): {r.get('policy', 'none')}"
        )
        for e in evidence:
            mark = "<- chosen" if e["policy"] == r.get("policy") else (e["why_not"] or "")
            lines.append(
                f"    {e['policy']:>16}  mean depth {e['mean_depth']:.2f}  "
                f"Δ {_delta_cell(e['delta_vs_checkpoint'])}  {mark}"
            )
    return lines


# Where the depth search that --recommend runs itself is written, inside its work dir.
OWN_SEARCH = "depth-search"


def run_depth_search(
    ckpt: Any, train: Path, fit_rows: int, work: Path, say: Callable[[str], None]
) -> Path:
    """``albert-edge depth search`` on ``train`` (the training rows, ``--exit-data``: never
    the rows that choose and report) into ``work/depth-search``, sealed as the command
    writes it: ``fit_rows`` fit the heads, the rest (at most 5,000; a quarter of a smaller
    file) is the search's own held-out split. What ``--recommend`` ranks depths from when
    no ``--depth-search`` is given."""
    from albert_edge.depth import (
        Rule,
        SplitSettings,
        choose,
        format_choice,
        save_search,
        search_candidates,
        search_depths,
    )
    from albert_edge.depth.command import evidence_lines

    out = work / OWN_SEARCH
    split = SplitSettings(fit_rows=fit_rows, held_out_rows=SplitSettings().held_out_rows)
    say(f"recommend: depth search on {train} (no --depth-search given) ...")
    search = search_depths(ckpt, train, split=split)
    text = format_choice(choose(search_candidates(search), Rule()), "held-out (choose here)")
    text += evidence_lines(search)
    save_search(search, out, markdown=text, inputs=[Path(ckpt.path), train])
    return out


def add_depth_exit(
    ckpt: Any,
    *,
    depth_search: str | Path | None,
    exit_data: str | Path | None,
    exit_fit_rows: int,
    candidates: Sequence[tuple[str, str]],
    build: Callable[..., tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Path]]]],
    scorer: Any,
    work: Path,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Every depth and exit candidate: ``rows`` (printed, ranked), ``built`` (scored on the
    choose split), ``timed`` (what the interleaved timing runs instead of the dynamic-exit
    candidates themselves), ``mixes`` (row, [(p_k, variant row)]) and ``info`` (the rule,
    the search) for the printout; all empty (``info`` and ``rule`` None) without either."""
    out: dict[str, Any] = {"rows": [], "built": [], "timed": [], "mixes": []}
    if depth_search is None and exit_data is None:
        return {**out, "info": None, "rule": None}
    from albert_edge.depth import Rule

    rule = Rule()
    info: dict[str, Any] = {
        "rule": {"max_point_loss": rule.max_point_loss, "min_lower_bound": rule.min_lower_bound},
        "rule_text": rule.describe().replace("full depth", "the checkpoint"),
        "layers": int(ckpt.config.num_hidden_layers),
    }
    if depth_search is None and exit_data is not None:
        depth_search = run_depth_search(ckpt, Path(exit_data), exit_fit_rows, work, say)
    if depth_search is not None:
        rows, built, info["depth_search"] = depth_candidates(
            ckpt, Path(depth_search), candidates, build, rule
        )
        out["rows"] += rows
        out["built"] += built
        out["timed"] += built
    if exit_data is not None:
        rows, built, variants = exit_candidates(
            ckpt, Path(exit_data), exit_fit_rows, candidates, scorer, work, rule, say
        )
        out["rows"] += rows
        out["built"] += built
        for row, mix, timed in variants:
            out["mixes"].append((row, mix))
            out["timed"] += timed
        info["exit_data"] = str(exit_data)
        info["exit_fit_rows"] = exit_fit_rows
    out["info"] = info
    out["rule"] = rule
    return out
