"""``verify``'s grid: an artifact and its PyTorch reference on the same seeded inputs over
batch × sequence length, every output compared at every position.

Why a grid and not one example, and why statically calibrated precisions draw their ids
from text, is told in :mod:`albert_edge.verify`; the bars are :mod:`albert_edge.compare`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.compare import compare_arrays, judge, sqnr_db, tolerance_for, worse
from albert_edge.errors import AlbertEdgeError, UnsupportedError
from albert_edge.options import STATIC_PRECISIONS
from albert_edge.reference import (
    CLS_ID,
    FIRST_PIECE,
    PAD_ID,
    SEP_ID,
    adapt_feeds,
    run_reference,
)

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.runtime import Runner

MIDDLE_SEQ_LEN = 16
NUM_CHOICES = 2


def text_token_pool(ckpt: Checkpoint) -> np.ndarray | None:
    """Piece ids of plain English text (no specials), or None without a tokenizer."""
    import numpy as np

    from albert_edge.data import FALLBACK_SENTENCES

    try:
        tok = ckpt.tokenizer()
    except AlbertEdgeError:
        return None
    pool = [
        i
        for text in FALLBACK_SENTENCES
        for i in tok.encode(text, padding="none").input_ids[0][1:-1]
    ]
    vocab = int(ckpt.config.vocab_size)
    pool = [i for i in pool if FIRST_PIECE <= i < vocab]
    return np.asarray(pool, dtype=np.int64) if pool else None


def grid_token_pool(ckpt: Checkpoint, precision: str) -> np.ndarray | None:
    """Text to draw grid ids from for statically calibrated precisions, else None."""
    # statically calibrated precisions are judged on text (see the module docstring)
    return text_token_pool(ckpt) if precision in STATIC_PRECISIONS else None


def make_grid_inputs(
    config: Any,
    choices_axis: bool,
    batch: int,
    seq: int,
    rng: np.random.Generator,
    token_pool: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Seeded ALBERT-shaped inputs: ``[CLS] ... [SEP]``, right padding, two segments.

    Row 0 is full length (so the maximum length is really exercised); every other row is
    padded. Ids are random pieces ≥ 5 (past ``<pad> <unk> [CLS] [SEP] [MASK]``), or,
    given ``token_pool``, a window of that text at a random offset (wrapping around).
    """
    import numpy as np

    lead = (batch, NUM_CHOICES) if choices_axis else (batch,)
    rows = int(np.prod(lead))
    vocab = int(config.vocab_size)
    types_n = int(getattr(config, "type_vocab_size", 2) or 1)
    if token_pool is not None and len(token_pool):
        starts = rng.integers(0, len(token_pool), size=rows)
        ids = token_pool[(starts[:, None] + np.arange(seq)[None, :]) % len(token_pool)]
        ids = ids.astype(np.int64)
    else:
        ids = rng.integers(min(FIRST_PIECE, vocab - 1), vocab, size=(rows, seq), dtype=np.int64)
    mask = np.ones((rows, seq), dtype=np.int64)
    types = np.zeros((rows, seq), dtype=np.int64)
    for r in range(rows):
        length = seq if r == 0 or seq == 1 else int(rng.integers(1, seq))
        ids[r, 0] = min(CLS_ID, vocab - 1)
        if length >= 2:
            ids[r, length - 1] = min(SEP_ID, vocab - 1)
        ids[r, length:] = PAD_ID
        mask[r, length:] = 0
        if length >= 3 and types_n >= 2:
            split = int(rng.integers(1, length))
            types[r, split:length] = 1
    shape = (*lead, seq)
    return {
        "input_ids": ids.reshape(shape),
        "attention_mask": mask.reshape(shape),
        "token_type_ids": types.reshape(shape),
    }


def default_seq_lens(max_seq_len: int) -> tuple[int, ...]:
    return tuple(sorted({1, min(MIDDLE_SEQ_LEN, max_seq_len), max_seq_len}))


