"""optimum's ``ORTModelForQuestionAnswering`` / ``ORTModelForTokenClassification`` load the
ONNX artifact as ``convert`` writes it (``config.json``'s architectures and id2label, the
graph's ``start_logits``/``end_logits``/``logits``, the tokenizer files) and run in
transformers' ``question-answering`` and ``token-classification`` pipelines, compared with
the same pipelines on the PyTorch checkpoint the artifact was converted from.

Models: a tiny ALBERT briefly trained in the test (:mod:`tests.clients.task_models`) on the
committed SQuAD sample (23 questions, paragraphs of 134-211 tokens, so the 128-position
model reads each in several windows: the pipeline's doc stride is exercised) and on
synthetic CoNLL-style sentences (the compared ones drawn with another seed than the
training ones). Artifacts are written with ``verify=False`` (``--no-verify``: the same
files, the manifest saying the check was skipped), since these tests are that check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.clients.task_models import SQUAD_SAMPLE, conll_sentences, train_briefly, write_conll

# int8-dynamic moves each logit a little (here up to 1.6e-3 in a pipeline score), and a
# span or tag whose runner-up is that close may change. Measured on this CPU: the trained
# tiny models kept 23 of 23 answers and 90 of 90 entities; the QA model trained by
# `albert-edge train` on 36 SQuAD dev articles (hidden 128, 4 layers) kept the PyTorch span
# through optimum's pipeline on 392 of the first 400 questions of the other 12 articles
# (98 %). The bounds let 2 of 23 answers (9 %) and 10 % of entities move: a near-tie may
# flip, a broken quantized graph (wrong scales, a swapped or random head) moves most.
INT8_QA_MAX_CHANGED = 2
INT8_NER_MIN_AGREEMENT = 0.9
# fp32: ORT's kernels against PyTorch's: the pipelines' probabilities to 1e-4.
FP32_SCORE_ATOL = 1e-4


def _squad_questions() -> list[tuple[str, str, str]]:
    """(id, question, context) of the committed SQuAD sample."""
    data = json.loads(SQUAD_SAMPLE.read_text())
    return [
        (q["id"], q["question"], p["context"])
        for a in data["data"]
        for p in a["paragraphs"]
        for q in p["qas"]
    ]


def _convert(ckpt: Path, out: Path, precision: str) -> Path:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    # --no-verify: the same files (the manifest says the check was skipped); the tests
    # compare with PyTorch themselves, and convert's grid costs ~2 s of CPU per artifact
    convert(ckpt, out, ConvertOptions(precision=precision, verify=False))
    return out


@pytest.fixture(scope="module")
def qa_artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"checkpoint", "fp32", "int8"}: the trained QA checkpoint and its ONNX artifacts."""
    root = tmp_path_factory.mktemp("optimum-qa")
    ckpt = train_briefly(root / "ckpt", SQUAD_SAMPLE, "question-answering", steps=60)
    return {
        "checkpoint": ckpt,
        "fp32": _convert(ckpt, root / "onnx-fp32", "fp32"),
        "int8": _convert(ckpt, root / "onnx-int8", "int8-dynamic"),
    }


