"""SentencePiece surgery on the real 30k-clean.model: what is always kept, scores unchanged,
and the segmentation claim (a sentence whose original pieces were all kept segments
identically, ids remapped; nothing tokenizes into a new ``<unk>``) checked with three
tokenizers on text the trim never saw."""

from __future__ import annotations

from pathlib import Path

import pytest

from albert_edge.data import read_sst2
from albert_edge.tokenizer import AlbertTokenizer
from albert_edge.vocab.spm_surgery import mandatory_ids, pb, read_model, trimmed_model
from albert_edge.vocab.trim import choose_pieces, count_pieces
from tests.test_android_java import HARD_CASES

# Text no SST-2 file holds: other domains, scripts, digits, symbols.
UNSEEN = (
    "The quarterly EBITDA margin rose 3.7% to $1,204m despite FX headwinds.",
    "def f(x): return x**2 + 1  # squares, then adds one",
    "Photosynthesis converts CO2 and H2O into glucose (C6H12O6) and oxygen.",
    "Zürich, São Paulo, Kraków and Reykjavík are on the itinerary.",
    "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "email me at first.last+tag@example.org or call +44 20 7946 0958",
    "Κάτι ελληνικό, что-то русское, 日本語のテキスト, 한국어 문장, عربى",
    "¯\\_(ツ)_/¯ ~~~ <<>> {{}} [[]] ||| ^^^ %%% $$$ ### @@@",
    "tl;dr: IMHO the UX of v2.0.1-beta was meh, tbh.",
    "xyzzy plugh frobnicate quux grault garply waldo fred",
)


@pytest.fixture(scope="module")
def trimmed(tmp_path_factory, spiece_path: Path, corpus_file: Path):
    """(original tokenizer, trimmed tokenizer, old_ids, trimmed model path)."""
    before = AlbertTokenizer(spiece_path)
    proto = read_model(spiece_path)
    lines = corpus_file.read_text(encoding="utf-8").splitlines()
    new_proto, old_ids = trimmed_model(proto, choose_pieces(proto, count_pieces(before, lines)))
    path = tmp_path_factory.mktemp("spm") / "spiece.model"
    path.write_bytes(new_proto.SerializeToString())
    return before, AlbertTokenizer(path), old_ids, path


def test_kept_minimum_and_unchanged_scores(spiece_path: Path, trimmed) -> None:
    _, after, old_ids, path = trimmed
    proto, new = read_model(spiece_path), read_model(path)
    sp = pb().ModelProto.SentencePiece
    assert [p.piece for p in new.pieces[:5]] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert new.trainer_spec.vocab_size == len(new.pieces) == len(old_ids) == after.vocab_size
    assert 2000 < len(old_ids) < 20000  # a few thousand pieces from 4,000 sentences
    for new_id, old_id in enumerate(old_ids):  # same piece, score and type at the new id
        a, b = proto.pieces[old_id], new.pieces[new_id]
        assert (a.piece, a.score, a.type) == (b.piece, b.score, b.type)
    kept = set(old_ids)
    for i, p in enumerate(proto.pieces):
        if len(p.piece) == 1 or p.type in (sp.CONTROL, sp.UNKNOWN, sp.USER_DEFINED, sp.BYTE):
            assert i in kept, p.piece
    lowest = min(p.score for p in proto.pieces if p.type == sp.NORMAL)
    assert min(p.score for p in new.pieces if p.type == sp.NORMAL) == lowest
    assert new.normalizer_spec == proto.normalizer_spec
    assert mandatory_ids(proto) <= kept and old_ids == sorted(old_ids)


def _texts(sst2_dev: Path) -> list[str]:
    return [s for _, s in read_sst2(sst2_dev)] + list(HARD_CASES) + list(UNSEEN)


def test_kept_sentences_segment_identically_and_no_new_unk(trimmed, sst2_dev: Path) -> None:
    """albert_edge.tokenizer (= AlbertTokenizerFast) on all of SST-2 dev (never in the
    corpus), the Java suite's hard cases and other domains' text."""
    before, after, old_ids, _ = trimmed
    new_of = {old: new for new, old in enumerate(old_ids)}
    kept_all = exact = 0
    texts = _texts(sst2_dev)
    for s in texts:
        a, b = before.tokenize_ids(s), after.tokenize_ids(s)
        assert b.count(after.unk_id) <= a.count(before.unk_id), s
        assert all(0 <= i < after.vocab_size for i in b)
        if all(i in new_of for i in a):
            kept_all += 1
            exact += [new_of[i] for i in a] == b
    assert exact == kept_all, f"{kept_all - exact} of {kept_all} fully-kept texts re-segmented"
    # both branches exercised: dev meets dropped pieces and keeps many sentences whole
    assert 200 < kept_all < len(texts) - 200


def test_sentencepiece_and_fast_tokenizer_agree_on_the_trimmed_model(trimmed, sst2_dev) -> None:
    """SentencePiece itself (what LiteRT's metadata tokenizer runs) keeps the claim too,
    and AlbertTokenizerFast built from the trimmed model gives albert_edge's ids."""
    import sentencepiece as spm
    from transformers import AlbertTokenizerFast

    before, after, old_ids, path = trimmed
    new_of = {old: new for new, old in enumerate(old_ids)}
    sp_a = spm.SentencePieceProcessor(model_file=str(before.path))
    sp_b = spm.SentencePieceProcessor(model_file=str(path))
    fast = AlbertTokenizerFast(vocab_file=str(path))
    for s in _texts(sst2_dev):
        a, b = sp_a.encode(s), sp_b.encode(s)
        if all(i in new_of for i in a):
            assert [new_of[i] for i in a] == b, s
        assert b.count(sp_b.unk_id()) <= a.count(sp_a.unk_id()), s
        assert fast(s)["input_ids"] == after.encode(s).input_ids[0], s


def test_not_unigram_is_refused(tmp_path: Path, spiece_path: Path) -> None:
    from albert_edge.errors import TokenizerError

    proto = read_model(spiece_path)
    proto.trainer_spec.model_type = pb().TrainerSpec.BPE
    bpe = tmp_path / "bpe.model"
    bpe.write_bytes(proto.SerializeToString())
    with pytest.raises(TokenizerError, match=r"bpe\.model: SentencePiece model type is BPE"):
        read_model(bpe)
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"\xff" * 40)
    with pytest.raises(TokenizerError, match=r"junk\.model"):
        read_model(junk)
