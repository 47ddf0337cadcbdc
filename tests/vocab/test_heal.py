"""The healing fine-tune of a trimmed checkpoint (:mod:`albert_edge.vocab.heal`): the
student reads the trimmed segmentation, the teacher the original, the logits are matched
(and each layer's state where the two segmentations align)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from albert_edge.data import read_sst2
from albert_edge.errors import UnsupportedError
from albert_edge.vocab.heal import HealError, HealOptions, Resegmenter, heal
from albert_edge.vocab.trim import trim_checkpoint

ROWS = 200  # SST-2 train sentences the tiny model is trimmed and healed for


@pytest.fixture(scope="module")
def trimmed(
    tmp_path_factory: pytest.TempPathFactory, trained_checkpoint: Path, sst2_train: Path
) -> tuple[Path, Path, Path]:
    """(source, trimmed checkpoint, corpus): the embedded trained classifier (its logits
    depend on the words, as a random model's barely do) trimmed for ROWS lines."""
    work = tmp_path_factory.mktemp("heal")
    corpus = work / "corpus.txt"
    corpus.write_text("".join(s + "\n" for _, s in read_sst2(sst2_train)[:ROWS]))
    src = trained_checkpoint
    trim_checkpoint(src, corpus, work / "trimmed")
    return src, work / "trimmed", corpus


def _kl(student_dir: Path, teacher_dir: Path, texts: list[str]) -> float:
    """Mean KL(teacher || student) over ``texts``, the student reading every word
    re-segmented (seeded), the teacher the original segmentation."""
    import torch
    import torch.nn.functional as F

    from albert_edge.checkpoint import load_checkpoint

    s, t = load_checkpoint(student_dir), load_checkpoint(teacher_dir)
    assert s.spiece_model is not None
    tok = Resegmenter(s.spiece_model, do_lower_case=True, share=1.0, seed=99)
    with torch.no_grad():
        a = s.model.eval()(
            **{k: torch.tensor(v) for k, v in tok.encode(texts, max_length=64).as_numpy().items()}
        )
        b = t.model.eval()(
            **{
                k: torch.tensor(v)
                for k, v in t.tokenizer().encode(texts, max_length=64).as_numpy().items()
            }
        )
    return float(
        F.kl_div(
            F.log_softmax(a.logits, -1),
            F.log_softmax(b.logits, -1),
            log_target=True,
            reduction="batchmean",
        )
    )


def test_resegmenter_gives_other_segmentations_of_the_same_words(trimmed) -> None:
    from albert_edge.tokenizer import AlbertTokenizer

    _, out, _ = trimmed
    plain = AlbertTokenizer(out / "spiece.model")
    text = "a masterpiece of understated cinema , unwatchable ( at times ) ."
    assert Resegmenter(out / "spiece.model", do_lower_case=True, share=0.0, seed=1).tokenize_ids(
        text
    ) == plain.tokenize_ids(text)
    every = Resegmenter(out / "spiece.model", do_lower_case=True, share=1.0, seed=1)
    ids = every.tokenize_ids(text)
    assert ids != plain.tokenize_ids(text)
    pieces = lambda xs: "".join(plain.sp.IdToPiece(i) for i in xs)  # noqa: E731
    assert pieces(ids) == pieces(plain.tokenize_ids(text))  # the same text, other pieces
    again = Resegmenter(out / "spiece.model", do_lower_case=True, share=1.0, seed=1)
    assert again.tokenize_ids(text) == ids  # seeded
    # rare mode: only words holding a rare piece, split as the trim would without it
    best = plain.tokenize_ids(text)
    whole = plain.sp.PieceToId("\u2581masterpiece")
    assert whole in best
    rare = Resegmenter(out / "spiece.model", do_lower_case=True, share=1.0, seed=1, rare={whole})
    got = rare.tokenize_ids(text)
    assert whole not in got and pieces(got) == pieces(best)
    k = best.index(whole)
    assert got[:k] == best[:k] and got[len(got) - (len(best) - k - 1) :] == best[k + 1 :]


def test_anchor_leaves_that_share_of_texts_in_their_best_segmentation(trimmed) -> None:
    """HealOptions.anchor: a seeded share of the texts the student reads keep the trimmed
    tokenizer's best segmentation (no word re-segmented); the rest re-segment as before."""
    from albert_edge.tokenizer import AlbertTokenizer

    _, out, corpus = trimmed
    plain = AlbertTokenizer(out / "spiece.model")
    texts = corpus.read_text().splitlines()
    best = [plain.tokenize_ids(t) for t in texts]

    def unchanged(anchor: float) -> list[bool]:
        tok = Resegmenter(
            out / "spiece.model", do_lower_case=True, share=1.0, seed=5, anchor=anchor
        )
        return [tok.tokenize_ids(t) == b for t, b in zip(texts, best, strict=True)]

    alone = unchanged(0.0)  # texts with no other segmentation at all
    assert sum(alone) < len(texts) // 4
    half = unchanged(0.5)
    assert all(h for a, h in zip(alone, half, strict=True) if a)
    movable = len(texts) - sum(alone)
    kept = sum(half) - sum(alone)
    assert 0.35 * movable < kept < 0.65 * movable, (kept, movable)
    assert unchanged(0.5) == half  # seeded
    assert all(unchanged(1.0))
    with pytest.raises(HealError, match="anchor share"):
        HealOptions(anchor=1.5)


def test_heal_moves_the_trimmed_model_towards_its_teacher(trimmed, tmp_path: Path) -> None:
    """A few steps at a high rate: the student's logits on re-segmented text come closer to
    the teacher's; the output is a trimmed checkpoint with the same tokenizer, its
    trim.json recording the heal; the same seed gives the same bytes."""
    src, out, corpus = trimmed
    opts = HealOptions(batch_size=16, lr=2e-3, resegment=0.5)
    healed = heal(out, src, corpus, tmp_path / "h", steps=12, options=opts)
    probe = corpus.read_text().splitlines()[:64]
    assert _kl(healed, src, probe) < _kl(out, src, probe)
    assert (healed / "spiece.model").read_bytes() == (out / "spiece.model").read_bytes()
    rec = json.loads((healed / "trim.json").read_text())
    before = json.loads((out / "trim.json").read_text())
    assert {k: v for k, v in rec.items() if k != "heal"} == before
    h = rec["heal"]
    assert h["teacher"]["weights_sha256"] == before["source"]["weights_sha256"]
    assert (h["settings"]["steps"], h["data"]["file"], h["data"]["rows"]) == (
        12,
        "corpus.txt",
        ROWS,
    )
    assert "held_out" not in h
    assert h["settings"]["anchor"] == 0.5 and "50% of rows, the rest read unchanged" in h["loss"]
    twin = heal(out, src, corpus, tmp_path / "h2", steps=12, options=opts)
    assert (twin / "model.safetensors").read_bytes() == (healed / "model.safetensors").read_bytes()


def test_word_logits_align_across_segmentations(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    """Token classification: the teacher's logits are kept per word (its first piece) and
    the student's are gathered per word, whatever each segmentation: the same model and
    tokenizer on both sides give the same numbers, and a re-segmented student still has
    exactly one position per word."""
    import numpy as np
    import torch

    import albert_edge.tasks as tasks
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.vocab.heal import _student_batch, teacher_targets

    src = make_checkpoint("tiny", head="token-classification", num_labels=3)
    ck = load_checkpoint(src)
    words = [
        ("Peter", "Blackburn", "wrote", "unwatchable", "masterpieces"),
        ("EU", "rejects", "it"),
    ]
    data = tasks.TaskData(
        kind=tasks.TaskKind.TOKEN_CLASSIFICATION,
        path=tmp_path / "x.txt",
        format="test",
        examples=[tasks.TokenExample(w, ("O",) * len(w), n) for n, w in enumerate(words)],
        label_names=("O", "B-PER", "I-PER"),
    )
    targets = teacher_targets(ck, data, 32, states=True)
    layers, hidden = int(ck.config.num_hidden_layers), int(ck.config.hidden_size)
    assert [t.shape for t in targets.logits] == [(5, 3), (3, 3)]
    assert targets.states is not None and targets.scale is not None
    assert [t.shape for t in targets.states] == [(5, layers, hidden), (3, layers, hidden)]
    assert targets.scale.shape == (layers,) and (targets.scale > 0).all()
    feats = tasks.encode(data, ck.tokenizer(), 32)
    feeds, positions, want, want_states = _student_batch(feats, targets, [0, 1])
    with torch.no_grad():
        out = ck.model.eval()(**feeds, output_hidden_states=True)
    np.testing.assert_allclose(out.logits[positions].numpy(), want.numpy(), atol=1e-5)
    got_states = torch.stack(out.hidden_states[1:], dim=2)[positions]
    np.testing.assert_allclose(got_states.numpy(), want_states.numpy(), atol=1e-4)
    assert ck.spiece_model is not None
    tok = Resegmenter(ck.spiece_model, do_lower_case=True, share=1.0, seed=3)
    feats = tasks.encode(data, tok, 32)
    _, positions, want, want_states = _student_batch(feats, targets, [0, 1])
    assert len(positions[0]) == len(want) == len(want_states) == 8


def _cls_gap(student_dir: Path, teacher_dir: Path, texts: list[str]) -> float:
    """The state term (:func:`state_term`) between the student reading every word
    re-segmented (seeded) and the teacher reading the original segmentation, at [CLS]."""
    import torch

    import albert_edge.tasks as tasks
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.vocab.heal import state_term, teacher_targets

    s, t = load_checkpoint(student_dir), load_checkpoint(teacher_dir)
    data = tasks.TaskData(
        kind=tasks.TaskKind.CLASSIFICATION,
        path=Path("probe.txt"),
        format="test",
        examples=[tasks.ClassificationExample(x, None, 0, n) for n, x in enumerate(texts)],
    )
    want = teacher_targets(t, data, 64, states=True)
    assert want.states is not None and want.scale is not None
    assert s.spiece_model is not None
    tok = Resegmenter(s.spiece_model, do_lower_case=True, share=1.0, seed=99)
    feeds = {k: torch.tensor(v) for k, v in tok.encode(texts, max_length=64).as_numpy().items()}
    with torch.no_grad():
        hs = s.model.eval()(**feeds, output_hidden_states=True).hidden_states
    got = torch.stack(hs[1:], dim=2)[:, 0]
    return float(
        state_term(got, torch.from_numpy(np.stack(want.states)), torch.from_numpy(want.scale))
    )


def test_hidden_term_closes_the_state_gap_at_cls(trimmed, tmp_path: Path) -> None:
    """The same few steps with the per-layer term: the student's [CLS] states on
    re-segmented text come closer to the teacher's than logits alone bring them, at every
    step a state loss is logged, and trim.json records the weight."""
    src, out, corpus = trimmed
    probe = corpus.read_text().splitlines()[:64]
    base = dict(batch_size=16, lr=2e-3, resegment=0.5)
    plain = heal(out, src, corpus, tmp_path / "p", steps=12, options=HealOptions(**base, hidden=0))
    states = heal(
        out, src, corpus, tmp_path / "s", steps=12, options=HealOptions(**base, hidden=4.0)
    )
    gaps = [_cls_gap(d, src, probe) for d in (out, plain, states)]
    assert gaps[2] < gaps[1] and gaps[2] < gaps[0], gaps
    h = json.loads((states / "trim.json").read_text())["heal"]
    assert h["settings"]["hidden"] == 4.0 and "aligned positions" in h["loss"]
    assert all("state_loss" in e for e in h["log"])
    h0 = json.loads((plain / "trim.json").read_text())["heal"]
    assert h0["settings"]["hidden"] == 0 and not any("state_loss" in e for e in h0["log"])


def test_refusals_come_before_any_model_loads(trimmed, tmp_path: Path) -> None:
    """Not a trimmed checkpoint, a span head, plain text for a pair model, --max-drop
    without held-out rows: one line each, from directories without weights."""
    src, out, corpus = trimmed
    with pytest.raises(HealError, match=r"no trim\.json; heal takes a checkpoint"):
        heal(src, src, corpus, tmp_path / "a", steps=1)
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("trim.json", "spiece.model"):
        shutil.copyfile(out / name, bare / name)
    cfg = json.loads((out / "config.json").read_text())

    def config(**kw: object) -> None:
        (bare / "config.json").write_text(json.dumps({**cfg, **kw}))

    config(architectures=["AlbertForQuestionAnswering"])
    with pytest.raises(UnsupportedError, match="per token position"):
        heal(bare, src, corpus, tmp_path / "a", steps=1)
    config(id2label={"0": "score"}, label2id={"score": 0})
    with pytest.raises(UnsupportedError, match="regression head"):
        heal(bare, src, corpus, tmp_path / "a", steps=1)
    config(finetuning_task="rte")
    with pytest.raises(HealError, match=r"plain text, but .* reads sentence pairs \(rte\)"):
        heal(bare, src, corpus, tmp_path / "a", steps=1)
    config()
    with pytest.raises(HealError, match=r"--max-drop 1\.0: healing is judged on --held-out"):
        heal(bare, src, corpus, tmp_path / "a", options=HealOptions(max_drop=1.0))
    with pytest.raises(HealError, match="--heal-steps 0"):
        HealOptions(steps=0)
    with pytest.raises(HealError, match="--heal-hidden -1"):
        HealOptions(hidden=-1)
    assert not (tmp_path / "a").exists()


def test_a_teacher_other_than_the_source_is_refused(
    trimmed, make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    _, out, corpus = trimmed
    other = make_checkpoint("tiny", seed=7)
    with pytest.raises(HealError, match=r"not the checkpoint .* was trimmed from"):
        heal(out, other, corpus, tmp_path / "a", steps=1)
    assert not (tmp_path / "a").exists()


def test_trim_heal_cli(trimmed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from albert_edge.cli import main

    src, _, corpus = trimmed
    out = tmp_path / "healed"
    argv = ["trim", str(src), "--corpus", str(corpus), "-o", str(out)]
    assert main([*argv, "--heal-steps", "2"]) != 0
    assert "add --heal" in capsys.readouterr().err
    assert main([*argv, "--heal-hidden", "2"]) != 0
    assert "add --heal" in capsys.readouterr().err
    assert main([*argv, "--heal", "--heal-steps", "2", "--heal-hidden", "0.5"]) == 0
    printed = capsys.readouterr().out
    assert f"{out}: healed (2 steps on corpus.txt)" in printed
    settings = json.loads((out / "trim.json").read_text())["heal"]["settings"]
    assert (settings["steps"], settings["hidden"]) == (2, 0.5)


@pytest.mark.slow
def test_healing_recovers_some_of_a_costly_trim(
    trained_checkpoint: Path, sst2_train: Path, sst2_dev: Path, tmp_path: Path
) -> None:
    """The embedded model trimmed for the first 2,000 SST-2 train rows (4,644 pieces) loses
    about 4.5 points on dev, whose sentences it never saw; 400 healing steps on those rows
    (the defaults otherwise) win part of it back, paired with the untrimmed model on dev.
    The figures are recorded before and after in trim.json."""
    from albert_edge.vocab.trim import TrimOptions

    corpus = tmp_path / "c.tsv"
    corpus.write_text("".join(sst2_train.read_text().splitlines(keepends=True)[:2001]))
    trim_checkpoint(trained_checkpoint, corpus, tmp_path / "t", TrimOptions(held_out=sst2_dev))
    healed = heal(
        tmp_path / "t",
        trained_checkpoint,
        corpus,
        tmp_path / "h",
        steps=400,
        options=HealOptions(held_out=sst2_dev),
    )
    h = json.loads((healed / "trim.json").read_text())["heal"]["held_out"]
    assert h["before"]["delta"] < -0.03  # the trim's cost, paired on 872 dev sentences
    assert h["after"]["delta"] > h["before"]["delta"], h
