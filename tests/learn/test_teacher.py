"""``train --teacher DIR`` with a teacher of its own tokenizer (albert_edge.learn.teacher).

The teachers are tiny random BERTs with a WordPiece vocabulary the tests write
(:mod:`tests.learn.tiny_bert`), the students tiny ALBERTs with the embedded model's
SentencePiece model: the two tokenizers split words differently, which is what the
alignment units check. Runs are a few steps; what is checked is the mapping, the
transfer set, the cache and the refusals, not accuracy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import albert_edge.learn.teacher as foreign
from albert_edge.errors import AlbertEdgeError
from tests.learn.conftest import train_env
from tests.learn.test_tasks_train import TINY, _args, conll_text, pair_tsv, squad_json
from tests.learn.tiny_bert import tiny_bert

NER_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
SMALL = ["--config", TINY, "--max-len", "64", "--batch-size", "8"]


def _tok(spiece: Path):  # the student's tokenizer
    from albert_edge.tokenizer import AlbertTokenizer

    return AlbertTokenizer(spiece, do_lower_case=True)


# --- alignment units -------------------------------------------------------------------


def test_word_distributions_land_on_the_students_first_pieces(
    tmp_path: Path, spiece_path: Path
) -> None:
    """Each word's teacher row sits exactly where the student's label sits (its first
    piece), across the windows a long sentence is cut into; nothing elsewhere."""
    import albert_edge.tasks as tasks

    f = tmp_path / "ner.txt"
    f.write_text(conll_text(6) + "Xylophonistically NNP I-NP I-PER\nsang VBD I-VP O\n\n")
    data = tasks.read_task_file(f)
    feats = tasks.encode(data, _tok(spiece_path), 8)  # short windows: sentences split
    assert len(feats) > len(data.examples)
    rng = np.random.default_rng(0)
    words = {e: rng.normal(size=(len(ex.words), 9)) for e, ex in enumerate(data.examples)}
    for k in range(len(feats)):
        e = feats.example_index[k]
        t = foreign.word_targets(feats.word_ids[k], words[e], 9)
        labelled = [i for i, lab in enumerate(feats.labels[k]) if lab != -100]
        nonzero = [i for i in range(len(t)) if np.any(t[i] != 0)]
        assert nonzero == labelled
        for i in labelled:
            np.testing.assert_allclose(t[i], words[e][feats.word_ids[k][i]].astype(np.float32))
    # a word the student splits into several pieces gets its row once, on the first
    assert len(_tok(spiece_path).tokenize_ids("Xylophonistically")) > 2


def test_character_spans_map_to_the_students_answer_pieces(
    tmp_path: Path, spiece_path: Path
) -> None:
    """A teacher sure of the answer's first and last characters gives the student's
    window its labelled (start, end) pieces; a window without the answer, [CLS]. A start
    character inside a word (a teacher '##' piece) counts for the word."""
    import albert_edge.tasks as tasks

    f = tmp_path / "squad.json"
    f.write_text(squad_json(2))
    data = tasks.read_task_file(f)
    feats = tasks.encode(data, _tok(spiece_path), 24)  # several windows per question
    assert len(feats) > len(data.examples)
    windows_without = windows_with = 0
    for k in range(len(feats)):
        ex = data.examples[feats.example_index[k]]
        text, at = ex.answers[0]
        for first_char in (at, at + len(text.split()[0]) - 1):  # word start, word end
            s_chars = np.zeros(len(ex.context) + 1)
            e_chars = np.zeros(len(ex.context) + 1)
            s_chars[first_char] = 1.0
            e_chars[at + len(text) - 1] = 1.0
            sw = foreign.char_to_words(s_chars, ex.word_starts, ex.words)
            ew = foreign.char_to_words(e_chars, ex.word_starts, ex.words)
            ls, le = foreign.span_targets(feats.word_ids[k], sw, ew)
            got = (int(np.argmax(ls)), int(np.argmax(le)))
            wid = feats.word_ids[k]
            a, b = int(np.argmax(sw)), int(np.argmax(ew))  # the answer's first / last word
            want = (
                wid.index(a) if a in wid else 0,
                len(wid) - 1 - wid[::-1].index(b) if b in wid else 0,
            )
            assert got == want
            if tuple(feats.labels[k]) != (0, 0):  # the window holds the answer: its label
                assert got == tuple(feats.labels[k])
                windows_with += 1
            np.testing.assert_allclose(np.exp(ls).sum(), 1.0, atol=1e-5)
        windows_without += tuple(feats.labels[k]) == (0, 0)
    assert windows_without > 0 and windows_with > 0


@pytest.mark.parametrize("kind", ["classification", "token-classification"])
def test_teacher_runs_shortest_first_and_answers_in_row_order(tmp_path: Path, kind: str) -> None:
    """Rows are batched by length for the teacher's forward (less padding); each row's
    output is the one it gets alone, returned at its own place."""
    words = ["a", "good", "film", "and", "a", "bad", "one", "of", "them", "all"]
    rng = np.random.default_rng(1)
    texts = [words[: int(rng.integers(1, len(words) + 1))] for _ in range(23)]
    if kind == "classification":
        head, labels = "sequence-classification", ["0", "1"]
        rows: list = [(" ".join(t), None) for t in texts]
    else:
        head, labels = "token-classification", NER_TAGS
        rows = [tuple(t) for t in texts]
    t = foreign.load(tiny_bert(tmp_path / "t", head, labels, words=words), head, labels)
    assert foreign._by_length(rows, kind) != list(range(len(rows)))  # the order does change
    batched, states, words = foreign._forward(t, rows, kind, batch=4)
    assert states is None and words is None  # no [CLS] or word layers asked
    for r, got in zip(rows, batched, strict=True):
        alone = foreign._forward_in_order(t, [r], kind, batch=1)[0][0]
        np.testing.assert_allclose(got, alone, atol=1e-5)


def test_cls_states_are_each_rows_own_at_the_asked_layers(tmp_path: Path) -> None:
    """``--distil-hidden``'s cache: per row, the teacher's [CLS] state at each asked layer,
    the one its own forward gives, at the row's place after the shortest-first batching."""
    import torch

    words = ["a", "good", "film", "and", "a", "bad", "one", "of", "them", "all"]
    rng = np.random.default_rng(2)
    rows = [(" ".join(words[: int(rng.integers(1, 11))]), None) for _ in range(13)]
    labels = ["0", "1"]
    t = foreign.load(tiny_bert(tmp_path / "t", "sequence-classification", labels, words=words),
                     "sequence-classification", labels)  # fmt: skip
    _, states, _ = foreign._forward(t, rows, "classification", batch=4, layers=[1, 2])
    assert states.shape == (13, 2, t.model.config.hidden_size) and states.dtype == np.float16
    for i, (text, _) in enumerate(rows):
        with torch.no_grad():
            hs = t.model(**t.tokenizer([text], return_tensors="pt"), output_hidden_states=True)
        want = torch.stack([hs.hidden_states[j][0, 0] for j in (1, 2)]).numpy()
        np.testing.assert_allclose(states[i].astype(np.float32), want, atol=2e-2, rtol=1e-2)


