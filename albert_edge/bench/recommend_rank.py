"""``bench --recommend``'s ranking, pure (no model, no runtime): the pairwise latency
comparison round by round (:func:`compare`), the decision among candidate records
(:func:`choose`), the accuracy bars per precision (:func:`max_drop`, :func:`why_not`) and
the Wilson interval. The rule is explained in :mod:`albert_edge.bench.recommend`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from albert_edge.bench.evidence import (
    N_BOOT,
    SEED,
    latency_stat,
    round_matrix,
    timed_rounds,
    visit_minima,
)
from albert_edge.errors import BenchmarkError

# Accuracy a precision may lose against the checkpoint, in points.
MAX_DROP_POINTS = {"fp32": 0.1, "fp16": 0.2, "int8": 0.5, "int4": 1.5, "auto": 0.5}
MARGIN = 0.03  # a latency difference the data must exceed (whole 95 % interval) to count
RULE = (
    "ranked on each visit's fastest run (mean over the asked lengths), compared round by "
    "round (median ratio); a pair ties unless the 95 % bootstrap interval (over rounds) of "
    "its latency ratio lies wholly beyond "
    f"±{MARGIN * 100:g} %; among candidates no other is shown to beat, the smallest file ships, "
    "then the more accurate"
)


def max_drop(precision: str) -> float:
    """Allowed accuracy loss in points for ``precision`` (int8-* share int8's bar)."""
    return MAX_DROP_POINTS["int8" if precision.startswith("int8") else precision]


def name_of(row: Mapping[str, Any]) -> str:
    """A candidate's display name: its own ``name``, else "target precision"."""
    return str(row.get("name") or f"{row.get('target')} {row.get('precision')}")


def compare(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    *,
    margin: float = MARGIN,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> dict[str, Any]:
    """``a`` against ``b``: latency ratio a/b, its 95 % interval, and the verdict.

    Round by round: round k of both ran in the same interleaved pass, so the ratio of
    their visit minima in that round cancels what a phase of the machine did to both.
    The estimate is the median of those per-round ratios, its interval the 2.5-97.5 %
    percentiles of that median over ``n_boot`` resamples of the rounds. ``verdict`` is
    "a" (a is faster), "b", or "tie" when the interval reaches into [1/(1+margin),
    1+margin]. ``runs`` counts the timed runs behind each side.
    """
    import numpy as np

    ta, tb = timed_rounds(a), timed_rounds(b)
    lengths = sorted(set(ta) & set(tb), key=int)
    if not lengths:
        raise BenchmarkError(f"{name_of(a)} and {name_of(b)} share no timed length")
    n_rounds = min(min(len(ta[k]), len(tb[k])) for k in lengths)
    per_round = visit_minima(a, lengths, n_rounds) / visit_minima(b, lengths, n_rounds)
    idx = np.random.default_rng([seed, n_rounds]).integers(0, n_rounds, (n_boot, n_rounds))
    medians = np.median(per_round[idx], axis=1)
    low, high = (float(x) for x in np.percentile(medians, [2.5, 97.5]))
    if high < 1.0 / (1.0 + margin):
        verdict = "a"
    elif low > 1.0 + margin:
        verdict = "b"
    else:
        verdict = "tie"
    runs = sum(int(np.isfinite(round_matrix(ta[k][:n_rounds])).sum()) for k in lengths)
    return {
        "a": name_of(a),
        "b": name_of(b),
        "ratio": float(np.median(per_round)),
        "low": low,
        "high": high,
        "verdict": verdict,
        "a_faster_rounds": int((per_round < 1.0).sum()),
        "rounds": n_rounds,
        "lengths": [int(k) for k in lengths],
        "runs": runs,
    }


def tie_key(row: Mapping[str, Any]) -> tuple[float, float, float, str]:
    size = row.get("file_bytes")
    acc = row.get("accuracy")
    return (
        float(size) if isinstance(size, int | float) and size > 0 else math.inf,
        -float(acc) if isinstance(acc, float) else 0.0,
        latency_stat(row),
        name_of(row),
    )


def choose(
    rows: Sequence[Mapping[str, Any]],
    *,
    margin: float = MARGIN,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> dict[str, Any]:
    """The decision among candidate records ``rows``: what ships, and on which comparisons.

    A row takes part when ``eligible`` is true and it has ``rounds_ms`` (per length, the
    samples of each interleaved round; the rows should come from one interleaved
    measurement, since round k of each is paired with round k of the others);
    ``file_bytes`` and ``accuracy`` break ties. Every pair is compared (:func:`compare`);
    a row some other row is shown to beat drops out; of the rest (mutual ties) the
    smallest file ships, then the more accurate, then the lower :func:`latency_stat`.
    Returns ``{"pick": row | None, "contenders": [names],
    "comparisons": [...], "relied_on": [the comparisons that involve the pick], "rule"}``.
    """
    ok = [r for r in rows if r.get("eligible") and timed_rounds(r)]
    decision: dict[str, Any] = {"pick": None, "contenders": [], "comparisons": [], "rule": RULE}
    decision["relied_on"] = []
    if not ok:
        return decision
    comps = [compare(a, b, margin=margin, n_boot=n_boot, seed=seed) for a, b in combinations(ok, 2)]
    beaten = {c["b"] if c["verdict"] == "a" else c["a"] for c in comps if c["verdict"] != "tie"}
    contenders = [r for r in ok if name_of(r) not in beaten] or [min(ok, key=latency_stat)]
    pick = min(contenders, key=tie_key)
    decision.update(
        pick=dict(pick),
        contenders=[name_of(r) for r in contenders],
        comparisons=comps,
        relied_on=[c for c in comps if name_of(pick) in (c["a"], c["b"])],
    )
    return decision


def wilson(correct: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson 95 % interval of an accuracy of ``correct``/``n`` (fractions)."""
    if n <= 0:
        return (0.0, 1.0)
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def why_not(row: Mapping[str, Any], ref_acc: float | None) -> str | None:
    if row.get("error"):
        return str(row["error"])
    if row.get("verified") is False:
        return "failed verification against the checkpoint"
    if not timed_rounds(row):
        return "did not run at every asked length"
    acc = row.get("accuracy")
    # a task file's checkpoint figure is taken at the candidate's own input length
    ref_acc = row.get("reference_accuracy", ref_acc)
    if ref_acc is not None and isinstance(acc, float):
        drop = (ref_acc - acc) * 100.0
        if drop > max_drop(str(row["precision"])):
            return (
                f"loses {drop:.2f} {row.get('metric', 'accuracy')} points on the choose split "
                f"(> {max_drop(str(row['precision']))} allowed for {row['precision']})"
            )
    return None
