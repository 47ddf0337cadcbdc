"""transformers.js runs albert-edge's question-answering and token-classification
artifacts as ``convert`` writes them (fp32 and int8-dynamic), and its answers are what
``albert_edge.tasks`` decodes from ONNX Runtime on the same file.

Question answering: ``pipeline('question-answering', <artifact>)`` on real SQuAD v1.1 dev
questions (``tests/data/squad_js``). The pipeline feeds ``[CLS] question [SEP] context
[SEP]`` (truncated at ``model_max_length``; no document stride: the contexts here fit one
window), scores every span of context tokens by the product of its start and end softmax
(= the largest start + end logit), with no limit on its length, and returns the decoded
pieces. ``albert_edge.tasks.squad.best_spans`` at those search rules (n-best = every
token, no maximum length) must choose the same span, expanded to whole words; at its
defaults (n-best 20, 30 tokens) it must too wherever that span is within them.

Token classification: transformers.js (4.3) maps no ALBERT class to the task, so
``pipeline('token-classification', <artifact>)`` refuses the model type; its
``TokenClassificationPipeline`` runs the artifact given ``AutoModel``'s model (outputs by
name, ``logits``) and the tokenizer. Its tag on each word's first piece must be
``albert_edge.tasks.tokens.predict_tags``' tag, and the IOB2 entities equal, on synthetic
CoNLL-style sentences. The pipeline drops a token whose text decodes to nothing: ALBERT's
lone ``▁`` piece, the first piece of most punctuation and of some numbers, so those words
get no tag from it (counted, never guessed).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.clients.test_node_clients import needs_node

ROOT = Path(__file__).resolve().parents[2]
JS = Path(__file__).parent / "js"
SCRIPT = ROOT / "android_demo" / "scripts" / "make_task_fixtures.py"
QA_MAX_POSITIONS = 512  # every sample context fits one window, as the pipeline needs
NER_SENTENCES = 16
# the margin (logit sum or logit) below which a choice is not compared: none here is
# closer (ONNX Runtime in Node and in Python compute the same file identically)
MARGIN = 1e-5


def fixtures_module() -> ModuleType:
    """android_demo/scripts/make_task_fixtures.py: the checkpoints and CoNLL sentences the
    Java decoders are tested on, shared so both clients see the same inputs."""
    spec = importlib.util.spec_from_file_location("make_task_fixtures", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def task_artifact(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    """``task_artifact(task, kind)``: "qa" or "ner", "fp32" or "int8" (int8-dynamic), as
    ``convert`` writes it (verification skipped: tests/clients compare it here), all under
    one models folder; built once per session."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    mod = fixtures_module()
    root = tmp_path_factory.mktemp("task-clients")
    ckpts: dict[str, Path] = {}
    cache: dict[tuple[str, str], Path] = {}

    def get(task: str, kind: str) -> Path:
        if task not in ckpts:
            ckpts[task] = (
                mod.make_qa_checkpoint(root / "ckpt", QA_MAX_POSITIONS)
                if task == "qa"
                else mod.make_ner_checkpoint(root / "ckpt")
            )
        if (task, kind) not in cache:
            out = root / "models" / f"{task}-{kind}"
            precision = {"fp32": "fp32", "int8": "int8-dynamic"}[kind]
            convert(ckpts[task], out, ConvertOptions(precision=precision, verify=False))
            cache[task, kind] = out
        return cache[task, kind]

    return get


@pytest.fixture(scope="session")
def squad_data() -> Any:
    from albert_edge.tasks import read_task_file

    return read_task_file(fixtures_module().SQUAD_SAMPLE)