def test_augment_is_seeded_and_replaces_within_frequency_buckets() -> None:
    sents = [["the", "film", "is", "good"], ["the", "film", "is", "bad"], ["the", "plot"]] * 5
    aug = foreign.Augment(copies=3, p_mask=0.2, p_replace=0.4, seed=5)
    a = foreign.augment(sents, aug, "[MASK]")
    assert a == foreign.augment(sents, aug, "[MASK]")
    assert a != foreign.augment(sents, foreign.Augment(3, 0.2, 0.4, seed=6), "[MASK]")
    of, _ = foreign.buckets(sents)
    flat = [
        (o, n)
        for s, copies in zip(sents, a, strict=True)
        for c in copies
        for o, n in zip(s, c, strict=True)
    ]
    assert all(len(c) == len(s) for s, copies in zip(sents, a, strict=True) for c in copies)
    assert any(n == "[MASK]" for _, n in flat)
    changed = [(o, n) for o, n in flat if n not in (o, "[MASK]")]
    assert changed and all(of[o] == of[n] for o, n in changed)


def test_augment_only_copies_the_rows_it_accepts_and_draws_for_no_other() -> None:
    """``only``: the accepted rows get their copies, drawn as though the rest were absent
    (no draws spent on them), with buckets still counted over every row."""
    long = [["a", "long", "row", "of", "many", "words", "in", "it"]] * 6
    short = [["a", "row"], ["it"]] * 5
    rows = [r for pair in zip(long, short, strict=False) for r in pair] + short[6:] + long[5:]
    aug = foreign.Augment(copies=2, p_mask=0.3, p_replace=0.3, seed=9)
    got = foreign.augment(rows, aug, "[MASK]", only=lambda w: len(w) >= 5)
    assert [len(c) for c in got] == [2 if len(r) >= 5 else 0 for r in rows]
    picked = [c for r, c in zip(rows, got, strict=True) if len(r) >= 5]
    of, members = foreign.buckets(rows)
    rng = np.random.default_rng(9)  # the draws of the accepted rows alone, in order
    for copies in picked:
        for c in copies:
            for w, new in zip(long[0], c, strict=True):
                r = rng.random()
                if r < 0.3:
                    assert new == "[MASK]"
                elif r < 0.6:
                    pool = members[of[w]]
                    assert new == pool[int(rng.integers(len(pool)))]
                else:
                    assert new == w


