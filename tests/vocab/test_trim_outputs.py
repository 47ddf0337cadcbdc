"""trim's output refusals name the real cause (issue 43), and its corpus reader takes a
line of any length."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from albert_edge.checkpoint import TRIM_FILE
from albert_edge.errors import OutputExistsError
from albert_edge.vocab.corpus import read_corpus, read_sentences
from albert_edge.vocab.trim import TRIMMED, TrimOptions, trim_checkpoint

LONG = 200 * 1024  # over csv's default field_size_limit (128 KiB)


def _long_sentence() -> str:
    words = ("a", "warm", "funny", "film", "the", "plot", "is", "thin")
    text = " ".join(words[i % len(words)] for i in range(LONG // 4))
    assert len(text) > LONG * 0.9
    return text


def test_a_200_kib_line_is_read_in_every_corpus_format(tmp_path: Path) -> None:
    """Was: ``_csv.Error: field larger than field limit (131072)`` for a TSV corpus."""
    long = _long_sentence()
    plain = tmp_path / "plain.txt"
    plain.write_text(f"short one\n{long}\n", encoding="utf-8")
    assert read_sentences(plain) == ["short one", long]
    text_col = tmp_path / "text.tsv"
    text_col.write_text(f"id\ttext\n1\t{long}\n2\tshort one\n", encoding="utf-8")
    assert read_sentences(text_col) == [long, "short one"]
    pair = tmp_path / "pair.tsv"
    pair.write_text(f"label\tsentence1\tsentence2\n1\t{long}\tshort one\n", encoding="utf-8")
    assert read_sentences(pair) == [long, "short one"]
    held = read_corpus(plain, held_out=text_col)
    assert held.fit == ["short one", long]
    assert held.held_out[0] == long


@pytest.fixture(scope="module")
def small_trim(tmp_path_factory: pytest.TempPathFactory, make_checkpoint: Callable[..., Path]):
    """(source, corpus, a trimmed checkpoint of it): built once, copied by each test."""
    root = tmp_path_factory.mktemp("trim-outputs")
    corpus = root / "corpus.txt"
    corpus.write_text("a warm , funny film\nthe plot is thin\nsmart and tender\n")
    src = make_checkpoint("tiny")
    out = root / "trimmed"
    trim_checkpoint(src, corpus, out)
    return src, corpus, out


def test_overwrite_names_the_extra_file_not_a_missing_trim_json(small_trim, tmp_path) -> None:
    """Was: "holds files albert-edge did not write (no trim.json)" with trim.json there."""
    src, corpus, trimmed = small_trim
    out = tmp_path / "out"
    shutil.copytree(trimmed, out)
    (out / "notes.txt").write_text("mine\n")
    with pytest.raises(OutputExistsError) as info:
        trim_checkpoint(src, corpus, out, TrimOptions(overwrite=True))
    msg = str(info.value)
    assert "notes.txt: not a file trim writes" in msg and "no trim.json" not in msg, msg
    assert (out / "notes.txt").read_text() == "mine\n"  # nothing touched
    (out / "notes.txt").unlink()
    (out / TRIM_FILE).unlink()
    with pytest.raises(OutputExistsError, match=f"no {TRIM_FILE}"):
        trim_checkpoint(src, corpus, out, TrimOptions(overwrite=True))


def test_overwrite_replaces_a_previous_trim(small_trim, tmp_path) -> None:
    src, corpus, trimmed = small_trim
    out = tmp_path / "out"
    shutil.copytree(trimmed, out)
    assert TRIMMED.is_own(out) and TRIMMED.why is not None and TRIMMED.why(out) is None
    trim_checkpoint(src, corpus, out, TrimOptions(overwrite=True))
    assert TRIMMED.is_own(out)


def test_output_inside_the_source_checkpoint_is_refused(small_trim, tmp_path) -> None:
    src, corpus, _ = small_trim
    ckpt = tmp_path / "ckpt"
    shutil.copytree(src, ckpt)
    before = sorted(p.name for p in ckpt.iterdir())
    with pytest.raises(OutputExistsError, match="is inside the input"):
        trim_checkpoint(ckpt, corpus, ckpt / "trimmed")
    assert sorted(p.name for p in ckpt.iterdir()) == before
