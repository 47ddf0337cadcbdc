"""Calibration data for int8-static: real model inputs, encoded like the artifact's.

Sentences, or any task file's examples (:func:`albert_edge.data.read_calibration`), are
encoded by the task layer and each feature is fed alone at its natural length (batch 1,
no padding), so activation ranges come from real tokens only: padded positions would add
activations no deployed request produces and widen the ranges for nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx_ir as ir

from albert_edge.errors import QuantizationError

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.data import Calibration
    from albert_edge.tokenizer import AlbertTokenizer

METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}


def calibration_feeds(
    model: ir.Model,
    texts: Sequence[str] | Calibration,
    tokenizer: AlbertTokenizer,
    *,
    max_length: int = 512,
) -> list[dict[str, np.ndarray]]:
    """One feed dict per calibration feature, shaped and typed as the graph's inputs
    declare: a sentence, or a task file's encoded example (a pair with its token type
    ids, a SQuAD window, a CoNLL sentence, a multiple-choice question's choices), each
    encoded by the task layer as verify and training encode it."""
    from albert_edge.data import Calibration

    cal = texts if isinstance(texts, Calibration) else _sentences(texts)
    if not len(cal):
        raise QuantizationError("no calibration sentences; pass a file with at least one")
    feats = cal.encode(tokenizer, max_length)
    inits = set(model.graph.initializers)
    inputs = [i for i in model.graph.inputs if i.name not in inits]
    feeds = []
    for f in range(len(feats)):
        enc = feats.feeds([f])
        feed = {}
        for inp in inputs:
            if inp.name not in enc:
                raise QuantizationError(
                    f"graph input {inp.name!r} is not one of input_ids/attention_mask/"
                    "token_type_ids; cannot calibrate this model from text"
                )
            arr = enc[inp.name]
            rank = len(inp.shape) if inp.shape is not None else arr.ndim
            while arr.ndim < rank:  # multiple choice: [batch, choices, seq]
                arr = arr[:, None, :]
            feed[str(inp.name)] = arr.astype("int32" if inp.dtype == ir.DataType.INT32 else "int64")
        feeds.append(feed)
    if not feeds:
        raise QuantizationError("no calibration sentences; pass a file with at least one")
    return feeds


def _sentences(texts: Sequence[str]) -> Calibration:
    """Plain sentences as calibration examples (single sentences, fed one at a time)."""
    from albert_edge.data import Calibration
    from albert_edge.tasks import ClassificationExample, TaskData, TaskKind

    data = TaskData(
        kind=TaskKind.CLASSIFICATION,
        path=Path("<sentences>"),
        format="text",
        examples=[ClassificationExample(t, None, 0, n) for n, t in enumerate(texts, 1)],
        columns=("text",),
    )
    return Calibration(Path("<sentences>"), data)


def make_reader(feeds: list[dict[str, np.ndarray]]) -> Any:
    """An ``onnxruntime.quantization.CalibrationDataReader`` over precomputed feeds."""
    from onnxruntime.quantization import CalibrationDataReader

    class _Reader(CalibrationDataReader):
        """Supports ``CalibStridedMinMax`` (``__len__`` + ``set_range``): ORT's histogram
        calibrators (entropy, percentile) stack every sample's activations into one array,
        which fails for sentences of different lengths; fed one sentence per stride they
        merge histograms instead."""

        def __init__(self) -> None:
            self._items = feeds
            self._it: Iterator[dict[str, np.ndarray]] = iter(self._items)

        def __len__(self) -> int:
            return len(feeds)

        def set_range(self, start_index: int, end_index: int) -> None:
            self._it = iter(feeds[start_index:end_index])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

        def rewind(self) -> None:
            self._it = iter(feeds)

    return _Reader()


def calibrate_method(name: str) -> Any:
    from onnxruntime.quantization import CalibrationMethod

    try:
        return getattr(CalibrationMethod, METHODS[name])
    except KeyError:
        raise QuantizationError(
            f"unknown calibration method {name!r}; choose one of {', '.join(METHODS)}"
        ) from None
