"""Trimmed checkpoints: rows re-indexed with the tokenizer, same outputs on kept text, the
trim record, --keep / --coverage, the MLM head, --embedding-rank, and the refusals."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from albert_edge.checkpoint import TRIM_FILE, load_checkpoint
from albert_edge.data import DataError, read_sst2
from albert_edge.errors import OutputExistsError, TokenizerError, UnsupportedError
from albert_edge.vocab.corpus import read_sentences
from albert_edge.vocab.trim import TrimError, TrimOptions, trim_checkpoint


def _old_ids(src: Path, out: Path) -> list[int]:
    before, after = load_checkpoint(src).tokenizer(), load_checkpoint(out).tokenizer()
    index = {before.sp.IdToPiece(i): i for i in range(before.vocab_size)}
    return [index[after.sp.IdToPiece(i)] for i in range(after.vocab_size)]


def test_rows_follow_the_pieces_and_outputs_are_unchanged(trimmed_tiny, sst2_dev: Path) -> None:
    src, out, record = trimmed_tiny
    a, b = load_checkpoint(src), load_checkpoint(out)
    old_ids = _old_ids(src, out)
    assert b.config.vocab_size == len(old_ids) == record["pieces_kept"] < a.config.vocab_size
    wa = a.model.albert.embeddings.word_embeddings.weight
    wb = b.model.albert.embeddings.word_embeddings.weight
    assert torch.equal(wb, wa[old_ids])
    ta, tb = a.tokenizer(), b.tokenizer()
    new_of = {o: n for n, o in enumerate(old_ids)}
    same = 0
    with torch.no_grad():
        for _, s in read_sst2(sst2_dev)[:150]:
            ea, eb = ta.encode(s, padding="none"), tb.encode(s, padding="none")
            if all(i in new_of for i in ea.input_ids[0]):
                assert [new_of[i] for i in ea.input_ids[0]] == eb.input_ids[0]
                la = a.model(**{k: torch.tensor(v) for k, v in vars(ea).items()}).logits
                lb = b.model(**{k: torch.tensor(v) for k, v in vars(eb).items()}).logits
                assert torch.equal(la, lb), s
                same += 1
    assert same > 30


def test_trim_record(trimmed_tiny, corpus_file: Path) -> None:
    _, out, record = trimmed_tiny
    on_disk = json.loads((out / TRIM_FILE).read_text())
    assert on_disk == record
    assert record["corpus"]["sha256"] == hashlib.sha256(corpus_file.read_bytes()).hexdigest()
    assert (
        record["spiece_sha256"] == hashlib.sha256((out / "spiece.model").read_bytes()).hexdigest()
    )
    h = record["held_out"]
    assert h["sentences"] == 400 and 0.9 < h["token_coverage"] <= 1.0
    assert 0.5 < h["exact_segmentation_share"] <= 1.0
    assert h["unk_after"] <= h["unk_before"]
    assert len(record["id_map_sha256"]) == 64
    assert "/" not in json.dumps(record["source"])  # a name and a hash, never a path
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "config.json",
            "model.safetensors",
            "special_tokens_map.json",
            "spiece.model",
            "tokenizer.json",
            "tokenizer_config.json",
            TRIM_FILE,
        ]
    )


def test_keep_and_coverage(
    make_checkpoint: Callable[..., Path], corpus_file: Path, tmp_path
) -> None:
    src = make_checkpoint("tiny")
    small = trim_checkpoint(src, corpus_file, tmp_path / "k", TrimOptions(keep=500))
    assert small["pieces_kept"] == 500 and small["rule"] == "--keep 500"
    cov = trim_checkpoint(src, corpus_file, tmp_path / "c", TrimOptions(coverage=0.9))
    full = trim_checkpoint(src, corpus_file, tmp_path / "f", TrimOptions(coverage=1.0))
    assert small["pieces_kept"] < cov["pieces_kept"] < full["pieces_kept"]
    assert small["held_out"]["token_coverage"] < cov["held_out"]["token_coverage"]
    for r in (small, cov, full):  # fewer pieces never means a new <unk>
        assert r["held_out"]["unk_after"] <= r["held_out"]["unk_before"]
    with pytest.raises(TrimError, match=r"--keep 10 is below the \d+ pieces every trim keeps"):
        trim_checkpoint(src, corpus_file, tmp_path / "x", TrimOptions(keep=10))
    assert not (tmp_path / "x").exists()
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "mine.txt").write_text("keep")
    with pytest.raises(OutputExistsError, match="did not write"):  # never over a user's files
        trim_checkpoint(src, corpus_file, tmp_path / "x", TrimOptions(overwrite=True))
    assert (tmp_path / "x" / "mine.txt").read_text() == "keep"
    again = trim_checkpoint(src, corpus_file, tmp_path / "k", TrimOptions(keep=600, overwrite=True))
    assert again["pieces_kept"] == 600


def test_masked_lm_head_is_trimmed_with_the_table(
    make_checkpoint: Callable[..., Path], corpus_file: Path, tmp_path
) -> None:
    src = make_checkpoint("tiny", head="masked-lm")
    trim_checkpoint(src, corpus_file, tmp_path / "mlm", TrimOptions(keep=300))
    a, b = load_checkpoint(src), load_checkpoint(tmp_path / "mlm")
    old_ids = _old_ids(src, tmp_path / "mlm")
    assert torch.equal(b.model.predictions.bias, a.model.predictions.bias[old_ids])
    ids = torch.tensor([[2, *range(5, 40), 3]])  # kept: user-defined and single characters
    old = torch.tensor([[old_ids[i] for i in ids[0].tolist()]])
    with torch.no_grad():
        la = a.model(input_ids=old).logits[0][:, old_ids]
        lb = b.model(input_ids=ids).logits[0]
    torch.testing.assert_close(la, lb, rtol=0, atol=1e-5)
    with pytest.raises(UnsupportedError, match="MLM head"):
        trim_checkpoint(src, corpus_file, tmp_path / "r", TrimOptions(embedding_rank=4))


def test_embedding_rank_is_an_ordinary_albert(trimmed_tiny, corpus_file: Path, tmp_path) -> None:
    src = trimmed_tiny[0]
    rec = trim_checkpoint(
        src, corpus_file, tmp_path / "r8", TrimOptions(embedding_rank=8, refit_steps=60)
    )
    ck = load_checkpoint(tmp_path / "r8")
    assert ck.config.embedding_size == 8
    assert ck.model.albert.embeddings.word_embeddings.weight.shape == (rec["pieces_kept"], 8)
    r = rec["embedding_rank"]
    assert r["rank"] == 8 and r["of_embedding_size"] == 16
    # the brief re-fit improves on the bare SVD fold (the E-wide LayerNorm makes it inexact)
    assert 0 < r["held_out_relative_error"] < r["held_out_relative_error_svd_fold"]
    with pytest.raises(UnsupportedError, match="not below the embedding size 16"):
        trim_checkpoint(src, corpus_file, tmp_path / "r99", TrimOptions(embedding_rank=16))


def test_a_tokenizer_other_than_the_trimmed_one_is_refused(
    trimmed_tiny, spiece_path, tmp_path
) -> None:
    _, out, _ = trimmed_tiny
    swapped = tmp_path / "swapped"
    shutil.copytree(out, swapped)
    shutil.copyfile(spiece_path, swapped / "spiece.model")  # the untrimmed 30,000 pieces
    with pytest.raises(TokenizerError, match=r"30000 pieces but .*vocab_size="):
        load_checkpoint(swapped)
    # same size, other pieces: caught by the trim record's hash
    from albert_edge.vocab.spm_surgery import read_model

    proto = read_model(out / "spiece.model")
    proto.pieces[10].piece, proto.pieces[11].piece = proto.pieces[11].piece, proto.pieces[10].piece
    (swapped / "spiece.model").write_bytes(proto.SerializeToString())
    with pytest.raises(TokenizerError, match="not the SentencePiece model this trimmed checkpoint"):
        load_checkpoint(swapped)


def test_corpus_formats_and_refusals(tmp_path: Path, sst2_dev: Path) -> None:
    assert read_sentences(sst2_dev)[0] == read_sst2(sst2_dev)[0][1]  # as verify --data reads
    (tmp_path / "t.tsv").write_text("id\ttext\n1\tgood film\n2\tbad film\n")
    assert read_sentences(tmp_path / "t.tsv") == ["good film", "bad film"]
    (tmp_path / "n.tsv").write_text("id\tscore\n1\t0.5\n")
    with pytest.raises(DataError, match=r"n\.tsv: tab-separated corpus without a text column"):
        read_sentences(tmp_path / "n.tsv")
    (tmp_path / "u16.txt").write_bytes("good film\n".encode("utf-16"))
    with pytest.raises(DataError, match=r"u16\.txt: corpus file is UTF-16"):
        read_sentences(tmp_path / "u16.txt")
    (tmp_path / "l1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"l1\.txt: corpus file is not UTF-8"):
        read_sentences(tmp_path / "l1.txt")


def test_transformers_loads_the_trimmed_directory_as_written(trimmed_tiny) -> None:
    """An ordinary HF checkpoint: AutoTokenizer and the model class read it, and agree
    with albert_edge's tokenizer and model."""
    from transformers import AlbertForSequenceClassification, AutoTokenizer

    _, out, _ = trimmed_tiny
    hf_tok = AutoTokenizer.from_pretrained(str(out))
    hf_model = AlbertForSequenceClassification.from_pretrained(str(out)).eval()
    ours = load_checkpoint(out)
    text = "a gripping , tender film about grief ."
    enc = hf_tok(text, return_tensors="pt")
    assert enc["input_ids"][0].tolist() == ours.tokenizer().encode(text).input_ids[0]
    with torch.no_grad():
        torch.testing.assert_close(hf_model(**enc).logits, ours.model(**enc).logits)


def test_held_out_file(
    make_checkpoint: Callable[..., Path], corpus_file: Path, sst2_dev, tmp_path
) -> None:
    """--held-out: the whole corpus is counted, the record measures the named file."""
    rec = trim_checkpoint(
        make_checkpoint("tiny"), corpus_file, tmp_path / "h", TrimOptions(held_out=sst2_dev)
    )
    h = rec["held_out"]
    assert h["from"] == "dev.tsv" and h["sentences"] == 872
    assert rec["corpus"]["sentences"] == 4000
    assert 0.1 < h["exact_segmentation_share"] < 1.0 and h["unk_after"] <= h["unk_before"]
