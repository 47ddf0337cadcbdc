"""What a prune keeps: per shared layer, the heads and FFN neurons of highest importance.

A :class:`Plan` is pure data (kept indices per flat layer) with its cost: the encoder's
multiply-adds at a sequence length (:func:`encoder_flops`) and its parameters. Every
layer keeps the same COUNT of FFN neurons (each chooses its own which): transformers'
ALBERT has one ``intermediate_size`` for every shared layer, so a plain loader reads FFN
widths only when they are uniform. Heads may differ per shared layer (``pruned_heads``
is per flat layer, and every converter reads it per layer): a level's heads are one
count, or a count per flat layer (:data:`Heads`), which a search reaches by lowering one
shared layer at a time from the best uniform level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from albert_edge.errors import AlbertEdgeError

# heads kept: one count for every shared layer, or a count per flat layer (flat order)
Heads = int | tuple[int, ...]


class PruneError(AlbertEdgeError):
    """A prune cannot be done as asked (flags, data, a level no candidate reaches)."""


@dataclass(frozen=True)
class Plan:
    """Kept head and neuron indices (sorted, original numbering) per flat layer."""

    heads: dict[int, tuple[int, ...]]
    ffn: dict[int, tuple[int, ...]]
    num_heads: int
    intermediate: int

    @property
    def heads_per_layer(self) -> tuple[int, ...]:
        """Heads each flat shared layer keeps, in flat order."""
        return tuple(len(kept) for _, kept in sorted(self.heads.items()))

    @property
    def heads_keep(self) -> Heads:
        """One count when every shared layer keeps as many heads, else the counts."""
        return uniform(self.heads_per_layer)

    @property
    def ffn_keep(self) -> int:
        return len(next(iter(self.ffn.values())))

    def removed_heads(self) -> dict[int, list[int]]:
        """transformers' ``pruned_heads`` form: {flat layer: removed heads}, empty omitted."""
        out = {}
        for flat, kept in self.heads.items():
            gone = [h for h in range(self.num_heads) if h not in kept]
            if gone:
                out[flat] = gone
        return out

    def masks(self) -> dict[str, dict[int, Any]]:
        """0/1 gates (:class:`albert_edge.prune.gates.Gates`) that run the unpruned model
        as this plan would."""
        import numpy as np

        heads, ffn = {}, {}
        for flat, kept in self.heads.items():
            m = np.zeros(self.num_heads, np.float32)
            m[list(kept)] = 1
            heads[flat] = m
        for flat, kept in self.ffn.items():
            m = np.zeros(self.intermediate, np.float32)
            m[list(kept)] = 1
            ffn[flat] = m
        return {"heads": heads, "ffn": ffn}

    def label(self) -> str:
        return (
            f"heads {heads_label(self.heads_keep)}/{self.num_heads}, "
            f"FFN {self.ffn_keep}/{self.intermediate}"
        )


def uniform(counts: Sequence[int]) -> Heads:
    """``counts`` as one int when they are all equal (a uniform level), else a tuple."""
    counts = tuple(int(c) for c in counts)
    return counts[0] if len(set(counts)) == 1 else counts


def heads_json(heads: Heads | Sequence[int]) -> int | list[int]:
    """A level's heads as records write them: an int, or a list per flat layer."""
    return heads if isinstance(heads, int) else [int(h) for h in heads]


def heads_from_json(heads: int | Sequence[int]) -> Heads:
    """:func:`heads_json`'s inverse: an int, or a tuple per flat layer."""
    return int(heads) if isinstance(heads, int) else tuple(int(h) for h in heads)


def heads_label(heads: Heads | Sequence[int]) -> str:
    """``3`` or, per flat layer, ``2+4`` (what reports and candidate names print)."""
    if isinstance(heads, int):
        return str(heads)
    return "+".join(str(int(h)) for h in heads)


def per_layer_counts(heads: Heads | Sequence[int]) -> tuple[int, ...]:
    """The counts a level names (one, or one per flat layer), without a config."""
    return (heads,) if isinstance(heads, int) else tuple(int(h) for h in heads)


def per_layer(heads: Heads | Sequence[int], config: Any) -> tuple[int, ...]:
    """A level's heads as a count per flat shared layer (``num_hidden_groups *
    inner_group_num`` of them)."""
    from albert_edge.torch_model import shared_layer_count

    n = shared_layer_count(config)
    if isinstance(heads, int):
        return (heads,) * n
    counts = tuple(int(h) for h in heads)
    if len(counts) != n:
        raise PruneError(f"heads {heads_label(counts)}: the model has {n} shared layers")
    return counts


def top(scores: Any, keep: int) -> tuple[int, ...]:
    """The ``keep`` highest-scoring indices, sorted (ties: the lower index first)."""
    import numpy as np

    order = np.lexsort((np.arange(len(scores)), -np.asarray(scores, dtype=np.float64)))
    return tuple(sorted(int(i) for i in order[:keep]))