# --- runs ------------------------------------------------------------------------------


def _rec(out: Path) -> dict:
    return json.loads((out / "training.json").read_text())


def test_ner_distils_with_augmented_and_transfer_rows(tmp_path: Path, spiece_path: Path) -> None:
    from albert_edge.train import train

    f = tmp_path / "ner.txt"
    f.write_text(conll_text())
    teacher = tiny_bert(tmp_path / "t", "token-classification", NER_TAGS)
    extra = tmp_path / "more.txt"
    extra.write_text("Anna Lee visited Paris .\n\nJohn Smith works for Reuters .\n")
    out = tmp_path / "s"
    train(_args(f, out, spiece_path, *SMALL, "--teacher", str(teacher), "--augment", "1",
                "--transfer", str(extra)))  # fmt: skip
    rec = _rec(out)
    t = rec["teacher"]
    assert t["architecture"] == "BertForTokenClassification"
    assert t["transfer_set"]["labelled_rows"] == 40
    assert t["transfer_set"]["augmented_rows"] == 40
    assert t["transfer_set"]["transfer_file_rows"] == 2
    assert t["teacher_cost"]["rows"] == 82 and not t["teacher_cost"]["cached"]
    assert rec["train_examples"] == 82
    assert "first piece" in t["mapping"]
    assert str(tmp_path) not in json.dumps(rec)  # no build-machine path
    # the labelled rows it trained on are recorded, so optimize never scores on them
    seen = (out / "trained_rows.bin").read_bytes()  # labelled, augmented and transfer rows
    assert rec["trained_rows"]["rows"] == len(seen) // 8 > 0


def test_qa_distils_from_character_spans_and_refuses_augmenting(
    tmp_path: Path, spiece_path: Path
) -> None:
    from albert_edge.train import train

    f = tmp_path / "squad.json"
    f.write_text(squad_json())
    teacher = tiny_bert(tmp_path / "t", "question-answering")
    with pytest.raises(AlbertEdgeError, match="labelled questions only"):
        train(_args(f, tmp_path / "x", spiece_path, *SMALL, "--teacher", str(teacher),
                    "--augment", "1"))  # fmt: skip
    assert not (tmp_path / "x").exists()
    train(_args(f, tmp_path / "s", spiece_path, *SMALL, "--teacher", str(teacher)))
    t = _rec(tmp_path / "s")["teacher"]
    assert t["architecture"] == "BertForQuestionAnswering"
    assert "character" in t["mapping"]


