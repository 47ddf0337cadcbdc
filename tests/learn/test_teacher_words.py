"""``train --distil-words``: word-level hidden states between a teacher of its own
tokenizer and the student (albert_edge.learn.teacher_words, distil.word_term).

Units check the alignment on both sides (the teacher's WordPiece and the student's
SentencePiece cut the same words differently), the pooling and the term; one short run
checks the flag end to end: the term at every step, its record, no projection saved,
the cache reused, and the refusals before anything loads.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import albert_edge.learn.teacher as foreign
from albert_edge.errors import AlbertEdgeError
from albert_edge.learn import teacher_words as tw
from tests.learn.test_tasks_train import TINY, _args, conll_text
from tests.learn.test_teacher import (
    NER_TAGS,
    SMALL,
    _tok,
    forbid_teacher_forward,
    record_term,
    same_weights_but_trained,
)
from tests.learn.tiny_bert import tiny_bert

WORDS = ["a", "good", "film", "and", "a", "bad", "one", "of", "them", "all", "n't", "'s"]


def test_every_second_student_layer_ending_at_the_last() -> None:
    assert tw.word_layers(6, 6) == [(2, 2), (4, 4), (6, 6)]
    assert tw.word_layers(3, 12) == [(1, 4), (3, 12)]
    assert tw.word_layers(1, 6) == [(1, 6)]


def test_teacher_word_state_is_the_mean_of_its_pieces_across_both_segments() -> None:
    """Pieces of one word average; segment 1's words follow segment 0's; a word the
    teacher read as no piece is NaN."""
    states = np.arange(2 * 7 * 3, dtype=np.float32).reshape(2, 7, 3)  # [layers, T, H]
    word_ids = [None, 0, 0, 1, None, 0, None]  # [CLS] w0 w0 w1 [SEP] v0 [SEP]
    seq = [None, 0, 0, 0, None, 1, None]
    got = tw.teacher_word_states(word_ids, seq, states, first_words=3, words=4)
    assert got.shape == (4, 2, 3) and got.dtype == np.float16
    np.testing.assert_allclose(got[0], (states[:, 1] + states[:, 2]) / 2)
    np.testing.assert_allclose(got[1], states[:, 3])
    assert np.isnan(got[2]).all()  # word 2 of segment 0: no piece (cut by the window)
    np.testing.assert_allclose(got[3], states[:, 5])


def test_student_words_follow_its_own_pieces(spiece_path: Path) -> None:
    """Each token of the student's feature gets the whitespace word it belongs to (a word
    of several pieces: every piece), the special tokens -1; pairs count on after the first
    text; a truncated feature keeps the words it holds."""
    tok = _tok(spiece_path)
    text, pair = "an unflinching , bittersweet journey", "it 's n't bad"
    enc = tok.encode(text, pair, max_length=64, padding="none")
    ids, types = enc.input_ids[0], enc.token_type_ids[0]
    got = tw.student_word_ids(ids, types, text, pair, tok.tokenize_ids)
    assert got is not None and len(got) == len(ids)
    assert got[0] == -1 and got[-1] == -1 and got.count(-1) == 3
    for w, word in enumerate(text.split() + pair.split()):
        pieces = [i for i, o in zip(ids, got, strict=True) if o == w]
        assert pieces == tok.tokenize_ids(word if w in (0, 5) else " " + word), word
    assert max(got) == len(text.split()) + len(pair.split()) - 1
    assert len(tok.tokenize_ids("unflinching")) > 1  # a word of several pieces is covered
    cut = tok.encode(text, max_length=5, padding="none")
    short = tw.student_word_ids(cut.input_ids[0], cut.token_type_ids[0], text, None,
                                tok.tokenize_ids)  # fmt: skip
    assert short is not None and short[0] == -1 and short[-1] == -1
    assert short[1:-1] == got[1:4]  # the first three pieces' words, as untruncated


def test_student_words_that_do_not_align_give_no_map(spiece_path: Path) -> None:
    tok = _tok(spiece_path)
    enc = tok.encode("a good film", max_length=64, padding="none")
    ids, types = enc.input_ids[0], enc.token_type_ids[0]
    assert tw.student_word_ids(ids, types, "a good film", None, tok.tokenize_ids) is not None
    wrong = tw.student_word_ids(ids, types, "a goodfilm", None, tok.tokenize_ids)
    assert wrong is None


def test_standardise_skips_missing_words() -> None:
    rows = [np.array([[[1.0, 10.0]], [[3.0, 30.0]]]), np.full((1, 1, 2), np.nan)]
    mean, std = tw.standardise(rows)
    np.testing.assert_allclose(mean, [[2.0, 20.0]])
    np.testing.assert_allclose(std, [[1.0, 10.0]])


def test_word_term_pools_pieces_and_counts_only_the_masked_words() -> None:
    """Zero where the projected mean of a word's pieces is its target; a word outside the
    mask costs nothing; the gradient reaches the student's states and the projection."""
    import torch

    from albert_edge.learn.distil import word_term

    torch.manual_seed(0)
    h = [torch.zeros(1, 5, 4), torch.randn(1, 5, 4, requires_grad=True)]  # embeddings, layer 1
    word_ids = torch.tensor([[-1, 0, 0, 1, -1]])
    proj = torch.nn.Linear(4, 3)
    with torch.no_grad():
        pooled = torch.stack([h[1][0, 1:3].mean(0), h[1][0, 3]])
        target = proj(pooled).unsqueeze(0).unsqueeze(2)  # [1, W=2, layers=1, 3]
    mask = torch.tensor([[True, True]])
    exact = word_term(h, [1], word_ids, target, mask, proj).detach()
    assert float(exact) == pytest.approx(0, abs=1e-10)
    off = target.clone()
    off[0, 1] += 2.0  # word 1 wrong by 2 in every dimension
    wrong = word_term(h, [1], word_ids, off, mask, proj).detach()
    assert float(wrong) == pytest.approx(2.0, rel=1e-5)
    loss = word_term(h, [1], word_ids, off, torch.tensor([[True, False]]), proj)
    assert float(loss.detach()) == pytest.approx(0, abs=1e-10)  # word 1 masked out
    word_term(h, [1], word_ids, off, mask, proj).backward()
    assert h[1].grad is not None and h[1].grad.abs().sum() > 0 and proj.weight.grad is not None