def make_plan(
    head_scores: Mapping[int, Any],
    ffn_scores: Mapping[int, Any],
    heads_keep: Heads,
    ffn_keep: int,
    config: Any,
) -> Plan:
    """Each layer's top ``heads_keep`` heads (its own count when per layer) and
    ``ffn_keep`` neurons by score."""
    counts = dict(zip(sorted(head_scores), per_layer(heads_keep, config), strict=True))
    return Plan(
        heads={k: top(v, counts[k]) for k, v in sorted(head_scores.items())},
        ffn={k: top(v, ffn_keep) for k, v in sorted(ffn_scores.items())},
        num_heads=int(config.num_attention_heads),
        intermediate=int(config.intermediate_size),
    )


def ffn_count(value: float, width: int) -> int:
    """``--ffn-keep``: a count (>= 1, an integer) or a fraction in (0, 1) of ``width``."""
    if 0 < value < 1:
        return max(1, round(value * width))
    if value != int(value) or value < 1:
        raise PruneError(f"--ffn-keep {value:g}: give a neuron count >= 1 or a fraction in (0, 1)")
    if value > width:
        raise PruneError(
            f"--ffn-keep {int(value)}: the model's FFN has {width} neurons (intermediate_size)"
        )
    return int(value)


def _passes(config: Any) -> tuple[int, ...]:
    """How many times each flat shared layer runs per sequence (transformers' loop)."""
    from albert_edge.prune.gates import depths

    return tuple(len(v) for _, v in sorted(depths(config).items()))


def encoder_flops(config: Any, heads_keep: Heads, ffn_keep: int, seq_len: int = 128) -> int:
    """Multiply-adds x 2 of the encoder for one sequence of ``seq_len`` tokens: the
    embedding projection, then at every pass of every shared layer the Q/K/V projections,
    the scores and the weighted sum, the output projection, and the FFN's two matrices
    (norms, softmax and activations left out: a few percent). ``heads_keep``: one count,
    or one per flat layer."""
    T, E, H = seq_len, int(config.embedding_size), int(config.hidden_size)
    d = H // int(config.num_attention_heads)
    total = 0
    for h, passes in zip(per_layer(heads_keep, config), _passes(config), strict=True):
        a = h * d
        total += passes * (_fused_attention(T, H, a) + T * a * H + 2 * T * H * ffn_keep)
    return 2 * (T * E * H + total)


def _fused_attention(T: int, H: int, a: int) -> int:
    """Multiply-adds of what ONNX Runtime's fused attention runs for ``a`` head columns:
    the Q/K/V projections, the scores and the weighted sum."""
    return 3 * T * H * a + 2 * T * T * a


def paid_heads(heads_keep: int, runtime_threads: int | None) -> int:
    """The heads a batch-1 run on ONNX Runtime's CPU attention pays for: its fused kernel
    splits the work by batch x head, so ``runtime_threads`` threads run heads in rounds
    and a head count that leaves a thread idle costs as the next multiple (3 of 4 heads
    at 2 threads take as long as 4: measured, ``docs/prune.md``). ``None`` or 1: the
    heads themselves."""
    if not runtime_threads or runtime_threads <= 1:
        return heads_keep
    return -(-heads_keep // runtime_threads) * runtime_threads


def runtime_flops(
    config: Any, heads_keep: Heads, ffn_keep: int, runtime_threads: int | None, seq_len: int = 128
) -> int:
    """:func:`encoder_flops` as a batch-1 run at ``runtime_threads`` threads pays them: the
    fused attention's terms (Q/K/V projections, scores, weighted sum) for
    :func:`paid_heads`, the output projection and the FFN (plain matrix products, split
    by rows) for what they are. What a prune search minimises when it knows the threads
    its artifact will run on; equal to :func:`encoder_flops` at 1 thread."""
    T, H = seq_len, int(config.hidden_size)
    d = H // int(config.num_attention_heads)
    extra = 0
    for h, passes in zip(per_layer(heads_keep, config), _passes(config), strict=True):
        extra += passes * _fused_attention(T, H, (paid_heads(h, runtime_threads) - h) * d)
    return encoder_flops(config, heads_keep, ffn_keep, seq_len) + 2 * extra


def encoder_parameters(config: Any, heads_keep: Heads, ffn_keep: int) -> int:
    """Parameters of the shared layers (weights and biases of what pruning slices)."""
    H = int(config.hidden_size)
    d = H // int(config.num_attention_heads)
    total = 0
    for h in per_layer(heads_keep, config):
        a = h * d
        total += 3 * (H * a + a) + (a * H + H) + (H * ffn_keep + ffn_keep) + (ffn_keep * H + H)
    return total
