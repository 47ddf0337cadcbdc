"""The depth search reads its rows through the task layer: sentence pairs feed both
sentences; token / span heads and CoNLL / SQuAD files get one line, before any model loads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from albert_edge.cli import main


def _pairs(path: Path, n: int) -> Path:
    rows = ["index\tsentence1\tsentence2\tlabel"]
    for i in range(n):
        rows.append(f"{i}\tthe cat number {i} sat on the mat\ta cat sat {i % 7} times\t{i % 2}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_pair_file_searches_on_both_sentences(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.depth import FitSettings, SplitSettings, search_depths
    from albert_edge.depth.features import cls_states
    from albert_edge.depth.search import labelled_rows

    ckpt = make_checkpoint("tiny")
    data = _pairs(tmp_path / "pairs.tsv", 128)
    rows, pairs = labelled_rows(data, ckpt)
    assert len(rows) == len(pairs) == 128 and pairs[0] == "a cat sat 0 times"
    model = load_checkpoint(ckpt)
    both = cls_states(model, [t for _, t in rows[:8]], pairs=pairs[:8])
    first = cls_states(model, [t for _, t in rows[:8]])
    assert not bool((both - first).abs().max() < 1e-6)  # the second sentence is read
    split = SplitSettings(fit_rows=96, held_out_rows=32)
    search = search_depths(model, data, split=split, fit=FitSettings(epochs=1))
    assert search.data["held_out_rows"] == 32 and {s.depth for s in search.scores} == {1, 2, 3}


def _one_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()  # what building the fixture model printed is not the command's
    code = main(args)
    err = [x for x in capsys.readouterr().err.strip().splitlines() if x]
    assert code != 0 and len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("head", ["token-classification", "question-answering"])
def test_a_token_or_span_head_is_refused_in_one_line(
    head: str,
    make_checkpoint: Callable[..., Path],
    small_tsv: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "search"
    ckpt = make_checkpoint("tiny", head=head)
    line = _one_line(
        ["depth", "search", str(ckpt), "--data", str(small_tsv), "-o", str(out), "-q"], capsys
    )
    assert "depth search serves sequence-classification" in line and head in line
    assert not out.exists()


def test_a_conll_file_is_refused_in_one_line(
    make_checkpoint: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conll = tmp_path / "train.conll"
    conll.write_text("EU B-ORG\nrejects O\nGerman B-MISC\ncall O\n\nPeter B-PER\nBlackburn I-PER\n")
    out = tmp_path / "search"
    line = _one_line(
        ["depth", "search", str(make_checkpoint("tiny")), "--data", str(conll), "-o", str(out)],
        capsys,
    )
    assert str(conll) in line and not out.exists()
