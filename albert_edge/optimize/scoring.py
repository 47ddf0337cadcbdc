"""Scoring: the given model's outputs on the held rows, saved once, and every
candidate's artifact paired against them in the task's metric.

The reference is the checkpoint the user gave, run in PyTorch on one thread
(:func:`reference_logits`); a candidate's artifact runs as shipped, its own tokenizer
and its recorded exit policy (:func:`artifact_metrics`); :func:`compare` is the paired
95 % interval of the difference, in points of the task's primary metric.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from albert_edge.optimize.splits import read_rows
from albert_edge.optimize.work import THREADS


def task_rows(split: Path, checkpoint: Path | None) -> Any:
    return read_rows(split, checkpoint)


def reference_logits(checkpoint: Path | None, rows: Any, max_len: int, out: Path) -> None:
    """The given model's outputs in PyTorch on ``rows``, saved once (``out``: .npy logits
    for a classifier, else an .npz of every head output per feature): what every
    candidate is paired against."""
    import numpy as np

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.reference import run_reference, torch_threads
    from albert_edge.tasks import TaskKind, encode, run_features

    ckpt = load_checkpoint(checkpoint)
    feats = encode(rows, ckpt.tokenizer(), max_len)
    if rows.kind is TaskKind.CLASSIFICATION:
        with torch_threads(THREADS):
            outs = run_features(
                feats, lambda feeds: {"logits": run_reference(ckpt, feeds)["logits"]}
            )
        np.save(out, np.stack([np.asarray(x, dtype=np.float32) for x in outs["logits"]]))
        return
    with torch_threads(THREADS):
        outs = run_features(feats, lambda feeds: run_reference(ckpt, feeds))
    save_outputs(outs, out)


def save_outputs(outs: Mapping[str, Sequence[Any]], out: Path) -> None:
    """Per-feature outputs of different lengths as padded arrays and their lengths."""
    import numpy as np

    arrays: dict[str, Any] = {}
    for name, per in outs.items():
        xs = [np.asarray(x, dtype=np.float32) for x in per]
        lengths = np.array([x.shape[0] for x in xs], dtype=np.int64)
        pad = np.zeros((len(xs), int(lengths.max()), *xs[0].shape[1:]), dtype=np.float32)
        for i, x in enumerate(xs):
            pad[i, : len(x)] = x
        arrays[name], arrays[f"{name}.length"] = pad, lengths
    with out.open("wb") as f:
        np.savez(f, **arrays)


def load_outputs(path: Path) -> dict[str, list[Any]]:
    """What :func:`save_outputs` wrote: each output as one array per feature."""
    import numpy as np

    out: dict[str, list[Any]] = {}
    with np.load(path) as z:  # each array read once (an NpzFile reads on every access)
        for name in sorted(k for k in z.files if not k.endswith(".length")):
            padded, lengths = z[name], z[f"{name}.length"]
            out[name] = [padded[i, : int(k)] for i, k in enumerate(lengths)]
    return out


def saved_outputs(saved: Path) -> dict[str, list[Any]]:
    import numpy as np

    if saved.suffix == ".npz":
        return load_outputs(saved)
    return {"logits": list(np.load(saved))}


def reference_metrics(checkpoint: Path | None, rows: Any, max_len: int, saved: Path) -> Any:
    """The metrics of the saved reference outputs on ``rows``."""
    return held_reference(checkpoint, rows, max_len, saved)[0]


def held_reference(
    checkpoint: Path | None, rows: Any, max_len: int, saved: Path
) -> tuple[Any, dict[str, Any], list[str]]:
    """The saved reference outputs on ``rows``: their metrics, the scoring options every
    candidate is scored with (SQuAD v2.0: the null threshold chosen on the reference's
    outputs, as ``verify`` does), and the output names to read from an artifact."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.depth.task_heads import score_options
    from albert_edge.tasks import encode, score

    feats = encode(rows, load_checkpoint(checkpoint).tokenizer(), max_len)
    outs = saved_outputs(saved)
    options = score_options(rows, feats, outs)
    return score(rows, feats, outs, **options), options, list(outs)


def artifact_metrics(
    artifact: Path,
    rows: Any,
    max_len: int,
    outputs: Sequence[str] = ("logits",),
    options: Mapping[str, Any] | None = None,
) -> Any:
    """The artifact as shipped (its own tokenizer, its recorded exit policy) on ``rows``:
    its ``outputs`` (the head's) scored with ``options`` (SQuAD v2.0: the reference's
    null threshold)."""
    from albert_edge.early_exit.runner import open_any_runner
    from albert_edge.evaluate import artifact_tokenizer
    from albert_edge.tasks import encode, run_features, score

    runner = open_any_runner(artifact, threads=THREADS)
    try:
        names = set(runner.input_names)
        feats = encode(rows, artifact_tokenizer(artifact), min(max_len, int(runner.max_seq_len)))

        def fn(feeds: Any) -> Any:
            got = runner.run({k: v for k, v in feeds.items() if k in names})
            return {k: got[k] for k in outputs}

        outs = run_features(feats, fn)
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            close()
    return score(rows, feats, outs, **dict(options or {}))


def compare(candidate: Any, reference: Any) -> dict[str, Any]:
    """The candidate's primary metric minus the reference's, paired 95 % interval, points."""
    from albert_edge.tasks import paired_metric_interval

    iv = paired_metric_interval(candidate, reference)
    return {
        "metric": reference.primary,
        "value": float(candidate.value),
        "reference": float(reference.value),
        "delta": float(iv.delta),
        "low": float(iv.low),
        "high": float(iv.high),
        "rows": int(reference.examples),
    }
