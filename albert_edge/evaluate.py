"""A task's metric for an artifact and for its PyTorch reference on the same examples,
with the paired bootstrap interval on the difference (``verify --data``, the early-exit
metric, ``optimize``'s finalists, the accuracy benchmarks).

:func:`evaluate_task` feeds both models the same encoded examples and compares their
outputs too; :func:`evaluate_against` lets each model tokenize for itself (an ``optimize``
output may have another vocabulary than the checkpoint given to it). The artifact's own
tokenizer is :func:`artifact_tokenizer`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.compare import compare_arrays, sqnr_db
from albert_edge.errors import VerificationError
from albert_edge.reference import adapt_feeds, run_reference

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.runtime import Runner
    from albert_edge.tasks import TaskData
    from albert_edge.tokenizer import AlbertTokenizer

ACCURACY_BATCH = 32


def artifact_tokenizer(path: str | Path, ckpt: Checkpoint | None = None) -> AlbertTokenizer:
    """The tokenizer shipped in the artifact holding ``path`` (proving it works), else the
    reference's. One function for verify and quantize, so both tokenize alike: the
    artifact's ``tokenizer_config.json`` decides lower-casing and accents."""
    from albert_edge.errors import CheckpointError
    from albert_edge.layout import find_artifact
    from albert_edge.tokenizer import AlbertTokenizer

    art = find_artifact(path)
    spm = art.file("spiece.model")
    if not spm.is_file():
        if ckpt is None:
            raise CheckpointError(
                f"{spm}: the artifact has no tokenizer; re-run albert-edge convert"
            )
        return ckpt.tokenizer()
    lower = ckpt.do_lower_case if ckpt is not None else True
    data = art.read_json("tokenizer_config.json") or {}
    tok = AlbertTokenizer(
        spm,
        do_lower_case=bool(data.get("do_lower_case", lower)),
        keep_accents=bool(data.get("keep_accents", False)),
    )
    if ckpt is not None:
        tok.check_vocab_size(int(ckpt.config.vocab_size), art.file("config.json"))
    return tok


def evaluate_accuracy(
    runner: Runner,
    ckpt: Checkpoint,
    tokenizer: AlbertTokenizer,
    rows: Sequence[tuple[int, str]],
    *,
    batch_size: int = ACCURACY_BATCH,
    progress: bool = True,
) -> dict[str, Any]:
    """Accuracy of the artifact and of PyTorch on labelled sentences, plus agreement
    (:func:`evaluate_task` on single-sentence classification rows)."""
    from albert_edge.tasks import ClassificationExample, TaskData, TaskKind

    num_labels = int(ckpt.config.num_labels)
    bad = sorted({label for label, _ in rows if not 0 <= label < num_labels})
    if bad:
        from albert_edge.data import DataError

        raise DataError(
            f"labels {bad} in the data are outside the reference's {num_labels} classes; "
            "pass a dataset for the task this model was trained on"
        )
    data = TaskData(
        kind=TaskKind.CLASSIFICATION,
        path=Path("<rows>"),
        format="glue-tsv",
        examples=[ClassificationExample(t, None, label, n) for n, (label, t) in enumerate(rows)],
        columns=("sentence",),
    )
    return evaluate_task(runner, ckpt, tokenizer, data, batch_size=batch_size, progress=progress)


