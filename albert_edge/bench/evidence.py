"""The evidence a recommendation rests on, as pure functions: per-visit latency minima of
interleaved rounds, paired accuracy differences with a bootstrap interval, and a runner's
answer for every sentence.

Why a module of its own: ``bench --recommend`` ranks precisions with these, and its depth ×
exit-policy extension (:mod:`albert_edge.bench.recommend_depth`) weighs candidates with the
same ones; both import them from here, so neither reaches into the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

N_BOOT = 2000  # bootstrap resamples of every interval
SEED = 0


def round_matrix(rounds: Sequence[Sequence[float]]) -> np.ndarray:
    """Per-round samples as a [rounds, runs] array; ragged rounds padded with NaN."""
    import numpy as np

    width = max(len(r) for r in rounds)
    out = np.full((len(rounds), width), np.nan)
    for i, r in enumerate(rounds):
        out[i, : len(r)] = r
    return out


def split_visits(samples: Sequence[float], rounds: int) -> list[list[float]]:
    """Pooled samples of an interleaved ``bench`` row (``keep_samples``), in visit order,
    back into its ``rounds`` visits: every visit timed the same number of runs, so round
    ``k`` is the ``k``-th equal slice."""
    per = len(samples) // rounds if rounds > 0 else 0
    if per == 0 or per * rounds != len(samples):
        raise ValueError(f"{len(samples)} samples do not split into {rounds} equal visits")
    return [list(samples[k * per : (k + 1) * per]) for k in range(rounds)]


def timed_rounds(row: Mapping[str, Any]) -> dict[str, list[list[float]]]:
    """``row["rounds_ms"]``: {seq_len: [[samples of round 0], ...]} (empty if not timed)."""
    rounds = row.get("rounds_ms") or {}
    return {str(k): v for k, v in rounds.items() if v and all(len(r) for r in v)}


def visit_minima(row: Mapping[str, Any], lengths: Sequence[str], n_rounds: int) -> np.ndarray:
    """Per round, the mean over ``lengths`` of each visit's fastest run: shape [n_rounds].

    Why the fastest run of a visit: within one visit (a few runs back to back) the
    slowest runs are the ones another process took a core from; the fastest is what the
    artifact costs when it had the cores, and a slow phase moves it least.
    """
    import numpy as np

    timed = timed_rounds(row)
    return np.mean([np.nanmin(round_matrix(timed[k][:n_rounds]), axis=1) for k in lengths], axis=0)


def latency_stat(row: Mapping[str, Any], lengths: Sequence[str] | None = None) -> float:
    """The ranking statistic: median over rounds of the visit minima (:func:`visit_minima`)."""
    import numpy as np

    timed = timed_rounds(row)
    keys = list(lengths) if lengths is not None else sorted(timed, key=int)
    n_rounds = min(len(timed[k]) for k in keys)
    return float(np.median(visit_minima(row, keys, n_rounds)))


def paired_delta(
    right_a: Sequence[bool], right_b: Sequence[bool], n_boot: int = N_BOOT, seed: int = SEED
) -> dict[str, float]:
    """Accuracy of a minus b in points on the same rows, with a paired bootstrap 95 % interval.

    Paired: both were scored on the same sentences, so most rows agree and the interval
    is far narrower than two independent intervals would suggest. The bootstrap is the
    depth search's (:func:`albert_edge.depth.paired_bootstrap`, same resampling and seed),
    in points; no rows is no difference.
    """
    from albert_edge.depth.stats import paired_bootstrap

    if len(right_a) == 0:
        return {"points": 0.0, "low": 0.0, "high": 0.0}
    iv = paired_bootstrap(right_a, right_b, resamples=n_boot, seed=seed)
    return {"points": iv.delta * 100.0, "low": iv.low * 100.0, "high": iv.high * 100.0}


def per_row_outputs(
    runner: Any, tokenizer: Any, texts: Sequence[str], max_len: int, batch: int = 32
) -> np.ndarray:
    """``runner``'s output for every text, rows back in the order of ``texts``.

    Sorted by length and padded per batch, as :func:`albert_edge.evaluate.evaluate_accuracy`
    does; kept per sentence here because the paired intervals need row-level answers.
    """
    import numpy as np

    enc = [tokenizer.encode(t, max_length=max_len, padding="none") for t in texts]
    ids_list = [(e.input_ids[0], e.token_type_ids[0]) for e in enc]
    order = sorted(range(len(texts)), key=lambda i: len(ids_list[i][0]))
    out: np.ndarray | None = None
    for start in range(0, len(order), batch):
        idx = order[start : start + batch]
        width = max(len(ids_list[i][0]) for i in idx)
        ids = np.full((len(idx), width), tokenizer.pad_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for r, i in enumerate(idx):
            n = len(ids_list[i][0])
            ids[r, :n], mask[r, :n], types[r, :n] = ids_list[i][0], 1, ids_list[i][1]
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        values = np.asarray(runner(feeds))
        if out is None:
            out = np.zeros((len(texts), *values.shape[1:]), dtype=values.dtype)
        out[idx] = values
    assert out is not None, "no texts"
    return out
