"""The ALBERT heads transformers ships, and what each one's exported graph is called.

One table, so that loading, export, verification and the Android demo agree on output
names without each re-deriving them from transformers' classes.
"""

from __future__ import annotations

from dataclasses import dataclass

from albert_edge.errors import UnsupportedError

# Where ``albert-edge train --exit-loss pabee`` writes the exit classifiers beside the model
# (read by albert_edge.depth and albert_edge.early_exit).
EXIT_HEADS_FILE = "exit_classifiers.safetensors"


@dataclass(frozen=True)
class HeadSpec:
    """One ALBERT head.

    ``outputs`` are the graph output names, in order; they are also the attribute names
    on transformers' ModelOutput, so ``getattr(out, name)`` yields the reference tensor.
    ``choices_axis`` is True for multiple choice, whose inputs are [batch, choices, seq].
    """

    name: str
    hf_class: str
    outputs: tuple[str, ...]
    choices_axis: bool = False


HEADS: dict[str, HeadSpec] = {
    spec.name: spec
    for spec in (
        HeadSpec("base", "AlbertModel", ("last_hidden_state", "pooler_output")),
        HeadSpec("sequence-classification", "AlbertForSequenceClassification", ("logits",)),
        HeadSpec("masked-lm", "AlbertForMaskedLM", ("logits",)),
        HeadSpec("pretraining", "AlbertForPreTraining", ("prediction_logits", "sop_logits")),
        HeadSpec(
            "question-answering", "AlbertForQuestionAnswering", ("start_logits", "end_logits")
        ),
        HeadSpec("token-classification", "AlbertForTokenClassification", ("logits",)),
        HeadSpec("multiple-choice", "AlbertForMultipleChoice", ("logits",), choices_axis=True),
    )
}

_BY_CLASS = {spec.hf_class: spec for spec in HEADS.values()}


def head_by_name(name: str) -> HeadSpec:
    try:
        return HEADS[name]
    except KeyError:
        raise UnsupportedError(
            f"unknown head {name!r}; choose one of: {', '.join(HEADS)}"
        ) from None


def head_from_architectures(architectures: list[str] | None) -> HeadSpec:
    """The head a config's ``architectures`` names; a config without one is the base model."""
    if not architectures:
        return HEADS["base"]
    for arch in architectures:
        if arch in _BY_CLASS:
            return _BY_CLASS[arch]
    raise UnsupportedError(
        f"unsupported ALBERT head {architectures[0]!r}; supported: " + ", ".join(sorted(_BY_CLASS))
    )