def evaluate_task(
    runner: Runner,
    ckpt: Checkpoint,
    tokenizer: AlbertTokenizer,
    data: TaskData,
    *,
    batch_size: int = ACCURACY_BATCH,
    progress: bool = True,
    null_threshold: float | None = None,
) -> dict[str, Any]:
    """The task's metric for the artifact and for PyTorch on the same encoded examples,
    the difference with its paired bootstrap interval, and their agreement.

    Features are sorted by token length and batched, each batch padded to its longest
    row: the same outputs as one at a time, in a fraction of the time. Both models see
    the same feeds; the head's outputs are compared at the real (unpadded) positions and
    their SQNR pooled over every example. SQuAD v2.0's null threshold, unless given, is
    chosen on the reference's outputs for half the questions and applied to both models
    on the other half (:func:`albert_edge.tasks.squad.held_out_split`).
    """
    from albert_edge.progress import Counter, enabled
    from albert_edge.tasks import encode, score

    max_len = _max_len(runner, ckpt)
    feats = encode(data, tokenizer, max_len)
    label = f"{data.kind.value} (artifact vs PyTorch)"
    bar = Counter(len(feats), label) if progress and enabled() else None
    try:
        art, ref, energies = _run_both(runner, ckpt, feats, batch_size, bar)
    finally:
        if bar is not None:
            bar.close()
    options = _score_options(data, feats, ref, null_threshold)
    m_ref = score(data, feats, ref, **options)
    m_art = score(data, feats, art, **options)
    measured = {
        "logits_sqnr_db": sqnr_db(*energies),
        "tokenizer": str(tokenizer.path),
        "max_len": max_len,
    }
    notes = {k: v for k, v in m_ref.notes.items() if k.startswith("null_threshold")}
    return _compared(data, m_art, m_ref, ckpt, measured, notes)


def _max_len(runner: Runner, ckpt: Checkpoint) -> int:
    """The longest feature both sides take: the artifact's, the position table's and
    the length the checkpoint was trained at, whichever is shortest."""
    from albert_edge.torch_model import trained_length

    max_len = min(int(runner.max_seq_len), int(ckpt.config.max_position_embeddings))
    return min(max_len, trained_length(ckpt) or max_len)


def _run_both(
    runner: Runner, ckpt: Checkpoint, feats: Any, batch_size: int, bar: Any
) -> tuple[dict[str, list[Any]], dict[str, list[Any]], list[float]]:
    """The head's outputs of the artifact and of PyTorch on the same feeds, per feature,
    and the pooled energies Σref², Σ(ref−out)² over every example."""
    names = list(ckpt.head.outputs)
    art: dict[str, list[Any]] = {n: [None] * len(feats) for n in names}
    ref: dict[str, list[Any]] = {n: [None] * len(feats) for n in names}
    energies = [0.0, 0.0]
    for idx in feats.batches(batch_size):
        feeds = adapt_feeds(feats.feeds(idx), runner)
        got = feats.split_outputs(idx, _pick(runner.run(feeds), names))
        want = feats.split_outputs(idx, _pick(run_reference(ckpt, feeds), names))
        for n in names:
            for f, a, r in zip(idx, got[n], want[n], strict=True):
                art[n][f], ref[n][f] = a, r
                m = compare_arrays(r, a)
                energies[0] += m["signal"]
                energies[1] += m["noise"]
        if bar is not None:
            bar.advance(len(idx))
    return art, ref, energies


def _score_options(
    data: TaskData, feats: Any, ref: Any, null_threshold: float | None = None
) -> dict[str, Any]:
    """SQuAD v2.0's null threshold for scoring both models: the given one, or one chosen
    on the reference's outputs for half the questions and applied on the other half
    (:func:`albert_edge.tasks.score_options`)."""
    from albert_edge.tasks import TaskKind, score_options

    if null_threshold is None:
        return score_options(data, feats, ref)
    v2 = data.kind is TaskKind.QUESTION_ANSWERING and data.format == "squad-v2.0"
    return {"null_threshold": null_threshold} if v2 else {}


