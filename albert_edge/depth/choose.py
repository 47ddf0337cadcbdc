"""The choice rule over depth × precision candidates: a pure function over records.

Why a rule that reads the interval, not only the point: with a few thousand held-out
sentences a 0.3-point loss can hide a 2-point one. A candidate is admitted only when its
point loss against the unchanged full-depth model is at most ``max_point_loss`` points
AND the lower end of its 95 % paired-bootstrap interval is at least ``min_lower_bound``
points; among the admitted, the fastest wins (by ``speed_key``), or, when no speed was
measured, the shallowest, then the smallest. The constants are data (:class:`Rule`) and
printed with the evidence, so a reader can check the choice by hand.

Records are plain mappings so that any caller (``albert-edge depth``, the depth
benchmark, later ``bench --recommend``) can feed its own rows: ``depth``, ``precision``,
``delta`` and ``delta_low`` (fractions: 0.01 = 1 point), optionally ``file_bytes`` and
the speed key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

from albert_edge.depth.features import DepthError

if TYPE_CHECKING:
    from albert_edge.depth.search import DepthSearch


@dataclass(frozen=True)
class Rule:
    """Admission thresholds, in accuracy points (issue 27's example values)."""

    max_point_loss: float = 0.5
    min_lower_bound: float = -1.5

    def __post_init__(self) -> None:
        # NaN compares false with everything: a NaN threshold would admit every candidate
        for name in ("max_point_loss", "min_lower_bound"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise DepthError(f"rule {name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise DepthError(f"rule {name} must be a finite number of points, got {value}")

    def describe(self) -> str:
        return (
            f"point loss <= {self.max_point_loss} and 95 % lower bound >= "
            f"{self.min_lower_bound} points vs full depth"
        )

    def why_not(self, row: Mapping[str, Any]) -> str | None:
        """None when ``row`` is admitted, else the reason in words."""
        raw_delta, raw_low = row.get("delta"), row.get("delta_low")
        if not _number(raw_delta) or not _number(raw_low):
            return "no held-out accuracy"
        delta, low = float(raw_delta), float(raw_low)
        if not math.isfinite(delta) or not math.isfinite(low):
            # NaN passes every comparison below as "not worse": evidence that is not a
            # number admits nothing
            return f"evidence not finite (delta {delta}, lower bound {low})"
        if -100 * delta > self.max_point_loss + 1e-9:
            return f"point loss {-100 * delta:.2f} > {self.max_point_loss}"
        if 100 * low < self.min_lower_bound - 1e-9:
            return f"lower bound {100 * low:.2f} < {self.min_lower_bound}"
        return None


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _order(row: Mapping[str, Any], speed_key: str | None) -> tuple[float, ...]:
    speed = row.get(speed_key) if speed_key else None
    size = row.get("file_bytes")
    return (
        float(speed) if isinstance(speed, int | float) else float("inf"),
        float(row.get("depth", 0)),
        float(size) if isinstance(size, int | float) else float("inf"),
    )


def choose(
    candidates: Sequence[Mapping[str, Any]],
    rule: Rule | None = None,
    *,
    speed_key: str | None = None,
) -> dict[str, Any]:
    """``{"chosen", "rule", "speed_key", "evidence"}``: every candidate with its verdict.

    Speed only decides when every admitted row has it (a missing timing never wins).
    """
    rule = rule or Rule()
    if speed_key is not None and candidates and not any(speed_key in r for r in candidates):
        keys = sorted({k for r in candidates for k in r})
        raise DepthError(
            f"speed key {speed_key!r} is in no candidate record; the records have: "
            + ", ".join(keys)
        )
    evidence = [{**row, "why_not": rule.why_not(row)} for row in candidates]
    admitted = [r for r in evidence if r["why_not"] is None]
    timed = speed_key is not None and all(
        _number(r.get(speed_key)) and math.isfinite(r[speed_key]) for r in admitted
    )
    key = speed_key if timed else None
    chosen = min(admitted, key=lambda r: _order(r, key)) if admitted else None
    return {"chosen": chosen, "rule": asdict(rule), "speed_key": key, "evidence": evidence}


def search_candidates(search: DepthSearch, precision: str = "fp32") -> list[dict[str, Any]]:
    """The re-fit depths of a search as candidate records (PyTorch fp32 numbers)."""
    return [
        {
            "depth": s.depth,
            "precision": precision,
            "held_out_metric": asdict(s.held_out_metric),
            "delta": s.delta,
            "delta_low": s.delta_low,
            "delta_high": s.delta_high,
        }
        for s in search.scores
        if s.head == "refit"
    ]


def held_out(row: Mapping[str, Any]) -> tuple[str, Any]:
    """(metric name, held-out value) of a candidate record: ``held_out_metric``
    (``{"name", "value"}``), or, in records written before the metric was named (and in
    hand-written candidate lists), ``held_out_accuracy`` with an optional ``metric``."""
    held = row.get("held_out_metric")
    if isinstance(held, Mapping):
        return str(held.get("name", "accuracy")), held.get("value")
    return str(row.get("metric", "accuracy")), row.get("held_out_accuracy")


def format_choice(result: Mapping[str, Any], title: str = "depth × precision") -> str:
    """The evidence table and the verdict, as printed by ``albert-edge depth``."""
    rule = Rule(**result["rule"])
    key = result.get("speed_key")
    lines = [f"{title}: rule: {rule.describe()}", ""]
    metrics = {held_out(r)[0] for r in result["evidence"]}
    metric = metrics.pop() if len(metrics) == 1 else "accuracy"
    head = [
        "depth",
        "precision",
        "held-out acc %" if metric == "accuracy" else f"held-out {metric} %",
    ]
    head += ["Δ points [95 % CI]"]
    head += [key] if key else []
    head += ["verdict"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    chosen = result.get("chosen")
    for r in result["evidence"]:
        acc = held_out(r)[1]
        cells = [
            str(r.get("depth")),
            str(r.get("precision")),
            f"{100 * acc:.2f}" if isinstance(acc, float) else "—",
            f"{100 * r['delta']:+.2f} [{100 * r['delta_low']:+.2f}, {100 * r['delta_high']:+.2f}]"
            if isinstance(r.get("delta_high"), float)
            else "—",
        ]
        if key:
            v = r.get(key)
            cells.append(f"{v:.3f}" if isinstance(v, float) else "—")
        same = chosen is not None and all(r.get(k) == chosen.get(k) for k in ("depth", "precision"))
        cells.append("**chosen**" if same else (r["why_not"] or "admitted"))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if chosen is None:
        lines.append("No candidate passes the rule: keep full depth.")
    else:
        by = f"fastest by {key}" if key else "shallowest (no timing given)"
        lines.append(
            f"Chosen: depth {chosen['depth']} {chosen['precision']} ({by} among the admitted)."
        )
    return "\n".join(lines) + "\n"