def test_pair_cache_is_reused_without_a_teacher_forward(
    tmp_path: Path, spiece_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from albert_edge.train import train

    f = tmp_path / "rte.tsv"
    f.write_text(pair_tsv())
    teacher = tiny_bert(tmp_path / "t", "sequence-classification", ["entailment", "not_entailment"])
    out = tmp_path / "s"
    argv = [*SMALL, "--teacher", str(teacher), "--augment", "2"]
    train(_args(f, out, spiece_path, *argv))
    first = _rec(out)["teacher"]
    # 4 distinct pairs, 18 copies each: drawn by sentence, copies go together (2 held out)
    split = json.loads((out / "training.json").read_text())["data"]["held_out"]
    assert (split["by"], split["trained_rows"]) == ("sentence", 36)
    assert first["teacher_cost"]["rows"] == 36 * 3
    assert len(list(foreign.cache_dir(out).glob("*.npz"))) == 1

    def no_forward(*a: object, **k: object) -> None:
        raise AssertionError("the teacher ran again")

    monkeypatch.setattr(foreign, "_forward", no_forward)
    train(_args(f, out, spiece_path, *argv, "--overwrite"))
    again = _rec(out)["teacher"]
    assert again["teacher_cost"] == {
        **first["teacher_cost"],
        "seconds": 0.0,
        "rows": 0,
        "cached": True,
    }
    a = json.loads((out / "training.json").read_text())
    assert a["teacher"]["transfer_set"] == first["transfer_set"]
    with pytest.raises(AssertionError, match="ran again"):  # other augmentation: new key
        train(_args(f, out, spiece_path, *SMALL, "--teacher", str(teacher), "--augment", "1",
                    "--overwrite"))  # fmt: skip


def test_teacher_with_other_labels_is_refused(tmp_path: Path, spiece_path: Path) -> None:
    from albert_edge.train import train

    f = tmp_path / "rte.tsv"
    f.write_text(pair_tsv())
    teacher = tiny_bert(tmp_path / "t", "sequence-classification", ["yes", "no", "maybe"])
    with pytest.raises(AlbertEdgeError, match="labels yes, no, maybe"):
        train(_args(f, tmp_path / "s", spiece_path, *SMALL, "--teacher", str(teacher)))


def test_augment_without_such_a_teacher_is_refused(tmp_path: Path, spiece_path: Path) -> None:
    from albert_edge.train import train

    f = tmp_path / "rte.tsv"
    f.write_text(pair_tsv())
    with pytest.raises(AlbertEdgeError, match="--augment: the transfer set is labelled"):
        train(_args(f, tmp_path / "s", spiece_path, *SMALL, "--augment", "1"))


def test_cli_refuses_a_teacher_without_tokenizer_before_loading(
    tmp_path: Path, spiece_path: Path, sst2_train: Path
) -> None:
    """One line naming the directory and the fix; the weights (garbage here) never read."""
    teacher = tiny_bert(tmp_path / "t", "sequence-classification", ["0", "1"], tokenizer=False)
    (teacher / "model.safetensors").write_bytes(b"not a model")
    out = tmp_path / "s"
    r = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", "train", "--train", str(sst2_train), "--dev",
         str(sst2_train), "--teacher", str(teacher), "-o", str(out)],
        capture_output=True, text=True, env=train_env(), timeout=300,
    )  # fmt: skip
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert str(teacher) in lines[0] and "no tokenizer" in lines[0] and "save_pretrained" in lines[0]
    assert not out.exists()


def test_flags_that_need_a_shared_hidden_space_are_refused(
    tmp_path: Path, spiece_path: Path, sst2_train: Path
) -> None:
    """Exits share nothing with such a teacher; its hidden states only its [CLS], which
    answers for a whole row: --distil-hidden is refused for tagging, before any forward."""
    from albert_edge.train import train

    teacher = tiny_bert(tmp_path / "t", "sequence-classification", ["0", "1"])
    with pytest.raises(AlbertEdgeError, match="--exit-loss: not available with --teacher"):
        train(_args(sst2_train, tmp_path / "s", spiece_path, *SMALL, "--teacher",
                    str(teacher), "--dev", str(sst2_train), "--exit-loss", "pabee"))  # fmt: skip
    f = tmp_path / "ner.txt"
    f.write_text(conll_text())
    tagger = tiny_bert(tmp_path / "tt", "token-classification", NER_TAGS)
    with pytest.raises(AlbertEdgeError, match="--distil-hidden: not available with --teacher"):
        train(_args(f, tmp_path / "s", spiece_path, *SMALL, "--teacher", str(tagger),
                    "--distil-hidden"))  # fmt: skip
    assert not (tmp_path / "s").exists()


