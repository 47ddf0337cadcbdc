"""Choosing an exit policy on held-out rows: the evidence per policy and the pick.

One implementation for ``albert-edge early-exit --max-drop`` and ``bench --recommend
--exit-data``: both simulate every candidate policy (:func:`albert_edge.early_exit.simulate`)
on every exit's logits of the same rows, pair each policy's right/wrong answers with the
full-depth model's on those rows (paired bootstrap, 95 %), let a caller's rule say which
are admitted, and take the lowest mean depth among them. The rule is a callable so that
the benchmark can apply the depth package's :class:`albert_edge.depth.Rule` (a layer
above this one) and the command its ``--max-drop``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.early_exit.policy import ExitPolicy

# Confidence thresholds searched on the choosing rows.
EXIT_THRESHOLDS = (0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99, 0.995)
# Bootstrap of every paired interval here: the benchmark's (bench/evidence.py) resamples
# and seed, so the command and bench --recommend print the same interval for the same rows.
RESAMPLES = 2000
SEED = 0

WhyNot = Callable[[Mapping[str, Any]], "str | None"]


def confidence_policies() -> list[ExitPolicy]:
    """Every confidence threshold of :data:`EXIT_THRESHOLDS`."""
    from albert_edge.early_exit.policy import Confidence

    return [Confidence(t) for t in EXIT_THRESHOLDS]


def exit_policies(num_exits: int) -> list[ExitPolicy]:
    """Every confidence threshold, and patience 1..L-2 (patience L-1 can only stop at the
    last exit, which is policy off)."""
    from albert_edge.early_exit.policy import Patience

    return confidence_policies() + [Patience(t) for t in range(1, max(1, num_exits - 1))]


def paired_points(right_a: Sequence[bool], right_b: Sequence[bool]) -> dict[str, float]:
    """Accuracy of a minus b on the same rows, in points, with its paired bootstrap 95 %
    interval; no rows is no difference."""
    from albert_edge.tasks import paired_bootstrap

    if len(right_a) == 0:
        return {"points": 0.0, "low": 0.0, "high": 0.0}
    iv = paired_bootstrap(list(right_a), list(right_b), resamples=RESAMPLES, seed=SEED)
    return {"points": iv.delta * 100.0, "low": iv.low * 100.0, "high": iv.high * 100.0}


def policy_row(
    per_exit: np.ndarray, labels: Sequence[int], reference_right: Sequence[bool], policy: Any
) -> dict[str, Any]:
    """One policy on rows ``[rows, L, labels]``: mean depth, share of rows per exit,
    accuracy, and the paired difference to the reference (points, 95 %)."""
    import numpy as np

    from albert_edge.early_exit.policy import policy_text, simulate

    depth, logits = simulate(per_exit, policy)
    right = logits.argmax(-1) == np.asarray(labels)
    return {
        "policy": policy_text(policy),
        "mean_depth": float(depth.mean()),
        "exit_share": [float((depth == k).mean()) for k in range(1, per_exit.shape[1] + 1)],
        "accuracy": float(right.mean()),
        "delta_vs_checkpoint": paired_points(right.tolist(), list(reference_right)),
    }


def policy_evidence(
    per_exit: np.ndarray,
    labels: Sequence[int],
    reference_right: Sequence[bool],
    why_not: WhyNot,
    policies: Sequence[ExitPolicy],
) -> list[dict[str, Any]]:
    """:func:`policy_row` for every policy, each with ``why_not`` (None: admitted)."""
    out = []
    for policy in policies:
        row = policy_row(per_exit, labels, reference_right, policy)
        row["why_not"] = why_not(row)
        out.append(row)
    return out


def pick_policy(evidence: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """Among the admitted policies, the lowest mean depth, then the more accurate."""
    admitted = [r for r in evidence if r.get("why_not") is None]
    if not admitted:
        return None
    return min(admitted, key=lambda r: (r["mean_depth"], -r["accuracy"], r["policy"]))


def max_drop_rule(max_drop: float) -> WhyNot:
    """Admit a policy whose accuracy on the choosing rows is at most ``max_drop`` points
    below the full-depth model's on the same rows (the point estimate: the interval is
    reported on other rows, where it is not biased by the choice)."""

    def why_not(row: Mapping[str, Any]) -> str | None:
        d = row.get("delta_vs_checkpoint")
        if not isinstance(d, Mapping):
            return "no held-out accuracy"
        drop = -float(d["points"])
        if not drop <= max_drop + 1e-9:
            return f"accuracy drop {drop:.2f} > {max_drop:g} points"
        return None

    return why_not
