"""``bench --recommend --trim-corpus``: vocabulary-trimmed checkpoints as candidates, built
by the real trim and convert, scored on the choose split with their own tokenizer, judged
by the depth package's rule like every other candidate."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from albert_edge.bench.recommend_vocab import check_flags, parse_keeps
from albert_edge.data import DataError, read_sst2
from albert_edge.errors import BenchmarkError


def _corpus(sst2_train: Path, tmp_path: Path, lines: int = 400) -> Path:
    out = tmp_path / "corpus.txt"
    out.write_text("".join(s + "\n" for _, s in read_sst2(sst2_train)[:lines]), encoding="utf-8")
    return out


def _dev(sst2_dev: Path, tmp_path: Path, rows: int = 60) -> Path:
    out = tmp_path / "dev.tsv"  # 30 + 30: the bootstrap's minimum in each half
    out.write_text("".join(sst2_dev.read_text().splitlines(keepends=True)[: rows + 1]))
    return out


def test_parse_keeps() -> None:
    assert parse_keeps("8000, 12000,8000") == (8000, 12000)
    for bad, says in (("8k", "not a whole number"), ("0", "at least 1"), (",", "empty")):
        with pytest.raises(BenchmarkError, match=says):
            parse_keeps(bad)


def test_flags_are_refused_before_any_model_loads(
    make_checkpoint: Callable[..., Path], sst2_train: Path, sst2_dev: Path, tmp_path: Path
) -> None:
    from albert_edge.vocab.spm_surgery import mandatory_ids, read_model

    ckpt = make_checkpoint("tiny")
    corpus, dev = _corpus(sst2_train, tmp_path, 50), _dev(sst2_dev, tmp_path)
    with pytest.raises(BenchmarkError, match="--trim-keep needs --trim-corpus"):
        check_flags(None, (5000,), dev, ckpt)
    with pytest.raises(BenchmarkError, match="--trim-corpus needs --data"):
        check_flags(corpus, (), None, ckpt)
    with pytest.raises(BenchmarkError, match="--trim-corpus is also --data"):
        check_flags(dev, (), dev, ckpt)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(DataError, match=r"empty\.txt"):
        check_flags(empty, (), dev, ckpt)
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("caf\xe9 cr\xe8me\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1\.txt.*not UTF-8"):
        check_flags(latin, (), dev, ckpt)
    with pytest.raises(DataError, match=r"nope\.txt"):
        check_flags(tmp_path / "nope.txt", (), dev, ckpt)
    least = len(mandatory_ids(read_model(ckpt / "spiece.model")))  # what the trim keeps
    with pytest.raises(BenchmarkError, match=f"--trim-keep {least - 1} is below the {least}"):
        check_flags(corpus, (least + 100, least - 1), dev, ckpt)
    check_flags(corpus, (least,), dev, ckpt)
    check_flags(None, (), None, ckpt)


def test_recommend_builds_scores_and_judges_trimmed_candidates(
    make_checkpoint: Callable[..., Path], sst2_train: Path, sst2_dev: Path, tmp_path: Path
) -> None:
    """The whole path on the tiny random model: two vocabulary sizes trimmed by the real
    trim into the work directory, converted, verified, scored on the choose split with
    their own tokenizer, timed with the rest, judged by the rule; the trim record on the
    rows and in the printout."""
    from albert_edge.bench.recommend import format_recommendation, recommend
    from albert_edge.depth import Rule
    from albert_edge.sealed import SEAL_NAME

    ckpt, corpus, dev = (
        make_checkpoint("tiny"),
        _corpus(sst2_train, tmp_path),
        _dev(sst2_dev, tmp_path),
    )
    work = tmp_path / "work"
    result = recommend(
        ckpt, seq_lens=(8,), threads=1, data=dev, candidates=(("onnx", "fp32"),),
        rounds=2, runs_per_visit=2, warmup=1, work_dir=work, progress=False,
        trim_corpus=corpus, trim_keep=(1200,), prune=False,
    )  # fmt: skip
    rows = result["candidates"]
    trimmed = [r for r in rows if r["kind"] == "vocab"]
    assert [r["kind"] for r in rows] == ["precision", "vocab", "vocab"]
    sha = hashlib.sha256(corpus.read_bytes()).hexdigest()
    sizes = [r["vocab"]["pieces_kept"] for r in trimmed]
    assert sizes[1] == 1200 and 1200 < sizes[0] < 30000  # every piece used; then --trim-keep
    assert result["vocabulary"]["sizes"] == sizes
    for r in trimmed:
        v = r["vocab"]
        assert r["name"] == f"onnx fp32 vocab{v['pieces_kept']}"
        assert v["corpus"]["sha256"] == sha and v["of_pieces"] == 30000
        assert v["held_out"]["unk_after"] <= v["held_out"]["unk_before"]
        assert r["verified"] is True and r["examples"] == 30  # the choose half
        assert Path(r["artifact"]).is_relative_to(work)  # rebased to the sealed work dir
        manifest = json.loads((Path(r["artifact"]) / "manifest.json").read_text())
        assert manifest["vocabulary"]["pieces_kept"] == v["pieces_kept"]
        spiece = Path(v["checkpoint"]) / "spiece.model"
        assert (
            hashlib.sha256(spiece.read_bytes()).hexdigest()
            == manifest["vocabulary"]["spiece_sha256"]
        )
        assert [len(x) for x in r["rounds_ms"]["8"]] == [2, 2]
    full = rows[0]
    assert all(r["file_bytes"] < full["file_bytes"] for r in trimmed)  # fewer table rows
    for r in rows:  # one rule: each verdict is Rule.why_not on the row's own interval
        d = r["delta_vs_checkpoint"]
        rule = Rule().why_not({"delta": d["points"] / 100, "delta_low": d["low"] / 100})
        assert r["eligible"] == (rule is None and not r["why_not"]), r
    assert (work / SEAL_NAME).is_file()
    text = format_recommendation(result)
    assert "vocabulary x precision: trimmed for corpus.txt" in text
    assert f"{sizes[1]} of 30000 pieces (--keep 1200)" in text
