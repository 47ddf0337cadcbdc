"""Tokenizer parity with transformers' AlbertTokenizerFast on all of SST-2 dev."""

from __future__ import annotations

import pytest

from albert_edge.data import read_sst2
from albert_edge.errors import TokenizerError
from albert_edge.tokenizer import AlbertTokenizer


@pytest.fixture(scope="module")
def toks(spiece_path):
    from transformers import AlbertTokenizerFast

    return AlbertTokenizer(spiece_path), AlbertTokenizerFast(vocab_file=str(spiece_path))


def test_parity_on_every_dev_sentence_single_and_paired(toks, sst2_dev):
    ours, fast = toks
    sentences = [s for _, s in read_sst2(sst2_dev)]
    assert len(sentences) == 872
    mismatches = []
    for i, s in enumerate(sentences):
        pair = sentences[(i + 1) % len(sentences)]
        single_ref = fast(s)
        paired_ref = fast(s, pair)
        single = ours.encode(s)
        paired = ours.encode(s, pair)
        if single.input_ids[0] != single_ref["input_ids"]:
            mismatches.append(("single", s))
        if (
            paired.input_ids[0] != paired_ref["input_ids"]
            or paired.token_type_ids[0] != paired_ref["token_type_ids"]
            or paired.attention_mask[0] != paired_ref["attention_mask"]
        ):
            mismatches.append(("pair", s))
    assert not mismatches, mismatches[:5]


@pytest.mark.parametrize(
    "text",
    [
        "k-19 exploits our fear .",  # user-defined '-' splits: ▁19, not 19
        "journey . ",  # trailing space becomes a lone ▁
        "It's 1,000 dollars, in 2010, (really) \"quoted\" ``latex'' –dash £5 €3",
        "café naïve KŐBÁNYA Ångström",
        "ＦＵＬＬ width ½ and tab\tnew\nline",
        "emoji 🙂 and 漢字 unknowns",
        "[MASK] a [CLS] b <pad> c",
        "  leading and trailing  ",
        "",
    ],
)
def test_parity_on_hard_cases(toks, text):
    ours, fast = toks
    assert ours.encode(text).input_ids[0] == fast(text)["input_ids"]


def test_truncation_padding_and_pairs(toks):
    ours, fast = toks
    a = "a rather long first sentence that keeps going and going " * 4
    b = "short second one"
    ref = fast(a, b, truncation="longest_first", max_length=24, padding="max_length")
    enc = ours.encode(a, b, max_length=24, padding="max_length")
    assert enc.input_ids[0] == ref["input_ids"]
    assert enc.token_type_ids[0] == ref["token_type_ids"]
    assert enc.attention_mask[0] == ref["attention_mask"]
    batch = ours.encode(["one", "two words here"])
    assert len(batch.input_ids[0]) == len(batch.input_ids[1])
    assert batch.attention_mask[0][-1] == 0
    with pytest.raises(TokenizerError, match="max_length"):
        ours.encode(a, max_length=8, truncation=False)


def test_bad_model_files(tmp_path, spiece_path):
    with pytest.raises(TokenizerError, match="not found"):
        AlbertTokenizer(tmp_path / "missing.model")
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(TokenizerError, match=str(junk)):
        AlbertTokenizer(junk)
    tok = AlbertTokenizer(spiece_path)
    with pytest.raises(TokenizerError, match="vocab_size=1000"):
        tok.check_vocab_size(1000, "config.json")
