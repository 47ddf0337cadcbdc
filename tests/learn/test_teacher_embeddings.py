"""``train --teacher DIR --teacher-embeddings`` (albert_edge.learn.teacher_embeddings):
the student's factorized embedding started from a teacher with its own tokenizer.

The teacher is a tiny random BERT whose WordPiece vocabulary the test writes
(:mod:`tests.learn.tiny_bert`); the student's vocabulary is the embedded SentencePiece
model. What is checked: which teacher tokens each student piece reads, that the tables
are one linear projection of the teacher's (so word + position + type keep the teacher's
sum), the spread, the record, and the refusals (before any training).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from albert_edge.errors import AlbertEdgeError
from albert_edge.learn.teacher_embeddings import WORD_START, mapped_table, piece_ids
from tests.learn.test_tasks_train import TINY, _args, pair_tsv
from tests.learn.tiny_bert import tiny_bert

SMALL = ["--config", TINY, "--max-len", "64", "--batch-size", "8"]
LABELS = ["entailment", "not_entailment"]


def _teacher_tok(d: Path):
    import transformers

    return transformers.AutoTokenizer.from_pretrained(str(d), local_files_only=True)


def test_pieces_read_the_teachers_tokens_of_their_text(tmp_path: Path) -> None:
    d = tiny_bert(tmp_path / "t", "sequence-classification", LABELS, words=["movie", "good"])
    tok = _teacher_tok(d)
    v = tok.get_vocab()
    assert piece_ids(WORD_START + "movie", tok) == [v["movie"]]  # a word the teacher has
    assert piece_ids(WORD_START + "xy", tok) == [v["x"], v["##y"]]  # spelled in its pieces
    assert piece_ids("y", tok) == [v["##y"]]  # a continuation piece: its ## token
    assert piece_ids("[CLS]", tok) == [v["[CLS]"]]
    assert piece_ids("<pad>", tok) == [v["[PAD]"]]
    assert piece_ids(WORD_START, tok) == []  # a bare word start has no text


def test_unknown_text_gets_the_unknown_vector_and_is_counted(tmp_path: Path) -> None:
    import torch

    d = tiny_bert(tmp_path / "t", "sequence-classification", LABELS, words=["good"])
    tok = _teacher_tok(d)
    v = tok.get_vocab()
    table = torch.randn(len(v), 8)
    rows, counts = mapped_table(
        [WORD_START + "good", WORD_START + "\u4e2d\u6587", WORD_START], tok, table
    )
    assert torch.equal(rows[0], table[v["good"]])
    assert torch.equal(rows[1], table[v["[UNK]"]])  # CJK text is outside the test's vocabulary
    assert counts == {"pieces": 3, "mapped": 1, "unknown": 1, "empty": 1}


def test_tables_are_one_projection_of_the_teachers(tmp_path: Path, spiece_path: Path) -> None:
    import sentencepiece as spm
    import torch
    import transformers

    import albert_edge.learn.teacher as foreign
    from albert_edge.learn.teacher_embeddings import transfer

    d = tiny_bert(tmp_path / "t", "sequence-classification", LABELS, words=["movie", "good"])
    teacher = foreign.load(d, "sequence-classification", LABELS)
    cfg = transformers.AlbertConfig(**json.loads(TINY), vocab_size=30000, num_labels=2)
    torch.manual_seed(0)
    student = transformers.AlbertForSequenceClassification(cfg)
    sp = spm.SentencePieceProcessor(model_file=str(spiece_path))
    rec = transfer(student, teacher, sp)
    assert rec["tables"] == ["word", "positions 0-127", "token types 0-1"]
    assert rec["embedding_size"] == 16 and rec["teacher_hidden"] == 32
    assert 0 < rec["variance_kept"] < 1
    assert rec["mapped"] + rec["unknown"] + rec["empty"] == rec["pieces"] == 30000
    emb = student.albert.embeddings
    word = emb.word_embeddings.weight.detach()
    assert float(word.std()) == pytest.approx(cfg.initializer_range, rel=1e-3)
    # every table is (teacher rows) @ one H'xE map: recover it from the positions, then
    # check the token types and the word rows against it
    t_emb = teacher.model.bert.embeddings
    t_pos = t_emb.position_embeddings.weight.detach()
    proj = torch.linalg.lstsq(t_pos, emb.position_embeddings.weight.detach()).solution
    t_types = t_emb.token_type_embeddings.weight.detach()
    assert torch.allclose(t_types @ proj, emb.token_type_embeddings.weight, atol=1e-5)
    t_word = t_emb.word_embeddings.weight.detach()
    v = teacher.tokenizer.get_vocab()
    a, b = sp.piece_to_id(WORD_START + "movie"), sp.piece_to_id(WORD_START + "good")
    diff = (t_word[v["movie"]] - t_word[v["good"]]) @ proj  # the word mean cancels
    assert torch.allclose(word[a] - word[b], diff, atol=1e-5)


def test_train_records_the_transfer_and_starts_from_it(tmp_path: Path, spiece_path: Path) -> None:
    from albert_edge.train import train

    f = tmp_path / "rte.tsv"
    f.write_text(pair_tsv())
    teacher = tiny_bert(tmp_path / "t", "sequence-classification", LABELS)
    out = tmp_path / "s"
    train(_args(f, out, spiece_path, *SMALL, "--teacher", str(teacher), "--teacher-embeddings"))
    rec = json.loads((out / "training.json").read_text())["teacher"]["embeddings"]
    assert rec["tables"][0] == "word" and rec["pieces"] == 30000
    plain = tmp_path / "p"
    train(_args(f, plain, spiece_path, *SMALL, "--teacher", str(teacher)))
    assert "embeddings" not in json.loads((plain / "training.json").read_text())["teacher"]


WIDE_H = json.dumps({**json.loads(TINY), "hidden_size": 48, "num_attention_heads": 2})


@pytest.mark.parametrize(
    ("flag", "extra", "match"),
    [
        ("--teacher-embeddings", [], "from a --teacher with its own tokenizer"),
        ("--teacher-layers", [], "from a --teacher with its own tokenizer"),
        (
            "--teacher-embeddings",
            ["--config", json.dumps({**json.loads(TINY), "embedding_size": 48})],
            "embedding size 48 is wider than",
        ),
        ("--teacher-layers", ["--config", WIDE_H], "hidden size 48 is wider than the teacher's 32"),
    ],
)
def test_refusals_come_before_training(
    tmp_path: Path, spiece_path: Path, flag: str, extra: list[str], match: str
) -> None:
    """Both flags (``--teacher-layers``: albert_edge.learn.teacher_layers) refuse a run
    without such a teacher, and a student wider than it, before the teacher runs."""
    from albert_edge.train import train

    f = tmp_path / "rte.tsv"
    f.write_text(pair_tsv())
    argv = [*SMALL, *extra, flag]
    if "wider than" in match:
        teacher = tiny_bert(tmp_path / "t", "sequence-classification", LABELS)
        argv += ["--teacher", str(teacher)]
    with pytest.raises(AlbertEdgeError, match=match):
        train(_args(f, tmp_path / "s", spiece_path, *argv))
    assert not (tmp_path / "s").exists()
    assert not list(tmp_path.glob(".s.teacher-cache"))  # refused before the teacher ran


@pytest.mark.parametrize("flag", ["--teacher-embeddings", "--teacher-layers"])
def test_init_and_a_teacher_start_are_refused_together(
    tmp_path: Path, spiece_path: Path, no_dropout: Path, flag: str
) -> None:
    from albert_edge.train import train

    f = tmp_path / "rte.tsv"
    f.write_text(pair_tsv())
    teacher = tiny_bert(tmp_path / "t", "sequence-classification", LABELS)
    with pytest.raises(AlbertEdgeError, match=flag + r": .*drop --init or the flag"):
        train(_args(f, tmp_path / "s", spiece_path, "--init", str(no_dropout),
                    "--teacher", str(teacher), flag))  # fmt: skip


@pytest.mark.parametrize("flag", ["--teacher-embeddings", "--teacher-layers"])
def test_single_sentence_training_refuses_the_flag_without_such_a_teacher(
    tmp_path: Path, spiece_path: Path, rows200: Path, flag: str
) -> None:
    """The SST-2 recipe (single sentences, no foreign teacher) does not ignore the flag."""
    from albert_edge.train import train

    with pytest.raises(AlbertEdgeError, match="from a --teacher with its own tokenizer"):
        train(_args(rows200, tmp_path / "s", spiece_path, *SMALL, "--dev", str(rows200),
                    flag))  # fmt: skip
    assert not (tmp_path / "s").exists()
