"""What a depth search reads, for each head it serves, before any model loads.

The checkpoint's head from its config.json (no torch), the task file read by the task
layer and checked against that head, labels and tags, the input length a search uses
when none is given, and SQuAD v2.0's minimum held-out split: so a wrong file, a wrong
head or too few questions is one line, first (:mod:`albert_edge.depth.search`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.depth.features import DepthError

if TYPE_CHECKING:
    from albert_edge.tasks import TaskData


def model_config(checkpoint: str | Path | None) -> dict[str, Any] | None:
    """The checkpoint's config.json as plain JSON (no torch); None where it has none."""
    from albert_edge import tasks
    from albert_edge.checkpoint import DEFAULT_MODEL

    return tasks.model_config(Path(checkpoint) if checkpoint is not None else DEFAULT_MODEL)


def head_of(checkpoint: str | Path | None) -> str:
    """The head config.json names (the embedded model: sequence-classification)."""
    from albert_edge.heads import head_from_architectures

    config = model_config(checkpoint)
    if config is None:
        return "sequence-classification"
    return head_from_architectures(config.get("architectures")).name


def task_data(data: str | Path, checkpoint: str | Path) -> TaskData:
    """``data`` read by the task layer and checked against the checkpoint's head and tags
    (config.json) before any model loads: a CoNLL file for a token head, a SQuAD file for
    a span head, anything else refused in one line naming the format the head needs."""
    from albert_edge.tasks import read_task_data

    config = model_config(checkpoint)
    if config is None:
        raise DepthError(f"{checkpoint}: no config.json; pass a Hugging Face checkpoint directory")
    return read_task_data(Path(data), Path(checkpoint), config)


def default_max_length(checkpoint: str | Path | None, head: str) -> int:
    """Tokens per input when ``--max-length`` is not given: 128 for a classifier (its
    sentences), the model's ``max_position_embeddings`` for a token or span head (as
    ``verify --data`` windows them: a CoNLL sentence whole, a SQuAD context in windows
    of that length with the default stride)."""
    if head == "sequence-classification":
        return 128
    config = model_config(checkpoint) or {}
    return int(config.get("max_position_embeddings") or 512)


def check_v2_held_out(held: int, data: Path) -> None:
    """SQuAD v2.0 scores only the odd-numbered held-out questions (the even ones choose
    the null threshold): refuse, before the model loads, a split that leaves fewer than
    the bootstrap's minimum to score."""
    from albert_edge.depth.stats import MIN_BOOTSTRAP_ROWS
    from albert_edge.errors import TooFewRowsError

    if held // 2 < MIN_BOOTSTRAP_ROWS:
        raise TooFewRowsError(
            f"{data}: SQuAD v2.0 chooses the null threshold on half of the {held} held-out "
            f"questions and scores the other {held // 2}, fewer than the {MIN_BOOTSTRAP_ROWS} "
            f"an interval needs: hold out at least {2 * MIN_BOOTSTRAP_ROWS} questions "
            "(--held-out-rows, and enough questions in --data)"
        )