def bucket_seq_lens(buckets: Sequence[int]) -> tuple[int, ...]:
    """One length per signature bucket that runs on that bucket and is not its length
    (3 short of it where the bucket below allows: the runner pads it up and slices the
    outputs back).

    Why: a multi-signature ``.tflite`` holds one graph per bucket, and 1, 16 and the
    maximum reach only the buckets they fall in, each at an exact bucket length or far
    below it. This is what convert's separate LiteRT parity check covered before verify
    was the one comparison; the grid keeps it."""
    out, below = [], 0
    for bucket in sorted(buckets):
        out.append(max(below + 1, bucket - 3))
        below = bucket
    return tuple(out)


def grid_seq_lens(runner: Runner, max_len: int) -> tuple[int, ...]:
    """The grid's lengths when none are asked for: :func:`default_seq_lens`, plus one
    inside every signature bucket of a runner that has them (LiteRT)."""
    buckets = [b for b in getattr(runner, "seq_lens", ()) or () if b <= max_len]
    return tuple(sorted({*default_seq_lens(max_len), *bucket_seq_lens(buckets)}))


def grid_memory_bytes(config: Any, batch: int, seq: int, *, models: int = 2) -> int:
    """A lower estimate of what one grid point holds at once: the widest activation
    (the FFN's B×S×I, plus B×S×H streams beside it) and the attention scores and
    probabilities (B×heads×S×S), in fp32, for each of ``models`` running side by side
    (verify: the reference and the artifact; a bench child: the artifact alone).
    Why: a batch no machine can hold used to run for minutes and 16 GB before the kernel
    killed it; a bound read from the config refuses it in one line instead."""
    hidden = int(getattr(config, "hidden_size", 0) or 0)
    inner = int(getattr(config, "intermediate_size", 0) or 0)
    heads = int(getattr(config, "num_attention_heads", 1) or 1)
    per_model = batch * seq * (inner + 4 * hidden) * 4 + batch * heads * seq * seq * 4 * 2
    return models * per_model


def check_grid_memory(
    config: Any, batch_sizes: Sequence[int], seq_lens: Sequence[int], where: Path | str
) -> None:
    """Refuse a grid whose largest point cannot fit in the memory available now."""
    import psutil

    available = int(psutil.virtual_memory().available)
    batch, seq = max(batch_sizes), max(seq_lens)
    need = grid_memory_bytes(config, batch, seq)
    if need > available:
        raise UnsupportedError(
            f"{where}: batch {batch} at sequence length {seq} needs at least "
            f"{need / 2**30:,.1f} GiB of memory for activations, {available / 2**30:.1f} GiB "
            "is available; use smaller --batch-sizes"
        )