@pytest.fixture(scope="session")
def conll_data(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from albert_edge.tasks import read_task_file

    mod = fixtures_module()
    path = tmp_path_factory.mktemp("conll") / "synthetic.conll"
    path.write_text(mod.conll_text(mod.synthetic_conll(NER_SENTENCES, seed=11, full_stop=False)))
    return read_task_file(path, label2id={t: i for i, t in enumerate(mod.CONLL_TAGS)})


def qa_request(name: str, data: Any) -> dict[str, Any]:
    return {
        "name": name,
        "questions": [{"question": ex.question, "context": ex.context} for ex in data.examples],
    }


def ner_request(name: str, data: Any) -> dict[str, Any]:
    return {"name": name, "sentences": [" ".join(ex.words) for ex in data.examples]}


def run_node_tasks(request: dict[str, Any], tmp: Path) -> dict[str, Any]:
    req = tmp / "tasks-request.json"
    req.write_text(json.dumps(request))
    r = subprocess.run(
        ["node", str(JS / "run_tasks.mjs"), str(req)],
        capture_output=True,
        text=True,
        cwd=JS,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def ort_outputs(artifact: Path, feats: Any) -> dict[str, list[np.ndarray]]:
    """ONNX Runtime in Python on the artifact's file, one feature at a time."""
    import onnxruntime as ort

    manifest = json.loads((artifact / "manifest.json").read_text())
    sess = ort.InferenceSession(
        str(artifact / manifest["model_file"]), providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in sess.get_outputs()]
    inputs = {i.name for i in sess.get_inputs()}
    out: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for i in range(len(feats)):
        feeds = {k: v for k, v in feats.feeds([i]).items() if k in inputs}
        for n, v in zip(names, sess.run(None, feeds), strict=True):
            out[n].append(v[0])
    return out


def pipeline_features(artifact: Path, data: Any, ids: list[list[int]], first_only: bool) -> Any:
    """``albert_edge.tasks`` features for the ids the pipeline fed (the whole text
    tokenized at once), each context piece mapped to its word. SentencePiece cuts the text
    at whitespace, so a word's pieces in running text are its pieces after any other word
    (``tokenize_ids("a " + word)`` less those of ``"a"``; the first word's are its own);
    that they concatenate to the fed ids is checked. ``first_only``: only a word's first
    piece carries it (token classification); else every piece (QA)."""
    from albert_edge.tasks import TaskKind
    from albert_edge.tasks.types import Features
    from albert_edge.tokenizer import AlbertTokenizer

    tok = AlbertTokenizer(artifact / "spiece.model")
    lead = len(tok.tokenize_ids("a"))
    qa = data.kind == TaskKind.QUESTION_ANSWERING
    word_ids = []
    for e, seq in enumerate(ids):
        # the context: after the first [SEP] for QA, after [CLS] for a sentence
        first = seq.index(tok.sep_id) + 1 if qa else 1
        wid = [-1] * len(seq)
        pos = first
        for w, word in enumerate(data.examples[e].words):
            pieces = tok.tokenize_ids(word) if w == 0 else tok.tokenize_ids("a " + word)[lead:]
            assert seq[pos : pos + len(pieces)] == pieces, (e, word)
            for k in range(len(pieces)):
                wid[pos + k] = w if k == 0 or not first_only else -1
            pos += len(pieces)
        assert pos == len(seq) - 1, (e, "the pieces do not align with the words")
        word_ids.append(wid)
    return Features(
        kind=data.kind,
        input_ids=ids,
        token_type_ids=[
            [0] * (x.index(tok.sep_id) + 1) + [1] * (len(x) - x.index(tok.sep_id) - 1)
            if qa
            else [0] * len(x)
            for x in ids
        ],
        example_index=list(range(len(ids))),
        labels=[None] * len(ids),
        pad_id=tok.pad_id,
        word_ids=word_ids,
        max_context=[[w >= 0 for w in wid] for wid in word_ids],
    )


def check_qa(artifact: Path, data: Any, result: dict[str, Any]) -> dict[str, int]:
    """The pipeline's answers against albert_edge.tasks on ONNX Runtime's logits of the
    same file and the same ids (see the module docstring); returns counts."""
    from albert_edge.tasks import encode
    from albert_edge.tasks.squad import best_spans
    from albert_edge.tokenizer import AlbertTokenizer

    assert "error" not in result, result.get("error")
    tok = AlbertTokenizer(artifact / "spiece.model")
    ids = result["ids"]
    # the pipeline tokenizes the question and the whole context as albert_edge's
    # tokenizer (= AlbertTokenizerFast) does
    for ex, got in zip(data.examples, ids, strict=True):
        assert got == tok.encode(ex.question, ex.context, padding="none").input_ids[0]
    feats = pipeline_features(artifact, data, ids, first_only=False)
    outs = ort_outputs(artifact, feats)
    vocab = [p for p, _ in json.loads((artifact / "tokenizer.json").read_text())["model"]["vocab"]]
    n = max(len(x) for x in ids)
    ours_all = best_spans(data, feats, outs, n_best=n, max_answer_length=n)
    ours_default = best_spans(data, feats, outs)
    per_word = encode(data, tok, QA_MAX_POSITIONS).input_ids
    counts = {"questions": 0, "within_defaults": 0, "ids_differ_from_per_word": 0}
    for e, ex in enumerate(data.examples):
        counts["ids_differ_from_per_word"] += per_word[e] != ids[e]
        start = np.asarray(outs["start_logits"][e], np.float64)[: len(ids[e])]
        end = np.asarray(outs["end_logits"][e], np.float64)[: len(ids[e])]
        ctx = np.asarray([w >= 0 for w in feats.word_ids[e]])
        # the pipeline's rule: the largest start + end over context spans, start <= end
        sums = start[:, None] + end[None, :]
        valid = ctx[:, None] & ctx[None, :] & np.triu(np.ones_like(sums, dtype=bool))
        sums = np.where(valid, sums, -np.inf)
        flat = np.sort(sums, axis=None)
        assert flat[-1] - flat[-2] > MARGIN, f"{ex.id}: two spans within {MARGIN}"
        s, t = np.unravel_index(int(np.argmax(sums)), sums.shape)
        # 1. the pipeline answered that span: its decoded pieces (whitespace aside)
        pieces = "".join(vocab[i] for i in ids[e][s : t + 1])
        want = pieces.replace("▁", "").replace("<unk>", "")
        assert "".join(result["answers"][e].split()) == want, (ex.id, result["answers"][e])
        # its score is that span's start and end softmax probabilities' product, the
        # softmax taken over [CLS] and the context tokens
        keep = ctx.copy()
        keep[0] = True
        ps = np.exp(start[s] - np.logaddexp.reduce(start[keep]))
        pe = np.exp(end[t] - np.logaddexp.reduce(end[keep]))
        assert result["scores"][e] == pytest.approx(ps * pe, rel=1e-4), ex.id
        # 2. albert_edge.tasks at the pipeline's search rules picks it, whole words
        wid = feats.word_ids[e]
        text = ex.word_span_text(wid[s], wid[t])
        assert ours_all[e][0] == text, ex.id
        assert ours_all[e][1] == pytest.approx(float(start[s] + end[t]), abs=1e-9)
        # 3. and at its defaults, wherever that span is within them
        top_s = np.argsort(-start, kind="stable")[:20]
        top_e = np.argsort(-end, kind="stable")[:20]
        if s in top_s and t in top_e and t - s + 1 <= 30:
            assert ours_default[e][0] == text, ex.id
            counts["within_defaults"] += 1
        counts["questions"] += 1
    return counts


def check_ner(artifact: Path, data: Any, result: dict[str, Any]) -> dict[str, int]:
    """The pipeline's first-piece tags and IOB2 entities against albert_edge.tasks on ONNX
    Runtime's logits of the same file and ids; returns counts of what was compared."""
    from seqeval.metrics.sequence_labeling import get_entities

    from albert_edge.tasks import encode
    from albert_edge.tasks.tokens import iob1_to_iob2, predict_tags
    from albert_edge.tokenizer import AlbertTokenizer

    assert "error" not in result, result.get("error")
    # the documented pipeline() call refuses ALBERT for the task (transformers.js 4.3)
    assert result["pipeline_error"] == "Unsupported model type: albert", result
    assert result["model_class"] == "AlbertModel"
    tok = AlbertTokenizer(artifact / "spiece.model")
    ids = result["ids"]
    for ex, got in zip(data.examples, ids, strict=True):
        assert got == tok.encode(" ".join(ex.words), padding="none").input_ids[0]
    feats = pipeline_features(artifact, data, ids, first_only=True)
    outs = ort_outputs(artifact, feats)
    ours = predict_tags(data, feats, outs)
    per_word = encode(data, tok, QA_MAX_POSITIONS).input_ids
    blank = tok.tokenize_ids("a .")[1]  # the lone "▁" piece
    counts = {"words": 0, "tagged": 0, "blank": 0, "sentences_whole": 0, "entities": 0}
    counts["ids_differ_from_per_word"] = sum(a != b for a, b in zip(per_word, ids, strict=True))
    for e, ex in enumerate(data.examples):
        theirs = {int(i): tag for i, tag, _ in result["tokens"][e]}
        logits = np.asarray(outs["logits"][e], np.float64)
        tags: list[str | None] = []
        for t, w in enumerate(feats.word_ids[e]):
            if w < 0:
                continue
            counts["words"] += 1
            if t not in theirs:
                assert ids[e][t] == blank, (ex.words, w)
                counts["blank"] += 1
                tags.append(None)
                continue
            top = np.sort(logits[t])
            assert top[-1] - top[-2] > MARGIN, (ex.words, w)
            assert theirs[t] == ours[e][w], (ex.words, w)
            counts["tagged"] += 1
            tags.append(theirs[t])
        if all(x is not None for x in tags):
            got = get_entities(iob1_to_iob2([x for x in tags if x is not None]))
            assert got == get_entities(iob1_to_iob2(ours[e])), ex.words
            counts["sentences_whole"] += 1
            counts["entities"] += len(got)
    return counts


@needs_node
@pytest.mark.parametrize("kind", ["fp32", pytest.param("int8", marks=pytest.mark.slow)])
def test_transformers_js_qa_and_ner_match_albert_edge_tasks(
    task_artifact, squad_data, conll_data, kind, tmp_path
):
    qa, ner = task_artifact("qa", kind), task_artifact("ner", kind)
    out = run_node_tasks(
        {
            "models_dir": str(qa.parent),
            "qa": qa_request(qa.name, squad_data),
            "ner": ner_request(ner.name, conll_data),
        },
        tmp_path,
    )
    qa_counts = check_qa(qa, squad_data, out["qa"])
    assert qa_counts["questions"] == 18
    # the pipeline's span lies within albert_edge.tasks' default search for most
    assert qa_counts["within_defaults"] >= 9, qa_counts
    ner_counts = check_ner(ner, conll_data, out["ner"])
    # most words are tagged by the pipeline; whole sentences carry entities
    assert ner_counts["tagged"] >= 0.8 * ner_counts["words"], ner_counts
    assert ner_counts["sentences_whole"] >= 8 and ner_counts["entities"] >= 20, ner_counts


def test_artifacts_have_the_layout_transformers_js_reads(task_artifact):
    """What the pipelines read: the ONNX file under onnx/, config.json with the head's
    class and (NER) the tag names, tokenizer.json + tokenizer_config.json whose
    model_max_length is the model's window."""
    for task in ("qa", "ner"):
        art = task_artifact(task, "fp32")
        manifest = json.loads((art / "manifest.json").read_text())
        assert manifest["model_file"] == "onnx/model.onnx"
        assert (art / manifest["model_file"]).is_file()
        assert (art / "tokenizer.json").is_file()
        cfg = json.loads((art / "config.json").read_text())
        assert cfg["model_type"] == "albert"
        head = {"qa": "AlbertForQuestionAnswering", "ner": "AlbertForTokenClassification"}
        assert cfg["architectures"] == [head[task]]
        tcfg = json.loads((art / "tokenizer_config.json").read_text())
        assert tcfg["model_max_length"] == cfg["max_position_embeddings"]
        if task == "ner":
            assert list(cfg["id2label"].values()) == list(fixtures_module().CONLL_TAGS)
