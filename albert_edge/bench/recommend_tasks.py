"""``bench --recommend --data`` on any task file: each candidate judged in the task's metric.

A GLUE pair file, a CoNLL file or a SQuAD file is read by the task layer and checked
against the checkpoint's head and labels (config.json) before any model loads; its
examples (sentence pairs, sentences, questions) are split into the *choose* and *report*
halves by the same seeded permutation as single sentences (:func:`recommend.split_rows`).
The checkpoint and every candidate are scored by :func:`albert_edge.tasks.score` (pair
accuracy, entity F1, SQuAD F1 over windows with the default stride, as ``verify --data``
does) and compared on the same examples with the paired bootstrap interval of the
metric's difference (:func:`albert_edge.tasks.paired_metric_interval`). The fields a
candidate gets are those of the single-sentence path (``accuracy`` holding the task's
primary metric, ``metric`` naming it, ``delta_vs_checkpoint`` in its points), so the
precision bars, the depth rule and the printout read them unchanged: a bar of 0.5 points
is 0.5 F1 points on a CoNLL file.

Why the checkpoint is scored at each candidate's length: a SQuAD context is cut into
windows of the input length, so an artifact built for 128 tokens (TFLite's default
length) is compared with the checkpoint over the same 128-token windows, never with the
checkpoint's 512-token windows; what differs is then the precision, not the windowing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.bench.evidence import N_BOOT, SEED
from albert_edge.errors import BenchmarkError

if TYPE_CHECKING:
    from albert_edge.tasks import Metrics, TaskData

# The tasks whose files --recommend --data judges (calibration splits are written for them).
SERVED = ("classification", "token-classification", "question-answering")


def read_data(path: Path, checkpoint: str | Path | None, flag: str) -> TaskData | None:
    """``path`` through the task layer, checked against the checkpoint's head, labels and
    single/pair record before any model loads; None where the checkpoint has no
    config.json to check against (a TF1 checkpoint: the SST-2 reader decides)."""
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.tasks import model_config, read_task_data

    ref = Path(checkpoint) if checkpoint is not None else DEFAULT_MODEL
    config = model_config(ref)
    if config is None:
        return None
    data = read_task_data(path, ref, config)
    if data.kind.value not in SERVED:
        raise BenchmarkError(
            f"{path} ({flag}): bench --recommend judges {', '.join(SERVED)} data; this is "
            f"{data.kind.value} data: verify the candidates with `albert-edge verify --data`"
        )
    return data


def is_sentences(data: TaskData) -> bool:
    """Single sentences with class labels: the rows path (``(label, text)``) serves them."""
    from albert_edge.tasks import TaskKind

    return data.kind is TaskKind.CLASSIFICATION and not data.pair and not data.regression


def write_split(data: TaskData, path_stem: Path) -> Path:
    """The choose split in its own format (what the static precisions calibrate on): a
    GLUE .tsv, a CoNLL file, a SQuAD .json."""
    from albert_edge.tasks import TaskKind

    if data.kind is TaskKind.TOKEN_CLASSIFICATION:
        out = path_stem.with_suffix(".conll")
        blocks = [
            "\n".join(f"{w} {t}" for w, t in zip(ex.words, ex.tags, strict=True))
            for ex in data.examples
        ]
        out.write_text("\n\n".join(blocks) + "\n")
        return out
    if data.kind is TaskKind.QUESTION_ANSWERING:
        out = path_stem.with_suffix(".json")
        paragraphs: dict[str, list[dict[str, Any]]] = {}
        for ex in data.examples:
            qa: dict[str, Any] = {
                "id": ex.id,
                "question": ex.question,
                "answers": [{"text": t, "answer_start": s} for t, s in ex.answers],
            }
            if data.format == "squad-v2.0":
                qa["is_impossible"] = ex.is_impossible
            paragraphs.setdefault(ex.context, []).append(qa)
        version = "v2.0" if data.format == "squad-v2.0" else "1.1"
        body = [{"context": c, "qas": q} for c, q in paragraphs.items()]
        doc = {"version": version, "data": [{"title": "choose split", "paragraphs": body}]}
        out.write_text(json.dumps(doc) + "\n")
        return out
    out = path_stem.with_suffix(".tsv")
    names = data.label_names

    def label(y: float) -> str:
        if data.regression:
            return repr(float(y))
        return names[int(y)] if names else str(int(y))

    clean = [
        (ex.text.replace("\t", " "), (ex.text_pair or "").replace("\t", " "))
        for ex in data.examples
    ]
    if data.pair:
        lines = ["sentence1\tsentence2\tlabel"]
        lines += [
            f"{a}\t{b}\t{label(ex.label)}" for (a, b), ex in zip(clean, data.examples, strict=True)
        ]
    else:
        lines = ["sentence\tlabel"]
        lines += [
            f"{a}\t{label(ex.label)}" for (a, _), ex in zip(clean, data.examples, strict=True)
        ]
    out.write_text("\n".join(lines) + "\n")
    return out


def tokenizer_of(ckpt: Any, row: Mapping[str, Any]) -> Any:
    """The tokenizer a candidate's text goes through: a vocabulary-trimmed candidate's
    own trimmed SentencePiece model, else None (the checkpoint's)."""
    vocab = row.get("vocab")
    if not vocab:
        return None
    from albert_edge.tokenizer import AlbertTokenizer

    spiece = Path(vocab["checkpoint"]) / "spiece.model"
    return AlbertTokenizer(spiece, do_lower_case=bool(ckpt.do_lower_case))


def metric_fields(m: Metrics, ref: Metrics) -> dict[str, Any]:
    """A candidate's fields from its metrics and the checkpoint's on the same examples."""
    from albert_edge.tasks import metric_interval, paired_metric_interval

    iv = paired_metric_interval(m, ref, resamples=N_BOOT, seed=SEED)
    low, high = metric_interval(m, resamples=N_BOOT, seed=SEED)
    return {
        "metric": m.primary,
        "accuracy": m.value,
        "accuracy_interval": [low, high],
        "delta_vs_checkpoint": {
            "points": iv.delta * 100.0,
            "low": iv.low * 100.0,
            "high": iv.high * 100.0,
        },
        "examples": m.examples,
        "reference_accuracy": ref.value,
    }


class TaskScorer:
    """The task's metrics of the checkpoint and of artifacts on the choose and report
    splits (TaskData); the checkpoint's once per split and input length."""

    def __init__(self, ckpt: Any, splits: Mapping[str, Any], threads: int):
        self.ckpt, self.splits, self.threads = ckpt, splits, threads
        self.max_len = int(ckpt.config.max_position_embeddings)
        self.names = list(ckpt.head.outputs)
        self.reference: dict[tuple[str, int], Metrics] = {}
        self.options: dict[tuple[str, int], dict[str, Any]] = {}

    def _metrics(self, fn: Any, split: str, max_len: int, tokenizer: Any = None) -> Metrics:
        from albert_edge.tasks import encode, run_features, score, score_options

        data = self.splits[split]
        feats = encode(data, tokenizer if tokenizer is not None else self.ckpt.tokenizer(), max_len)
        outs = run_features(feats, fn)
        key = (split, max_len)
        if key not in self.options:  # SQuAD v2.0's threshold: on the checkpoint's outputs
            self.options[key] = score_options(data, feats, outs)
        return score(data, feats, outs, **self.options[key])

    def checkpoint(self, split: str, max_len: int | None = None) -> Metrics:
        key = (split, max_len or self.max_len)
        if key not in self.reference:
            import torch

            from albert_edge.reference import run_reference

            def fn(feeds: Any) -> Any:
                return run_reference(self.ckpt, feeds)

            before = torch.get_num_threads()
            torch.set_num_threads(self.threads)
            try:
                self.reference[key] = self._metrics(fn, split, key[1])
            finally:
                torch.set_num_threads(before)
        return self.reference[key]

    def tokenizer_of(self, row: Mapping[str, Any]) -> Any:
        return tokenizer_of(self.ckpt, row)

    def checkpoint_value(self, split: str) -> float:
        return self.checkpoint(split).value

    def checkpoint_fields(self, split: str) -> dict[str, Any]:
        ref = self.checkpoint(split)
        return metric_fields(ref, ref)

    def candidate_fields(self, path: Path, split: str, tokenizer: Any = None) -> dict[str, Any]:
        from albert_edge.early_exit.runner import open_any_runner

        runner = open_any_runner(path, threads=self.threads)
        try:
            names = set(runner.input_names)
            max_len = min(self.max_len, int(runner.max_seq_len))
            ref = self.checkpoint(split, max_len)

            def fn(feeds: Any) -> Any:
                got = runner.run({k: v for k, v in feeds.items() if k in names})
                return {n: got[n] for n in self.names}

            return metric_fields(self._metrics(fn, split, max_len, tokenizer), ref)
        finally:
            close = getattr(runner, "close", None)
            if close is not None:
                close()