def run_grid(
    runner: Runner,
    ckpt: Checkpoint,
    *,
    batch_sizes: Sequence[int] = (1, 2),
    seq_lens: Sequence[int] | None = None,
    seed: int = 0,
    token_pool: np.ndarray | None = None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Compare ``runner`` with ``ckpt`` over batch × sequence length.

    Returns (grid points, per-output worst-case summary). An output the head defines but
    the artifact lacks, or one with the wrong shape, gets NaN metrics and a ``problem``.
    """
    import numpy as np

    max_len = min(int(runner.max_seq_len), int(ckpt.config.max_position_embeddings))
    seqs = tuple(seq_lens) if seq_lens else grid_seq_lens(runner, max_len)
    bad = [s for s in seqs if s < 1 or s > max_len]
    if bad or any(b < 1 for b in batch_sizes):
        raise UnsupportedError(
            f"{runner.path}: grid batch sizes {tuple(batch_sizes)} / sequence lengths "
            f"{seqs} must be ≥ 1 and ≤ the artifact's max_seq_len {max_len}"
        )
    check_grid_memory(ckpt.config, batch_sizes, seqs, runner.path)
    rng = np.random.default_rng(seed)
    grid: list[dict[str, Any]] = []
    summary: dict[str, dict[str, Any]] = {}
    pooled: dict[str, list[float]] = {}  # output → [Σref², Σ(ref−out)²] over the grid
    for batch in batch_sizes:
        for seq in seqs:
            feeds = make_grid_inputs(
                ckpt.config, ckpt.head.choices_axis, batch, seq, rng, token_pool
            )
            feeds = adapt_feeds(feeds, runner)
            ref = run_reference(ckpt, feeds)
            out = runner.run(feeds)
            point: dict[str, Any] = {"batch": batch, "seq": seq, "outputs": {}}
            for name in ckpt.head.outputs:
                m = _compare_output(name, ref, out)
                signal, noise = m.pop("signal"), m.pop("noise")
                point["outputs"][name] = m
                energies = pooled.setdefault(name, [0.0, 0.0])
                energies[0] += signal
                energies[1] += noise
                _summarize(summary, name, m, batch, seq)
            grid.append(point)
    for name, (signal, noise) in pooled.items():
        summary[name]["sqnr_db"] = sqnr_db(signal, noise)
    return grid, summary


def _compare_output(
    name: str, ref: dict[str, np.ndarray], out: dict[str, np.ndarray]
) -> dict[str, Any]:
    """One output at one grid point against the reference; NaN metrics and a ``problem``
    where the artifact lacks it or gives it another shape."""
    problem = None
    if name not in out:
        problem = "missing from the artifact's outputs"
    elif out[name].shape != ref[name].shape:
        problem = f"shape {out[name].shape} != reference {ref[name].shape}"
    if problem is None:
        return compare_arrays(ref[name], out[name])
    return {
        "max_abs_err": math.nan,
        "mean_abs_err": math.nan,
        "sqnr_db": math.nan,
        "signal": 0.0,
        "noise": math.nan,
        "problem": problem,
    }


def _summarize(
    summary: dict[str, dict[str, Any]], name: str, m: dict[str, Any], batch: int, seq: int
) -> None:
    """Fold one grid point's metrics ``m`` of output ``name`` into its worst-case summary,
    remembering where each worst value was met."""
    s = summary.setdefault(
        name,
        {
            "max_abs_err": 0.0,
            "mean_abs_err": 0.0,
            "sqnr_db": math.inf,
            "sqnr_db_min": math.inf,
            "worst_at": {},
        },
    )
    for key, src, larger in (
        ("max_abs_err", "max_abs_err", True),
        ("mean_abs_err", "mean_abs_err", True),
        ("sqnr_db_min", "sqnr_db", False),
    ):
        prev = s[key]
        s[key] = worse(prev, m[src], larger_is_worse=larger)
        changed = (not math.isnan(prev)) if math.isnan(s[key]) else s[key] != prev
        if changed or key not in s["worst_at"]:
            s["worst_at"][key] = {"batch": batch, "seq": seq}
    problem = m.get("problem")
    if problem and "problem" not in s:
        s["problem"] = f"{problem} (batch {batch}, seq {seq})"


def judge_outputs(summary: dict[str, dict[str, Any]], precision: str) -> list[str]:
    """Mark each output passed/failed against the precision's bar; return failure phrases."""
    tol = tolerance_for(precision)
    failures = []
    for name, s in summary.items():
        s["tolerance"] = tol
        reason: str | None
        if s.get("problem"):
            reason = str(s["problem"])
        else:
            reason = judge(s, tol)
            if reason and "max_abs_err" in tol:
                at = s["worst_at"].get("max_abs_err")
                if at:
                    reason += f" (worst at batch {at['batch']}, seq {at['seq']})"
            elif reason:
                at = s["worst_at"].get("sqnr_db_min")
                if at:
                    reason += (
                        f" (worst point {s['sqnr_db_min']:.1f} dB at batch {at['batch']}, "
                        f"seq {at['seq']})"
                    )
        s["passed"] = reason is None
        if reason:
            s["failure"] = f"{name}: {reason}"
            failures.append(s["failure"])
    return failures
