"""``optimize`` for token-classification and question-answering heads, without a model
build: what the plan runs and skips (no PABEE fine-tune, no dynamic exit; heal skipped
for span heads), the split (a CoNLL file by sentence, a SQuAD file by article, never one
question's windows in two splits) and the one-line refusals before any model loads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from albert_edge.optimize.plan import SPAN_HEAL, make_plan
from albert_edge.optimize.splits import split_parts, split_sizes, write_split
from albert_edge.tasks import read_task_file
from albert_edge.tasks.write import write_conll_subset
from tests.depth.test_task_heads import WORDS, conll, one_line, tagger
from tests.optimize.test_plan import shape


def _plan(task: str, **kw: object) -> dict[str, object]:
    p = make_plan(
        shape(task=task, **kw),
        budget_s=36000,
        finetune=True,
        trim=True,
        heal_available=True,
        prune=True,
    )
    return {
        "plan": p,
        "ran": {s.name: s.will_run for s in p.stages},
        "why": {s.name: s.why for s in p.stages},
        "text": "\n".join(p.describe()),
    }


@pytest.mark.parametrize("task", ["token-classification", "question-answering"])
def test_a_task_head_gets_no_finetune_and_no_dynamic_exit_and_says_why(task: str) -> None:
    got = _plan(task)
    ran, why, p = got["ran"], got["why"], got["plan"]
    assert isinstance(ran, dict) and isinstance(why, dict)
    assert ran["split"] and ran["depth"] and ran["trim"] and ran["depth-trim"]
    assert ran["finetune"] is False and "sequence classifiers" in why["finetune"]
    cands = p.candidates  # type: ignore[attr-defined]
    assert cands and all(c.exit == "none" for c in cands)
    assert all(c.source == "given" for c in cands)  # no fine-tuned model to search
    keys = {c.key for c in cands}
    for v in ("full", "trim"):
        for k in (1, 2, 3, 4):
            assert f"given-{v}-d{k}-fp32" in keys and f"given-{v}-d{k}-int8-dynamic" in keys
    # prune serves token and span heads: their pruned candidates, at every depth
    assert ran["prune"] and ran["depth-prune"]
    assert all(f"given-full-pruned-d{k}-fp32" in keys for k in (1, 2, 3, 4))
    assert any(s["what"] == "dynamic exit" for s in p.skipped)  # type: ignore[attr-defined]
    assert "will not  finetune" in str(got["text"]) and "will not  dynamic exit" in str(got["text"])
    data = json.loads(p.dumps())  # type: ignore[attr-defined]
    assert {s["name"]: s["will_run"] for s in data["stages"]}["finetune"] is False


def test_heal_runs_for_token_heads_and_is_skipped_for_span_heads_in_the_plan() -> None:
    token, span = _plan("token-classification"), _plan("question-answering")
    assert token["ran"]["heal"] is True  # type: ignore[index]
    assert span["ran"]["heal"] is False  # type: ignore[index]
    assert span["why"]["heal"] == SPAN_HEAL  # type: ignore[index]
    assert "heal skipped: span heads" in str(span["text"])
    # the unhealed trimmed vocabulary is still judged, like any other candidate
    keys = {c.key for c in span["plan"].candidates}  # type: ignore[attr-defined]
    assert "given-trim-d4-fp32" in keys and not any("-heal-" in k for k in keys)
    assert span["ran"]["depth-heal"] is False  # type: ignore[index]
    # a token head's healed vocabulary is judged beside the unhealed one
    keys = {c.key for c in token["plan"].candidates}  # type: ignore[attr-defined]
    assert {"given-trim-d4-fp32", "given-heal-d4-fp32"} <= keys


def test_classifier_plans_keep_their_finetune_exit_and_heal() -> None:
    got = _plan("classification")
    assert all(got["ran"].values())  # type: ignore[attr-defined]
    assert any(c.exit == "confidence" for c in got["plan"].candidates)  # type: ignore[attr-defined]


def _squad(path: Path, articles: int, paragraphs: int = 2, questions: int = 5) -> Path:
    data = []
    n = 0
    for a in range(articles):
        paras = []
        for p in range(paragraphs):
            ctx = " ".join(WORDS[(a + p + i) % len(WORDS)] for i in range(30)) + " ."
            qas = []
            for q in range(questions):
                w = ctx.split()[q]
                qas.append(
                    {
                        "id": f"q{n}",
                        "question": f"which {q}?",
                        "answers": [{"text": w, "answer_start": ctx.index(w)}],
                    }
                )
                n += 1
            paras.append({"context": ctx, "qas": qas})
        data.append({"title": f"article-{a}", "paragraphs": paras})
    path.write_text(json.dumps({"version": "1.1", "data": data}))
    return path


def _ids_by_split(tmp_path: Path, src: Path) -> tuple[dict[str, list[str]], str]:
    rows = read_task_file(src)
    parts, unit = split_parts(src, rows)
    out: dict[str, list[str]] = {}
    for name, idx in parts.items():
        f = tmp_path / f"{name}.json"
        write_split(src, rows, idx, f)
        out[name] = [e.id for e in read_task_file(f).examples]
        assert sorted(out[name]) == sorted(rows.examples[i].id for i in idx)
    return out, unit


def test_squad_splits_by_article_and_a_question_and_its_windows_stay_in_one_split(
    tmp_path: Path, spiece_path: Path
) -> None:
    from albert_edge.tasks import encode
    from albert_edge.tokenizer import AlbertTokenizer

    src = _squad(tmp_path / "squad.json", articles=24)
    ids, unit = _ids_by_split(tmp_path, src)
    assert unit == "article"
    every = [i for part in ids.values() for i in part]
    assert len(every) == len(set(every)) == 240  # disjoint, nothing lost
    _, held, _ = split_sizes(240)
    assert len(ids["choose"]) >= held and len(ids["report"]) >= held
    titles: dict[str, set[str]] = {}
    for name in ids:
        obj = json.loads((tmp_path / f"{name}.json").read_text())
        titles[name] = {a["title"] for a in obj["data"]}
    assert not (titles["choose"] & titles["report"]) and not (titles["fit"] & titles["choose"])
    assert not titles["fit"] & titles["report"]
    # windows come from their split's file: a 30-word context in 24-token windows spans
    # several features, all of one question in one split
    tok = AlbertTokenizer(spiece_path)
    for name in ids:
        data = read_task_file(tmp_path / f"{name}.json")
        feats = encode(data, tok, 24)
        assert len(feats) > len(data.examples)  # several windows per question
        assert {data.examples[i].id for i in feats.example_index} == set(ids[name])


def test_squad_with_few_articles_splits_by_question(tmp_path: Path) -> None:
    src = _squad(tmp_path / "one.json", articles=1, paragraphs=48)
    ids, unit = _ids_by_split(tmp_path, src)
    assert unit == "question"
    every = [i for part in ids.values() for i in part]
    assert len(every) == len(set(every)) == 240
    assert (len(ids["choose"]), len(ids["report"])) == (60, 60)


def test_conll_splits_by_sentence_and_keeps_the_lines_and_tags(tmp_path: Path) -> None:
    src = conll(tmp_path / "ner.txt", 240)
    rows = read_task_file(src)
    parts, unit = split_parts(src, rows)
    assert unit == "sentence" and [len(parts[k]) for k in ("choose", "report", "fit")] == [
        60,
        60,
        120,
    ]
    assert sorted(i for p in parts.values() for i in p) == list(range(240))
    write_conll_subset(src, rows, parts["choose"], tmp_path / "choose.txt")
    back = read_task_file(tmp_path / "choose.txt")
    assert [(e.words, e.tags) for e in back.examples] == [
        (rows.examples[i].words, rows.examples[i].tags) for i in parts["choose"]
    ]
    assert back.scheme == rows.scheme == "IOB1"  # the file's own columns and tags
    assert len((tmp_path / "choose.txt").read_text().splitlines()[0].split()) == 4


def test_task_data_that_does_not_fit_the_head_is_one_line_before_any_model_loads(
    make_checkpoint: Callable[..., Path], tmp_path: Path, sst2_train: Path, capsys
) -> None:
    ner = tagger(make_checkpoint, tmp_path / "ner")
    qa = make_checkpoint("tiny", "question-answering", seed=1)
    conll_file = conll(tmp_path / "ner.txt", 240)
    squad_file = _squad(tmp_path / "squad.json", articles=24)
    out = tmp_path / "out"

    def refused(ckpt: Path | None, data: Path) -> str:
        head = [str(ckpt)] if ckpt is not None else []
        return one_line(
            ["optimize", *head, "--data", str(data), "--max-drop", "1", "-o", str(out)], capsys
        )

    err = refused(None, conll_file)  # the embedded classifier: CoNLL data
    assert "ner.txt" in err and "token-classification data" in err
    err = refused(ner, sst2_train)
    assert "train.tsv" in err and "CoNLL-2003" in err
    err = refused(ner, squad_file)
    assert "squad.json" in err and "CoNLL-2003" in err
    err = refused(qa, conll_file)
    assert "ner.txt" in err and "SQuAD" in err
    few = conll(tmp_path / "few.txt", 150)
    err = refused(ner, few)
    assert "few.txt" in err and "150 examples" in err and "at least" in err
    mc = make_checkpoint("tiny", "multiple-choice", seed=1)
    err = refused(mc, squad_file)
    assert "multiple-choice" in err and "convert" in err
    assert not out.exists() and not (tmp_path / ".out.optimize-work").exists()


def test_the_task_depth_search_holds_what_its_states_memory_bound_allows() -> None:
    from albert_edge.optimize.plan import DEPTH_ROWS, DEPTH_STATE_BYTES, depth_rows

    # the small NER shape (L = 4, H = 128): about 22,000 sentences of states
    fit, held = depth_rows(shape(task="token-classification"), 128)
    assert (fit, held) == (17476, 4369) and fit <= DEPTH_ROWS[0] and held <= DEPTH_ROWS[1]
    # a SQuAD question keeps three windows of positions: fewer questions
    qa = shape(task="question-answering")
    fit, held = depth_rows(qa, 128)
    assert (fit, held) == (2184, 546)
    assert (fit + held) * 3 * 128 * qa.layers * qa.hidden * 4 <= DEPTH_STATE_BYTES
    # albert-base on long windows: the search's minimum (30 held out, a quarter)
    base = shape(task="question-answering", layers=12, hidden=768)
    assert depth_rows(base, 384) == (90, 30)
