"""LiteRT's Task Library ``BertQuestionAnswerer`` answers from a question-answering ``.tflite``
as ``convert --to tflite`` writes it, reading only the file: the input tensors by their
metadata names (``ids``, ``mask``, ``segment_ids``), the outputs (``start_logits``,
``end_logits``) and the SentencePiece tokenizer (the subgraph's input process unit, its
``spiece.model`` in the zip tail).

What the API requires beyond the metadata (tflite-support 0.4.4,
``bert_question_answerer.cc``): it fills subgraph 0's inputs with exactly 384 int32 tokens
(``kMaxSeqLen``), so subgraph 0 must be a 384-token signature; ``convert`` makes the longest
``--seq-lens`` bucket subgraph 0, so ``--seq-lens 128,384`` serves it. With convert's
default buckets (longest 128) ``answer`` raises ``RuntimeError: Bad StatusOr access``.
It builds its input as the BERT reference does (context split on spaces, each word
lower-cased (ASCII only) and cut into SentencePiece pieces alone, ``[CLS] question [SEP]
context [SEP]``, question at most 64 pieces, no windows) and takes the best of the 5 highest
start and end logits inside the context, at most 32 tokens long.

Compared here with albert-edge's own span decoding (:func:`albert_edge.tasks.squad.best_spans`
with the Task Library's 5 / 32) on the same file's logits, run by ai-edge-litert on the ids
the Task Library builds, and with PyTorch on those ids. Those ids are not always the ones
``albert_edge.tasks`` (and transformers' fast ALBERT tokenizer, which models are usually
fine-tuned with) make: raw SentencePiece keeps punctuation inside a word ("semi-arid":
``▁semi - ari d``, ours ``▁semi - ▁a rid``), keeps accents ("Graubünden") and keeps a
digit's comma ("1,230": ``▁1, 230``, ours ``▁1 , 230``). Every paragraph of the SQuAD
sample has such a word, so a model trained on albert-edge's ids sees slightly other inputs
through the Task Library: its answers are held to the model's answers on the Task
Library's own ids, not to albert-edge's pipeline on albert-edge's ids.

tflite-support cannot be a test extra of this project: its last release (0.4.4) requires
``protobuf<4`` and this project pins protobuf 7 (tensorflow 2.21 and onnx 1.23 need
>=6.31.1): ``pip install -c .ci/constraints.txt tflite-support`` fails with
ResolutionImpossible. It runs from its own venv (``.venv-tflite-support``, made by
``.ci/setup.sh``; or set ``ALBERT_EDGE_TFLITE_SUPPORT_PYTHON``), as in
``test_tflite_metadata.py``; without it only the metadata test below runs (the flatbuffer
read by albert-edge's own reader, not the Task Library).
Slow (but the note's test): a TFLite conversion at 384 tokens takes ~10 s of CPU per precision.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.clients.task_models import ROOT, SQUAD_SAMPLE, train_briefly

SIDE_PYTHON = Path(
    os.environ.get("ALBERT_EDGE_TFLITE_SUPPORT_PYTHON", ROOT / ".venv-tflite-support/bin/python")
)
needs_task_library = pytest.mark.skipif(
    not SIDE_PYTHON.is_file(),
    reason=f"{SIDE_PYTHON} missing: run .ci/setup.sh (tflite-support in its own venv)",
)
# BertQuestionAnswerer's constants (bert_question_answerer.h)
MAX_SEQ_LEN, MAX_QUERY_LEN, PREDICT_ANS_NUM, MAX_ANS_LEN = 384, 64, 5, 32
# int8-dynamic: the Task Library's answer against PyTorch's on the same ids; a near-tie may
# flip (as for optimum's int8 pipeline, test_optimum_tasks.py), a broken graph moves most.
INT8_MAX_CHANGED = 2
# The runtime inside tflite-support 0.4.4 (and tflite-runtime 2.14.0) computes a
# FULLY_CONNECTED with per-channel int8 weights (int8-dynamic's default) as zeros, so convert
# stamps that FC v12 and that runtime refuses it at load; the int8 file here is
# ``--per-tensor``, the form it runs (tests/tflite/test_old_runtimes.py).

ANSWER = r"""
import json, sys
from tflite_support.task.text import BertQuestionAnswerer

