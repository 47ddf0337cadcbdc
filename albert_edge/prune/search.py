"""The prune level a budget admits: the cheapest that the rule accepts (encoder FLOPs, or
the FLOPs a runtime at N threads pays: :func:`albert_edge.prune.plan.runtime_flops`).

Levels are pairs (heads kept per layer, FFN neurons kept per layer); FFN widths are
multiples of 1/16 of the width. Each level is judged on the choose rows by ``judge`` (the
unpruned model with 0/1 gates) and admitted by :class:`albert_edge.depth.choose.Rule`
(point loss <= ``max_drop``, the paired 95 % interval's lower bound >= ``min_lower_bound``).

The walk assumes what removing more does: for a head count, fewer neurons never score
higher, so the smallest admitted width is found by bisection; a head count whose full
FFN is not admitted ends the walk (fewer heads do not do better). Every judged level is
in the evidence with its verdict, so the choice can be checked by hand.

Then, with more than one shared layer and the heads not fixed, the heads go per layer
(:func:`per_layer_descent`): from the chosen uniform level, one shared layer at a time
gives up one more head, at the chosen FFN width, while the rule admits it and it costs
less. In ALBERT a shared layer's head is read at every pass of that layer, so one
group's head can be worth keeping where another's is not: 2 of 4 heads in one group of
two can pass a budget that 2 of 4 in both does not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from albert_edge.prune.plan import Heads, PruneError, per_layer_counts, uniform


def ffn_levels(width: int, steps: int = 16) -> list[int]:
    """The widths a search tries, ascending: k/steps of ``width`` (k = 1..steps), unique."""
    return sorted({max(1, round(width * k / steps)) for k in range(1, steps + 1)})


def search(
    judge: Callable[[Heads, int], dict[str, Any]],
    cost: Callable[[Heads, int], float],
    num_heads: int,
    width: int,
    fixed_heads: Heads | None,
    fixed_ffn: int | None,
    opts: Any,
    layers: int = 1,
) -> tuple[tuple[Heads, int], list[dict[str, Any]], dict[str, Any] | None]:
    """(chosen (heads, ffn), evidence rows, rule). ``judge(h, f)``: the level's record on
    the choose rows; ``cost(h, f)``: what the choice minimises (FLOPs, as paid); ``h`` is
    one count or, past the uniform walk, a count per shared layer (``layers`` of them).
    Without a budget, the given level (judged for the record). A budget no pruned level
    meets is refused in one line."""
    from albert_edge.depth.choose import Rule

    if opts.max_drop is None:
        h = fixed_heads if fixed_heads is not None else num_heads
        f = fixed_ffn if fixed_ffn is not None else width
        return (h, f), [judge(h, f)], None
    rule = Rule(max_point_loss=opts.max_drop, min_lower_bound=opts.min_lower_bound)
    evidence: list[dict[str, Any]] = []
    cache: dict[tuple[Heads, int], dict[str, Any]] = {}

    def level(h: Heads, f: int) -> dict[str, Any]:
        """The level's evidence row with its verdict, judged once."""
        if (h, f) not in cache:
            if (h, f) == (num_heads, width):
                row: dict[str, Any] = {"heads_keep": h, "ffn_keep": f, "flops_ratio": 1.0}
                row.update(delta=0.0, delta_low=0.0, delta_high=0.0, note="unpruned")
            else:
                row = judge(h, f)
            row["why_not"] = rule.why_not(row)
            evidence.append(row)
            cache[(h, f)] = row
        return cache[(h, f)]

    def admitted(h: Heads, f: int) -> bool:
        return level(h, f)["why_not"] is None

    heads: list[Heads] = [fixed_heads] if fixed_heads is not None else list(range(num_heads, 0, -1))
    widths = [fixed_ffn] if fixed_ffn is not None else ffn_levels(width)
    found: list[tuple[Heads, int]] = []
    for h in heads:
        if not admitted(h, widths[-1]):
            break
        lo, hi = 0, len(widths) - 1  # widths[hi] admitted; find the smallest admitted
        while lo < hi:
            mid = (lo + hi) // 2
            if admitted(h, widths[mid]):
                hi = mid
            else:
                lo = mid + 1
        found.append((h, widths[hi]))
    pruned = [c for c in found if c != (num_heads, width)]
    if not pruned:
        raise PruneError(
            f"--max-drop {opts.max_drop}: no pruned level is admitted on the choose rows "
            f"({rule.describe()}); the smallest steps tried lose more (raise --max-drop); "
            "nothing written"
        )

    best = min(pruned, key=lambda c: (cost(*c), -sum(per_layer_counts(c[0])), -c[1]))
    chosen: tuple[Heads, int] = best
    if fixed_heads is None and layers > 1:
        chosen = per_layer_descent(best, layers, level, cost)
    for (h, f), row in cache.items():
        row["chosen"] = (h, f) == chosen
    return chosen, evidence, asdict(rule)


def per_layer_descent(
    start: tuple[Heads, int],
    layers: int,
    level: Callable[[Heads, int], dict[str, Any]],
    cost: Callable[[Heads, int], float],
) -> tuple[Heads, int]:
    """From the uniform ``start`` (heads, FFN width), lower one shared layer's heads by
    one at a time, at that width: each round judges every layer that can give a head
    and takes the admitted move that keeps the most of the metric (ties: the cheaper);
    ends when no move is admitted or cheaper. A layer keeps at least one head.
    ``level(h, f)``: the level's evidence row with its verdict (``why_not`` None: admitted)."""
    first = start[0]
    heads = [first] * layers if isinstance(first, int) else list(first)
    f = start[1]
    while True:
        moves = []
        for i in range(layers):
            if heads[i] <= 1:
                continue
            counts = [*heads[:i], heads[i] - 1, *heads[i + 1 :]]
            trial = uniform(counts)  # all equal again: the uniform level (judged once)
            if cost(trial, f) >= cost(uniform(heads), f):
                continue
            row = level(trial, f)
            if row["why_not"] is None:
                moves.append((-row["delta"], cost(trial, f), i, counts))
        if not moves:
            return uniform(heads), f
        heads = min(moves)[3]
