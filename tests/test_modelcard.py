"""The model card's ``pipeline_tag`` and "Use" section follow the artifact's head (issue 52:
token-classification and QA artifacts said ``feature-extraction``).

Each task head and the bare encoder are converted for real (a tiny random checkpoint, ONNX
fp32) and the ``README.md`` read back; every head transformers ships is rendered for both
targets too (the tag is one function of the head, whatever the target).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from albert_edge.heads import HEADS
from albert_edge.modelcard import PIPELINES, pipeline_tag, render_model_card

EXPECTED = {
    "sequence-classification": "text-classification",
    "token-classification": "token-classification",
    "question-answering": "question-answering",
    "masked-lm": "fill-mask",
    "pretraining": "fill-mask",
    "multiple-choice": "multiple-choice",
    "base": "feature-extraction",
}


def _front_matter(card: str) -> dict[str, str]:
    assert card.startswith("---\n"), card[:200]
    head = card.split("---\n", 2)[1]
    return dict(line.split(": ", 1) for line in head.splitlines())


def test_every_head_has_its_pipeline() -> None:
    assert set(PIPELINES) == set(HEADS) == set(EXPECTED)
    for head, tag in EXPECTED.items():
        assert pipeline_tag(head) == tag
        for target, model_file in (("onnx", "onnx/model.onnx"), ("tflite", "model.tflite")):
            card = render_model_card({"target": target, "head": head, "model_file": model_file})
            assert _front_matter(card)["pipeline_tag"] == tag, (head, target)
    # feature-extraction is the bare encoder's alone
    assert [h for h, t in EXPECTED.items() if t == "feature-extraction"] == ["base"]


@pytest.mark.parametrize(
    ("head", "ort_class"),
    [
        ("sequence-classification", "ORTModelForSequenceClassification"),
        ("token-classification", "ORTModelForTokenClassification"),
        ("question-answering", "ORTModelForQuestionAnswering"),
        ("base", "ORTModelForFeatureExtraction"),
    ],
)
def test_converted_card_names_the_heads_pipeline(
    tmp_path: Path, make_checkpoint, head: str, ort_class: str
) -> None:
    from albert_edge import ConvertOptions
    from albert_edge.convert import convert
    from albert_edge.progress import set_enabled

    set_enabled(False)
    try:
        out = tmp_path / "art"
        convert(make_checkpoint("tiny", head=head), out, ConvertOptions())
    finally:
        set_enabled(True)
    card = (out / "README.md").read_text()
    assert _front_matter(card)["pipeline_tag"] == EXPECTED[head]
    assert f"# ALBERT ({head})" in card
    # the Use section and the runtimes table load it with its own class and pipeline
    assert f"from optimum.onnxruntime import {ort_class}" in card
    assert f"| optimum {ort_class} |" in card
    assert f'pipeline("{EXPECTED[head]}"' in card and f"pipeline('{EXPECTED[head]}'" in card
    other = {c for _, c, _ in PIPELINES.values() if c and c != ort_class}
    assert not any(c in card for c in other), card