qa = BertQuestionAnswerer.create_from_file(sys.argv[1])
out = []
for row in json.loads(sys.stdin.read()):
    answers = qa.answer(row["context"], row["question"]).answers
    out.append([[a.text, a.pos.start, a.pos.end, a.pos.logit] for a in answers])
print(json.dumps(out))
"""


def test_task_library_qa_note() -> None:
    from albert_edge.tflite import litert_metadata as lm

    assert lm.task_library_qa_note("seq_384").endswith(
        "subgraph 0 is seq_384, so it runs this file."
    )
    note = lm.task_library_qa_note("seq_128")
    assert "subgraph 0 is seq_128, so it cannot run this file" in note
    assert "--seq-lens whose longest is 384" in note


@pytest.fixture(scope="module")
def qa_tflite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"checkpoint", "fp32", "int8"}: a tiny QA model (512 positions) briefly trained on
    the SQuAD sample at 384 tokens, and ``convert --to tflite --seq-lens 128,384`` of it
    (int8: ``--per-tensor``, the form the Task Library's runtime computes right)."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    root = tmp_path_factory.mktemp("task-library-qa")
    ckpt = train_briefly(
        root / "ckpt",
        SQUAD_SAMPLE,
        "question-answering",
        max_position_embeddings=512,
        max_len=MAX_SEQ_LEN,
        steps=60,
    )
    out = {"checkpoint": ckpt}
    for kind, precision in (("fp32", "fp32"), ("int8", "int8-dynamic")):
        out[kind] = root / f"tflite-{kind}"
        options = ConvertOptions(
            target="tflite",
            precision=precision,
            seq_lens=(128, MAX_SEQ_LEN),
            verify=False,
            per_channel=False if kind == "int8" else None,
        )
        convert(ckpt, out[kind], options)
    return out


def _ascii_lower(text: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in text)


def task_library_features(spiece: Path) -> tuple[Any, Any]:
    """The SQuAD sample and the one feature per question that BertQuestionAnswerer feeds
    (see the module docstring), as :class:`albert_edge.tasks.Features` for ``best_spans``."""
    import sentencepiece as spm

    from albert_edge.tasks import Features, TaskKind, read_task_file

    sp = spm.SentencePieceProcessor(model_file=str(spiece))
    data = read_task_file(SQUAD_SAMPLE)
    ids_l, types_l, wid_l = [], [], []
    for ex in data.examples:
        assert ex.context.split(" ") == list(ex.words)  # the sample has single spaces only
        query = sp.encode(_ascii_lower(ex.question))[:MAX_QUERY_LEN]
        doc, word_of = [], []
        for w, word in enumerate(ex.words):
            pieces = sp.encode(_ascii_lower(word))
            doc += pieces
            word_of += [w] * len(pieces)
        room = MAX_SEQ_LEN - len(query) - 3
        assert len(doc) <= room  # each paragraph fits: no truncation to mirror
        ids = [sp.piece_to_id("[CLS]"), *query, sp.piece_to_id("[SEP]")]
        ids += [*doc, sp.piece_to_id("[SEP]")]
        ids_l.append(ids)
        types_l.append([0] * (len(query) + 2) + [1] * (len(doc) + 1))
        wid_l.append([-1] * (len(query) + 2) + word_of + [-1])
    features = Features(
        kind=TaskKind.QUESTION_ANSWERING,
        input_ids=ids_l,
        token_type_ids=types_l,
        example_index=list(range(len(ids_l))),
        labels=[(0, 0)] * len(ids_l),
        word_ids=wid_l,
        max_context=[[True] * len(i) for i in ids_l],
    )
    return data, padded_positions(features)


def padded_positions(features: Any) -> Any:
    """``features`` with ``word_ids``/``max_context`` over all 384 positions, the padding
    outside the context: the Task Library ranks the 5 highest logits over the whole
    tensor, padding included (a padding position takes a place and is then skipped)."""
    import dataclasses

    pad = [MAX_SEQ_LEN - len(ids) for ids in features.input_ids]
    return dataclasses.replace(
        features,
        word_ids=[[*w, *[-1] * p] for w, p in zip(features.word_ids, pad, strict=True)],
        max_context=[[*c, *[False] * p] for c, p in zip(features.max_context, pad, strict=True)],
    )


def _padded(features: Any, f: int) -> dict[str, np.ndarray]:
    """Feature ``f`` as the Task Library feeds it: padded with 0 to 384 tokens, int32."""
    n = len(features.input_ids[f])
    ids = np.zeros((1, MAX_SEQ_LEN), np.int32)
    types = np.zeros((1, MAX_SEQ_LEN), np.int32)
    mask = np.zeros((1, MAX_SEQ_LEN), np.int32)
    ids[0, :n], types[0, :n], mask[0, :n] = features.input_ids[f], features.token_type_ids[f], 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def litert_logits(model: Path, features: Any) -> dict[str, list[np.ndarray]]:
    """The ``seq_384`` signature of ``model`` (ai-edge-litert) on each feature."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(model)).get_signature_runner(f"seq_{MAX_SEQ_LEN}")
    out: dict[str, list[np.ndarray]] = {"start_logits": [], "end_logits": []}
    for f in range(len(features)):
        got = runner(**_padded(features, f))
        for k in out:
            out[k].append(np.asarray(got[k][0]))
    return out


