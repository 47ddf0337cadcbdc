"""The depth search reads its rows through the task layer: sentence pairs feed both
sentences; a head it does not serve and a CoNLL file for a classifier get one line, before
any model loads (token and span heads: test_task_heads.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


@pytest.mark.parametrize("head", ["multiple-choice", "masked-lm"])
def test_a_head_the_search_does_not_serve_is_refused_in_one_line(
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


def _pair_search(make_checkpoint: Callable[..., Path], tmp_path: Path) -> tuple[Path, Path, Any]:
    from albert_edge.depth import FitSettings, SplitSettings, search_depths

    ckpt = make_checkpoint("tiny")
    data = _pairs(tmp_path / "pairs.tsv", 128)
    split = SplitSettings(fit_rows=96, held_out_rows=32)
    return ckpt, data, search_depths(ckpt, data, split=split, fit=FitSettings(epochs=0))


def test_held_out_rows_of_a_pair_search_keep_both_sentences(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    from albert_edge.depth.evaluate import held_out_rows
    from albert_edge.depth.search import SplitSettings, split_rows

    ckpt, data, search = _pair_search(make_checkpoint, tmp_path)
    held = held_out_rows(search, data, ckpt)
    _, idx = split_rows(128, SplitSettings(**search.settings["split"]))
    assert [r[2] for r in held] == [f"a cat sat {i % 7} times" for i in idx]
    assert [r[0] for r in held] == [i % 2 for i in idx]


@pytest.mark.slow  # converts the embedded model to ONNX
def test_artifact_correct_feeds_pairs_like_the_model(
    trained_checkpoint: Path, tmp_path: Path
) -> None:
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.depth import FitSettings, SplitSettings, search_depths
    from albert_edge.depth.evaluate import artifact_correct, held_out_rows
    from albert_edge.options import ConvertOptions

    # the embedded model records that it reads single sentences (finetuning_task: sst2),
    # and a pair file is refused for it; a copy without the record (a checkpoint from
    # before albert-edge wrote one) is read as the file's columns say: the feeding is
    # what this test holds, not what an SST-2 model makes of pairs
    trained = tmp_path / "unrecorded"
    shutil.copytree(trained_checkpoint, trained)
    cfg = json.loads((trained / "config.json").read_text())
    del cfg["finetuning_task"]
    (trained / "config.json").write_text(json.dumps(cfg))
    data = _pairs(tmp_path / "pairs.tsv", 128)
    split = SplitSettings(fit_rows=96, held_out_rows=32)
    search = search_depths(trained, data, split=split, fit=FitSettings(epochs=0))
    held = held_out_rows(search, data, trained)
    convert(trained, tmp_path / "art", ConvertOptions(precision="fp32"))
    got = artifact_correct(tmp_path / "art", held, threads=1)
    model = load_checkpoint(trained)
    tok = model.tokenizer()

    def logits(text: str, second: str | None) -> Any:
        feeds = {k: torch.as_tensor(v) for k, v in tok.encode(text, second).as_numpy().items()}
        with torch.no_grad():
            return model.model(**feeds).logits[0]

    differs = 0
    for (label, text, second), ok in zip(held, got, strict=True):
        both, first = logits(text, second), logits(text, None)
        differs += int(both.argmax()) != int(first.argmax())
        top2 = torch.topk(both, 2).values
        if float(top2[0] - top2[1]) > 1e-4:  # not a near-tie fp32 rounding could flip
            assert bool(ok) == (int(both.argmax()) == label)
    assert differs > 0  # the rows tell a pair from its first sentence