def test_teacher_word_states_are_each_rows_own(tmp_path: Path) -> None:
    """Per row at its own place after the shortest-first batching: the mean state of each
    word's pieces in the row's own forward; the logits as the plain text's."""
    import torch

    rng = np.random.default_rng(3)
    rows = [(" ".join(rng.choice(WORDS, int(rng.integers(1, 9)))), None) for _ in range(11)]
    labels = ["0", "1"]
    t = foreign.load(tiny_bert(tmp_path / "t", "sequence-classification", labels, words=WORDS),
                     "sequence-classification", labels)  # fmt: skip
    logits, _, words = foreign._forward(t, rows, "classification", batch=4, word_layers=[1, 2])
    plain, _, none = foreign._forward(t, rows, "classification", batch=4)
    assert none is None
    np.testing.assert_allclose(np.stack(logits), np.stack(plain), atol=1e-5)
    for i, (text, _) in enumerate(rows):
        split = text.split()
        enc = t.tokenizer([split], is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            hs = t.model(**enc, output_hidden_states=True).hidden_states
        ids = enc.word_ids(0)
        assert words[i].shape == (len(split), 2, t.model.config.hidden_size)
        for w in range(len(split)):
            at = [k for k, x in enumerate(ids) if x == w]
            want = torch.stack([hs[j][0, at].mean(0) for j in (1, 2)]).numpy()
            np.testing.assert_allclose(words[i][w].astype(np.float32), want, atol=2e-2, rtol=1e-2)


def _rec(out: Path) -> dict:
    return json.loads((out / "training.json").read_text())


def test_word_term_trains_a_projection_it_does_not_save(
    tmp_path: Path,
    spiece_path: Path,
    rows200: Path,
    dev60: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--distil-words: the word states cached under a key of their own, the term in the
    loss at every step and only with the flag, the record (layers, rows aligned), no
    projection among the student's weights, a rerun without a teacher forward."""
    from albert_edge.train import train

    teacher = tiny_bert(tmp_path / "t", "sequence-classification", ["0", "1"])
    base = [*SMALL, "--teacher", str(teacher), "--dev", str(dev60), "--epochs", "1"]
    plain, out = tmp_path / "plain", tmp_path / "words"
    terms = record_term(monkeypatch, "word_term")
    train(_args(rows200, plain, spiece_path, *base))
    assert not terms  # off without the flag
    train(_args(rows200, out, spiece_path, *base, "--distil-words", "0.5"))
    steps = _rec(out)["log"][-1]["step"]
    assert len(terms) == steps and all(np.isfinite(terms)) and max(terms) > 0
    rec = _rec(out)["teacher"]
    depth = json.loads(TINY)["num_hidden_layers"]
    assert rec["words"]["weight"] == 0.5
    assert [k for k, _ in rec["words"]["layers"]] == [k for k, _ in tw.word_layers(depth, 2)]
    aligned = rec["words"]["aligned"]
    assert aligned["features"] == rec["transfer_set"]["features"]
    assert aligned["aligned"] == aligned["features"]  # SST-2 rows align
    assert rec["teacher_cost"]["cache_key"] != _rec(plain)["teacher"]["teacher_cost"]["cache_key"]
    same_weights_but_trained(plain, out)
    forbid_teacher_forward(monkeypatch)
    train(_args(rows200, out, spiece_path, *base, "--distil-words", "0.5", "--overwrite"))


def test_distil_words_is_refused_where_no_words_are_shared(
    tmp_path: Path, spiece_path: Path, rows200: Path
) -> None:
    """Without a teacher of its own tokenizer, or for tagging, --distil-words is refused
    in one line before anything loads or is written."""
    from albert_edge.train import train

    with pytest.raises(AlbertEdgeError, match=r"--distil-words: .* give one"):
        train(_args(rows200, tmp_path / "s", spiece_path, *SMALL, "--dev", str(rows200),
                    "--distil-words"))  # fmt: skip
    f = tmp_path / "ner.txt"
    f.write_text(conll_text())
    tagger = tiny_bert(tmp_path / "tt", "token-classification", NER_TAGS)
    with pytest.raises(AlbertEdgeError, match=r"--distil-words: .* token-classification"):
        train(_args(f, tmp_path / "s", spiece_path, *SMALL, "--teacher", str(tagger),
                    "--distil-words"))  # fmt: skip
    assert not (tmp_path / "s").exists()


def test_student_words_align_on_sst2_rows(spiece_path: Path, sst2_train: Path) -> None:
    """Every SST-2 train row of the test data aligns (its trailing space and sentence-final
    ``.`` included: a word is cut as it stands after a space)."""
    tok = _tok(spiece_path)
    one = tw.word_tokenizer(tok.tokenize_ids)
    texts = [ln.split("\t")[1] for ln in sst2_train.read_text().splitlines()[1:2001]]
    texts += ["a [MASK] film .", "[MASK] , bittersweet [MASK]"]  # augmented rows: the mask
    for text in texts:
        enc = tok.encode(text, max_length=64, padding="none")
        got = tw.student_word_ids(enc.input_ids[0], enc.token_type_ids[0], text, None, one)
        assert got is not None, text