def torch_logits(checkpoint: Path, features: Any) -> dict[str, list[np.ndarray]]:
    import torch
    from transformers import AlbertForQuestionAnswering

    model = AlbertForQuestionAnswering.from_pretrained(checkpoint).eval()
    out: dict[str, list[np.ndarray]] = {"start_logits": [], "end_logits": []}
    with torch.no_grad():
        for f in range(len(features)):
            feeds = {
                k: torch.as_tensor(v, dtype=torch.long) for k, v in _padded(features, f).items()
            }
            got = model(**feeds)
            out["start_logits"].append(got.start_logits[0].numpy())
            out["end_logits"].append(got.end_logits[0].numpy())
    return out


def _task_library_answers(model: Path, data: Any) -> list[list[list[Any]]]:
    rows = [{"context": ex.context, "question": ex.question} for ex in data.examples]
    r = subprocess.run(
        [str(SIDE_PYTHON), "-c", ANSWER, str(model)],
        input=json.dumps(rows),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": "", "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    answers: list[list[list[Any]]] = json.loads(r.stdout.strip().splitlines()[-1])
    return answers


@pytest.mark.slow
def test_qa_metadata_names_what_the_task_library_reads(qa_tflite: dict[str, Path]) -> None:
    """albert-edge's flatbuffer reader (not the Task Library): subgraph 0 is the 384-token
    signature, the metadata names each of its tensors in tensor order as the Task Library
    looks them up, and the tokenizer's model is packed, the artifact's own bytes."""
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite import litert_metadata as lm

    for kind in ("fp32", "int8"):
        data = (qa_tflite[kind] / "model.tflite").read_bytes()
        model = fb.read_model(data)
        report = lm.metadata_report(model, data)
        assert report is not None and report["missing_files"] == []
        assert report["min_parser_version"] == lm.MIN_PARSER_VERSION
        (sg,) = report["subgraph_metadata"]
        assert sg["name"] == f"seq_{MAX_SEQ_LEN}"
        assert report["description"].endswith(lm.task_library_qa_note(sg["name"]))
        sig = next(sd for sd in model.signatureDefs if sd.subgraphIndex == 0)
        assert sig.signatureKey.decode() == f"seq_{MAX_SEQ_LEN}"
        graph = model.subgraphs[0]
        by_tensor = {int(t.tensorIndex): t.name.decode() for t in [*sig.inputs, *sig.outputs]}
        meta_names = {"input_ids": "ids", "attention_mask": "mask", "token_type_ids": "segment_ids"}
        ins = [by_tensor[int(i)] for i in graph.inputs]
        assert [t["name"] for t in sg["input_tensor_metadata"]] == [meta_names[n] for n in ins]
        for i in graph.inputs:  # int32 [1, 384], what PopulateTensor writes
            tensor = graph.tensors[int(i)]
            assert list(tensor.shape) == [1, MAX_SEQ_LEN]
            assert fb.tensor_type_names()[tensor.type] == "INT32"
        outs = [by_tensor[int(i)] for i in graph.outputs]
        assert sorted(outs) == ["end_logits", "start_logits"]
        assert [t["name"] for t in sg["output_tensor_metadata"]] == outs
        (unit,) = sg["input_process_units"]
        assert unit["options_type"] == "SentencePieceTokenizerOptions"
        assert [f["name"] for f in unit["sentencepiece_model"]] == ["spiece.model"]
        packed = lm.packed_files(data)
        assert packed == {"spiece.model": (qa_tflite[kind] / "spiece.model").read_bytes()}


@pytest.mark.slow
@needs_task_library
@pytest.mark.parametrize("kind", ["fp32", "int8"])
def test_bert_question_answerer(qa_tflite: dict[str, Path], kind: str) -> None:
    from albert_edge.tasks.squad import best_spans

    model = qa_tflite[kind] / "model.tflite"
    data, features = task_library_features(qa_tflite[kind] / "spiece.model")
    answers = _task_library_answers(model, data)
    assert len(answers) == len(data.examples)

    # albert-edge's span decoding, with the Task Library's limits, on the same file's logits
    logits = litert_logits(model, features)
    ours = best_spans(data, features, logits, n_best=PREDICT_ANS_NUM, max_answer_length=MAX_ANS_LEN)
    top = [tl[0][0] if tl else "" for tl in answers]
    assert sum(map(bool, top)) >= len(top) - 2  # it answers (none: no valid span in its 5x5)
    # fp32: the same kernels' arithmetic; int8: the Task Library's runtime quantizes the
    # activations with its own hybrid kernels, XNNPACK (ai-edge-litert) with its own, so
    # the logits agree to about 1 % and a near-tie may pick another span
    tol = 1e-4 if kind == "fp32" else 0.25  # int8: measured up to 0.07 on sums near 5
    other = []
    for f, (tl, (text, score, _)) in enumerate(zip(answers, ours, strict=True)):
        # every answer's logit is start + end at its positions in our ids: the ids, the
        # tensors it found by name and the start/end roles are ours
        for _, s, e, logit in tl:
            want = logits["start_logits"][f][s] + logits["end_logits"][f][e]
            assert logit == pytest.approx(want, abs=tol), data.examples[f].id
        if top[f] != text:  # "" where neither finds a span
            other.append(data.examples[f].id)
        elif tl:
            assert tl[0][3] == pytest.approx(score, abs=tol)
    assert len(other) <= (0 if kind == "fp32" else INT8_MAX_CHANGED), other

    # PyTorch on the same ids: the logits and the answers
    ref = torch_logits(qa_tflite["checkpoint"], features)
    ref_best = best_spans(
        data, features, ref, n_best=PREDICT_ANS_NUM, max_answer_length=MAX_ANS_LEN
    )
    changed = [
        (data.examples[f].id, t, r[0])
        for f, (t, r) in enumerate(zip(top, ref_best, strict=True))
        if t != r[0]
    ]
    assert len({r[0] for r in ref_best}) > len(ref_best) // 3  # not one answer everywhere
    if kind == "fp32":
        for f in range(len(features)):
            n = len(features.input_ids[f])
            for k in ("start_logits", "end_logits"):
                np.testing.assert_allclose(logits[k][f][:n], ref[k][f][:n], atol=1e-3)
        assert not changed
    else:
        assert len(changed) <= INT8_MAX_CHANGED, changed