def _compared(
    data: TaskData,
    m_art: Any,
    m_ref: Any,
    ckpt: Checkpoint,
    measured: dict[str, Any],
    notes: dict[str, Any],
) -> dict[str, Any]:
    """The metric record both evaluations return: both metrics, the difference with its
    paired bootstrap interval (or why there is none), their agreement, and ``measured``
    (how the outputs compared) and ``notes`` in their places."""
    from albert_edge.errors import TooFewRowsError
    from albert_edge.tasks import paired_metric_interval

    result: dict[str, Any] = {
        "task": data.kind.value,
        "format": data.format,
        "examples": m_ref.examples,
        "metric": m_ref.primary,
        "metric_artifact": m_art.value,
        "metric_reference": m_ref.value,
        "metrics_artifact": m_art.values,
        "metrics_reference": m_ref.values,
        "delta_points": round((m_art.value - m_ref.value) * 100.0, 6),
        "agreement": float(
            sum(a == b for a, b in zip(m_art.predictions, m_ref.predictions, strict=True))
            / max(1, len(m_ref.predictions))
        ),
        **measured,
    }
    if "accuracy" in m_ref.values:
        result["accuracy_artifact"] = m_art.values["accuracy"]
        result["accuracy_reference"] = m_ref.values["accuracy"]
    if data.pair:
        result["pair"] = "/".join(data.columns)
    result.update(notes)
    _note_learned_nothing(result, m_ref, ckpt)
    try:
        iv = paired_metric_interval(m_art, m_ref)
        result["interval_points"] = {
            "low": round(iv.low * 100.0, 6),
            "high": round(iv.high * 100.0, 6),
            "level": iv.level,
            "method": "paired bootstrap over examples",
        }
    except TooFewRowsError as exc:
        result["interval_points"] = None
        result["interval_note"] = str(exc)
    return result


def _note_learned_nothing(result: dict[str, Any], m_ref: Any, ckpt: Checkpoint) -> None:
    """``result["reference_note"]``: the reference itself learned nothing (one class for
    every row, entity F1 0, exact match 0), so a Δ of 0 against it says nothing either."""
    from albert_edge.tasks.learned import learned_nothing

    note = learned_nothing(m_ref, getattr(ckpt.config, "id2label", None), rows="scored")
    if note is not None:
        result["reference_note"] = f"the reference {note}"


def evaluate_against(
    runner: Runner,
    tokenizer: AlbertTokenizer,
    given: Checkpoint,
    data: TaskData,
    *,
    batch_size: int = ACCURACY_BATCH,
    progress: bool = True,
    against: str = "the checkpoint given to optimize, each model with its own tokenizer",
) -> dict[str, Any]:
    """The task's metric for the artifact (its own tokenizer) and for ``given`` in PyTorch
    (its own tokenizer), the difference with its paired bootstrap interval over examples.

    Why not :func:`evaluate_task`: the artifact of an ``optimize`` run may have another
    depth and another vocabulary than the checkpoint the user gave (a trimmed vocabulary
    numbers its pieces differently), so the two cannot share feeds; they share the
    examples, and the interval pairs them example by example. The cost it measures is the
    whole optimize's (fine-tune, depth, vocabulary, precision together)."""
    from albert_edge.progress import Counter, enabled
    from albert_edge.tasks import encode, score
    from albert_edge.tasks.types import run_features

    max_len = _max_len(runner, given)
    names = list(given.head.outputs)
    feats_a = encode(data, tokenizer, max_len)
    feats_r = encode(data, given.tokenizer(), max_len)
    label = f"{data.kind.value} (artifact, then the given checkpoint)"
    bar = Counter(len(feats_a) + len(feats_r), label) if progress and enabled() else None
    tick = bar.advance if bar is not None else None
    inputs = set(runner.input_names)
    try:
        art = run_features(
            feats_a,
            lambda f: _pick(runner.run({k: v for k, v in f.items() if k in inputs}), names),
            batch_size=batch_size,
            on_batch=tick,
        )
        ref = run_features(
            feats_r,
            lambda f: _pick(run_reference(given, f), names),
            batch_size=batch_size,
            on_batch=tick,
        )
    finally:
        if bar is not None:
            bar.close()
    options = _score_options(data, feats_r, ref)
    m_ref = score(data, feats_r, ref, **options)
    m_art = score(data, feats_a, art, **options)
    measured = {
        "logits_sqnr_db": math.nan,  # other feeds: no output-by-output comparison
        "max_len": max_len,
        "against": against,
    }
    return _compared(data, m_art, m_ref, given, measured, {})


def _pick(outputs: dict[str, np.ndarray], names: Sequence[str]) -> dict[str, np.ndarray]:
    """The head's outputs of ``outputs`` (a runner may return more)."""
    missing = [n for n in names if n not in outputs]
    if missing:
        raise VerificationError(f"the artifact lacks the head's outputs {missing}")
    return {n: outputs[n] for n in names}
