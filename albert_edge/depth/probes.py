"""What the depth search does differently per head: the states a head reads, the head it
starts from, how it is fitted, and how its outputs become the task's :class:`Metrics`.

One search (:func:`albert_edge.depth.search_depths`) drives two probes:

* :class:`ClsProbe`, a sequence classifier (single sentences or pairs): the [CLS] state
  after every layer (:func:`~albert_edge.depth.features.cls_states`), a pooler +
  classifier head per depth, scored in accuracy (whatever the GLUE task: the exit heads
  and the rule are judged on the rows they get right);
* :class:`TokenProbe`, a token or span head: the states at the positions the head reads
  (:mod:`albert_edge.depth.task_heads`), a per-token linear per depth, scored by the task
  layer (:func:`albert_edge.tasks.score`: entity F1, SQuAD F1 over windows).

Both give the search a :class:`Split` per slice of the examples and a :class:`Metrics`
per (head, depth), so the split, the intervals and the record are one code path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.depth.features import DepthError, FitSettings

if TYPE_CHECKING:
    from albert_edge.checkpoint import Checkpoint
    from albert_edge.tasks import Metrics, TaskData

Head = dict[str, Any]  # an exit head's tensors by state-dict name


@dataclass
class Split:
    """One slice of the examples with the states its heads read: ``data`` (the task
    layer's examples), ``states`` (the probe's own), ``features`` (the task layer's model
    inputs, token and span heads), ``options`` (the scoring options chosen on the model's
    own full-depth outputs: SQuAD v2.0's null threshold)."""

    data: TaskData
    states: Any
    features: Any = None
    labels: Any = None
    options: dict[str, Any] = field(default_factory=dict)


class ClsProbe:
    """A sequence classifier's exit heads: pooler + classifier on the [CLS] state."""

    def read(self, data: Path, where: str | Path | None) -> TaskData:
        """The class-labelled rows of ``data`` (single sentences or pairs), checked against
        the checkpoint's head and labels before any model loads (None: the embedded
        model)."""
        from albert_edge.checkpoint import DEFAULT_MODEL
        from albert_edge.early_exit.fit import read_rows
        from albert_edge.errors import UnsupportedError

        model = Path(where) if where is not None else DEFAULT_MODEL
        try:
            return read_rows(data, model, "depth search")
        except UnsupportedError as exc:  # the depth package's own error type, same line
            raise DepthError(str(exc)) from None

    def check(self, task: TaskData, held: int, data: Path) -> None:
        """Nothing beyond the split's own minimum."""

    def splits(
        self,
        ckpt: Checkpoint,
        task: TaskData,
        slices: list[list[int]],
        max_length: int,
        where: Path,
        description: str = "features",
    ) -> list[Split]:
        """The [CLS] states of every slice, computed in one pass over their rows in order
        (the same batches, hence the same numbers, as one search over them)."""
        order = [i for s in slices for i in s]
        labels = _labels([int(task.examples[i].label) for i in order], ckpt, where)
        feats = _cls_states(ckpt, task, order, max_length, description)
        out, lo = [], 0
        for s in slices:
            part = slice(lo, lo + len(s))
            out.append(Split(task.subset(s), feats[part], labels=labels[part]))
            lo += len(s)
        return out

    def own(self, ckpt: Checkpoint) -> Head:
        from albert_edge.depth.features import own_head

        return own_head(ckpt)

    def init(self, ckpt: Checkpoint, depths: list[int]) -> tuple[dict[int, Head], str]:
        """The heads each depth starts from (the checkpoint's trained exit heads where it
        has them: a changed exit-heads file fails here, before the work), and in words."""
        from albert_edge.depth.features import trained_exit_heads

        trained = trained_exit_heads(ckpt)
        if trained:
            return trained, "trained exit heads (albert-edge train --exit-loss pabee)"
        own = self.own(ckpt)
        return {k: own for k in depths}, "the model's own pooler + classifier"

    def fit(self, init: Head, split: Split, settings: FitSettings, depth: int) -> Head:
        from albert_edge.depth.features import fit_head

        return fit_head(init, split.states[:, depth - 1], split.labels, settings, depth=depth)

    def metrics(self, head: Head, split: Split, depth: int) -> Metrics:
        """Accuracy of ``head`` after layer ``depth`` on the split's rows."""
        import numpy as np

        from albert_edge.depth.features import predictions
        from albert_edge.tasks import Metrics, TaskKind

        pred = predictions(head, split.states[:, depth - 1])
        correct = (pred == split.labels).numpy()
        c = correct.astype(np.float64)
        return Metrics(
            kind=TaskKind.CLASSIFICATION,
            values={"accuracy": float(correct.mean())},
            primary="accuracy",
            examples=len(c),
            predictions=[int(p) for p in pred],
            resample=lambda idx: {"accuracy": c[idx].mean(axis=1)},
        )

    def set_options(self, split: Split, own: Head, layers: int) -> None:
        """No scoring option is chosen for a classifier."""

    def correct_bits(self, m_ref: Metrics, split: Split) -> str | None:
        """The full-depth model's per-row correctness, kept so that artifacts scored later
        pair with it row by row (:mod:`albert_edge.depth.evaluate`)."""
        import numpy as np

        from albert_edge.depth.record import bits

        return bits(np.asarray(m_ref.predictions) == split.labels.numpy())


class TokenProbe:
    """A token or span head's per-depth heads: a per-token linear on the states at the
    positions it reads (:mod:`albert_edge.depth.task_heads`)."""

    def read(self, data: Path, where: str | Path | None) -> TaskData:
        """A CoNLL file for a token head, a SQuAD file for a span head, checked against the
        checkpoint (config.json) before any model loads."""
        from albert_edge.depth.data import task_data

        assert where is not None  # the embedded model is a classifier
        return task_data(data, where)

    def check(self, task: TaskData, held: int, data: Path) -> None:
        if task.format == "squad-v2.0":
            from albert_edge.depth.data import check_v2_held_out

            check_v2_held_out(held, data)

    def splits(
        self,
        ckpt: Checkpoint,
        task: TaskData,
        slices: list[list[int]],
        max_length: int,
        where: Path,
        description: str = "features",
    ) -> list[Split]:
        """Each slice encoded by the task layer (SQuAD contexts in windows) and its kept
        states computed, slice by slice."""
        from albert_edge.depth.task_heads import token_states
        from albert_edge.tasks import encode

        names = ["fit features", "held-out features"] if len(slices) == 2 else [description]
        max_len = min(max_length, int(ckpt.config.max_position_embeddings))
        out = []
        for s, name in zip(slices, names, strict=True):
            sub = task.subset(s) if len(s) != len(task.examples) else task
            feats = encode(sub, ckpt.tokenizer(), max_len)
            out.append(Split(sub, token_states(ckpt, feats, description=name), feats))
        return out

    def own(self, ckpt: Checkpoint) -> Head:
        from albert_edge.depth.task_heads import own_linear

        return own_linear(ckpt)

    def init(self, ckpt: Checkpoint, depths: list[int]) -> tuple[dict[int, Head], str]:
        own = self.own(ckpt)
        return {
            k: own for k in depths
        }, f"the model's own {'/'.join(sorted(own))} (a per-token linear)"

    def fit(self, init: Head, split: Split, settings: FitSettings, depth: int) -> Head:
        from albert_edge.depth.task_heads import fit_task_head

        head = self._head_name(split)
        return fit_task_head(head, init, split.states, split.features, settings, depth=depth)

    def metrics(self, head: Head, split: Split, depth: int) -> Metrics:
        from albert_edge.depth.task_heads import head_outputs
        from albert_edge.tasks import score

        outs = head_outputs(self._head_name(split), head, split.states, depth)
        return score(split.data, split.features, outs, **split.options)

    def set_options(self, split: Split, own: Head, layers: int) -> None:
        """The scoring options chosen on the model's own full-depth outputs on the split
        (SQuAD v2.0: the null threshold, as ``verify`` chooses it)."""
        from albert_edge.depth.task_heads import head_outputs
        from albert_edge.tasks import score_options

        ref = head_outputs(self._head_name(split), own, split.states, layers)
        split.options = score_options(split.data, split.features, ref)

    def correct_bits(self, m_ref: Metrics, split: Split) -> str | None:
        """None: a token or span metric is not a mean of per-example 0/1 rows."""
        return None

    @staticmethod
    def _head_name(split: Split) -> str:
        from albert_edge.tasks import TASK_HEADS

        return TASK_HEADS[split.data.kind]


Probe = ClsProbe | TokenProbe


def probe_for(head: str) -> Probe:
    """The probe of a served head (``check_served`` refuses the others first)."""
    from albert_edge.depth.task_heads import TASK_HEADS

    return TokenProbe() if head in TASK_HEADS else ClsProbe()


def _labels(labels: list[int], ckpt: Checkpoint, where: Path) -> Any:
    import torch

    num_labels = int(ckpt.config.num_labels)
    bad = sorted({y for y in labels if not 0 <= y < num_labels})
    if bad:
        raise DepthError(
            f"{where}: labels {bad[:5]} are outside the model's {num_labels} classes; "
            "use the data the classifier was trained for"
        )
    return torch.tensor(labels, dtype=torch.long)


def _cls_states(
    ckpt: Checkpoint, task: TaskData, order: list[int], max_length: int, description: str
) -> Any:
    from albert_edge.depth.features import cls_states

    ex = task.examples
    return cls_states(
        ckpt,
        [ex[i].text for i in order],
        pairs=[ex[i].text_pair for i in order] if task.pair else None,
        max_length=max_length,
        description=description,
    )