def record_term(monkeypatch: pytest.MonkeyPatch, name: str) -> list[float]:
    """The values ``albert_edge.learn.distil.<name>`` returns from now on, one per call
    (each step of a run that uses the term)."""
    import albert_edge.learn.distil as distil

    terms: list[float] = []
    real = getattr(distil, name)

    def counted(*a: object) -> object:
        out = real(*a)
        terms.append(float(out.detach()))
        return out

    monkeypatch.setattr(distil, name, counted)
    return terms


def same_weights_but_trained(plain: Path, other: Path) -> None:
    """``other``'s student holds the weights ``plain``'s does (no projection saved), with
    other values (the term trained it)."""
    from safetensors.numpy import load_file

    a, b = load_file(str(plain / "model.safetensors")), load_file(str(other / "model.safetensors"))
    assert set(a) == set(b) and not any("projection" in k for k in b)
    assert any(not np.array_equal(a[k], b[k]) for k in a)


def forbid_teacher_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on a teacher forward fails the test: a rerun must read the cache."""

    def no_forward(*a: object, **k: object) -> None:
        raise AssertionError("the teacher ran again")

    monkeypatch.setattr(foreign, "_forward", no_forward)


def test_cls_term_trains_a_projection_it_does_not_save(
    tmp_path: Path,
    spiece_path: Path,
    rows200: Path,
    dev60: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--distil-hidden with a teacher of its own tokenizer: the [CLS] states are cached
    under a key of their own (the logits-only cache stays valid), the term enters the loss
    at every step (and only with the flag), the record says which layers, and the
    student's files hold no projection."""
    from albert_edge.train import train

    teacher = tiny_bert(tmp_path / "t", "sequence-classification", ["0", "1"])
    base = [*SMALL, "--teacher", str(teacher), "--dev", str(dev60), "--epochs", "1"]
    plain, cls = tmp_path / "plain", tmp_path / "cls"
    terms = record_term(monkeypatch, "cls_term")
    train(_args(rows200, plain, spiece_path, *base))
    assert not terms  # off without the flag
    train(_args(rows200, cls, spiece_path, *base, "--distil-hidden", "2"))
    steps = _rec(cls)["log"][-1]["step"]
    assert len(terms) == steps and all(0.0 <= t <= 4.0 for t in terms)  # every step, bounded
    rec = _rec(cls)["teacher"]
    depth = json.loads(TINY)["num_hidden_layers"]
    assert rec["hidden"]["weight"] == 2.0
    assert rec["hidden"]["student_layers"] == list(range(1, depth + 1))
    assert len(rec["hidden"]["teacher_layers"]) == depth
    assert rec["teacher_cost"]["cache_key"] != _rec(plain)["teacher"]["teacher_cost"]["cache_key"]
    same_weights_but_trained(plain, cls)
    forbid_teacher_forward(monkeypatch)  # both caches serve a rerun
    train(_args(rows200, cls, spiece_path, *base, "--distil-hidden", "2", "--overwrite"))
    train(_args(rows200, plain, spiece_path, *base, "--overwrite"))


def test_cli_refuses_a_missing_transfer_file_in_one_line(
    tmp_path: Path, spiece_path: Path, sst2_train: Path
) -> None:
    teacher = tiny_bert(tmp_path / "t", "sequence-classification", ["0", "1"])
    missing = tmp_path / "nope.txt"
    r = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", "train", "--train", str(sst2_train), "--dev",
         str(sst2_train), "--teacher", str(teacher), "--transfer", str(missing), "-o",
         str(tmp_path / "s")],
        capture_output=True, text=True, env=train_env(), timeout=300,
    )  # fmt: skip
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert str(missing) in lines[0] and "no such file" in lines[0]
    assert not (tmp_path / "s").exists()