@pytest.fixture(scope="module")
def ner_artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("optimum-ner")
    train = write_conll(root / "train.txt", conll_sentences(400, seed=0))
    ckpt = train_briefly(root / "ckpt", train, "token-classification", max_len=48, steps=80)
    return {
        "checkpoint": ckpt,
        "fp32": _convert(ckpt, root / "onnx-fp32", "fp32"),
        "int8": _convert(ckpt, root / "onnx-int8", "int8-dynamic"),
    }


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    """PyTorch on one thread while a pipeline runs: on these tiny models its 2-thread pool
    costs ~30x the CPU time (6 s vs 0.2 s for the 23 questions)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def qa_reference(qa_artifacts: dict[str, Path]) -> list[dict[str, Any]]:
    """The PyTorch checkpoint's answers, through the same pipeline and the artifact's
    tokenizer files."""
    from transformers import AlbertForQuestionAnswering, AutoTokenizer, pipeline

    tok = AutoTokenizer.from_pretrained(qa_artifacts["fp32"])
    ref = AlbertForQuestionAnswering.from_pretrained(qa_artifacts["checkpoint"]).eval()
    pipe = pipeline("question-answering", model=ref, tokenizer=tok)
    with _one_torch_thread():
        return [pipe(question=q, context=c) for _, q, c in _squad_questions()]


@pytest.mark.parametrize("kind", ["fp32", "int8"])
def test_optimum_question_answering(
    qa_artifacts: dict[str, Path], qa_reference: list[dict[str, Any]], kind: str
) -> None:
    from optimum.onnxruntime import ORTModelForQuestionAnswering
    from transformers import AutoTokenizer, pipeline

    art = qa_artifacts[kind]
    assert json.loads((art / "config.json").read_text())["architectures"] == [
        "AlbertForQuestionAnswering"
    ]
    tok = AutoTokenizer.from_pretrained(art)  # the artifact's files, as written
    assert tok.model_max_length == 128  # so the pipeline windows each context
    model = ORTModelForQuestionAnswering.from_pretrained(art)  # finds onnx/model*.onnx
    pipe = pipeline("question-answering", model=model, tokenizer=tok)
    questions = _squad_questions()
    got = [pipe(question=q, context=c) for _, q, c in questions]
    ref = qa_reference
    # the reference answers are spans of their context, and not all alike (it learned)
    for r, (*_, context) in zip(ref, questions, strict=True):
        assert r["answer"] and context[r["start"] : r["end"]] == r["answer"]
    assert len({r["answer"] for r in ref}) > len(questions) // 2
    changed = [
        (qid, g["answer"], r["answer"])
        for g, r, (qid, *_) in zip(got, ref, questions, strict=True)
        if (g["start"], g["end"]) != (r["start"], r["end"])
    ]
    if kind == "fp32":
        assert not changed
        np.testing.assert_allclose(
            [g["score"] for g in got], [r["score"] for r in ref], atol=FP32_SCORE_ATOL
        )
    else:
        assert len(changed) <= INT8_QA_MAX_CHANGED, changed


def _entities(out: list[dict[str, Any]]) -> set[tuple[str, int, int, str]]:
    return {(e["entity_group"], e["start"], e["end"], e["word"]) for e in out}


NER_SENTENCES = [" ".join(w for w, _ in s) for s in conll_sentences(24, seed=1)]


@pytest.fixture(scope="module")
def ner_reference(ner_artifacts: dict[str, Path]) -> list[list[dict[str, Any]]]:
    from transformers import AlbertForTokenClassification, AutoTokenizer, pipeline

    tok = AutoTokenizer.from_pretrained(ner_artifacts["fp32"])
    ref = AlbertForTokenClassification.from_pretrained(ner_artifacts["checkpoint"]).eval()
    pipe = pipeline("token-classification", model=ref, tokenizer=tok, aggregation_strategy="simple")
    with _one_torch_thread():
        return [pipe(s) for s in NER_SENTENCES]


@pytest.mark.parametrize("kind", ["fp32", "int8"])
def test_optimum_token_classification(
    ner_artifacts: dict[str, Path], ner_reference: list[list[dict[str, Any]]], kind: str
) -> None:
    from optimum.onnxruntime import ORTModelForTokenClassification
    from transformers import AutoTokenizer, pipeline

    art = ner_artifacts[kind]
    config = json.loads((art / "config.json").read_text())
    assert config["architectures"] == ["AlbertForTokenClassification"]
    tok = AutoTokenizer.from_pretrained(art)
    model = ORTModelForTokenClassification.from_pretrained(art)
    assert model.config.id2label[1] == "B-PER"  # the data's tag names, through config.json
    pipe = pipeline(
        "token-classification", model=model, tokenizer=tok, aggregation_strategy="simple"
    )
    got = [pipe(s) for s in NER_SENTENCES]
    ref = ner_reference
    ref_set = [_entities(r) for r in ref]
    # the reference finds entities of every type (the model learned the tags)
    assert {e[0] for r in ref_set for e in r} == {"PER", "LOC", "ORG", "MISC"}
    if kind == "fp32":
        assert [_entities(g) for g in got] == ref_set
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(
                [e["score"] for e in g], [e["score"] for e in r], atol=FP32_SCORE_ATOL
            )
    else:
        same = sum(len(_entities(g) & r) for g, r in zip(got, ref_set, strict=True))
        total = max(sum(len(r) for r in ref_set), sum(len(_entities(g)) for g in got))
        assert same / total >= INT8_NER_MIN_AGREEMENT, (same, total)
