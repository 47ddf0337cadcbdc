"""``bench --recommend`` without ``--depth-search``: it runs the depth search itself.

The search is fitted on the training rows (``--exit-data``, never the rows that choose
and report), written sealed into the work directory as ``albert-edge depth search`` writes
it, and its admitted depths are ranked as with a search directory given.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from albert_edge.errors import BenchmarkError


def _head(src: Path, rows: int, out: Path) -> Path:
    out.write_text("".join(src.read_text().splitlines(keepends=True)[: rows + 1]))
    return out


def test_recommend_runs_the_depth_search_itself_into_its_work_dir(
    make_checkpoint: Callable[..., Path], sst2_train: Path, sst2_dev: Path, tmp_path: Path
) -> None:
    from albert_edge.bench.recommend import recommend
    from albert_edge.depth import load_search
    from albert_edge.depth.store import is_depth_search

    ckpt = make_checkpoint("tiny")
    train = _head(sst2_train, 160, tmp_path / "train.tsv")
    dev = _head(sst2_dev, 60, tmp_path / "dev.tsv")
    work = tmp_path / "work"
    result = recommend(
        ckpt, seq_lens=(8,), threads=1, data=dev, candidates=(("onnx", "fp32"),),
        rounds=2, runs_per_visit=2, warmup=1, work_dir=work, progress=False,
        exit_data=train, exit_fit_rows=64, prune=False,
    )  # fmt: skip
    info = result["depth_exit"]["depth_search"]
    own = work / "depth-search"
    assert info["search"] == str(own) and is_depth_search(own)  # sealed, as the command writes
    search = load_search(own)
    assert search.data["fit_rows"] == 64 and search.data["held_out_rows"] == 40
    assert "held-out" in (own / "depth_search.md").read_text()  # the command's evidence text
    rows = result["candidates"]
    depth_rows = [r for r in rows if r["kind"] == "depth"]
    assert {r["depth"] for r in depth_rows} == {1, 2}  # L=3: every shallower depth ranked
    for r in depth_rows:  # each with the search's own held-out verdict
        held = r["search_held_out"]
        score = search.score(r["depth"])
        assert held["delta"] == score.delta and held["low"] == score.delta_low
        if held["why_not"] is not None:
            assert r["error"].startswith("not built: the depth search's held-out rows")
    assert any(r["kind"] == "early-exit" for r in rows)


def test_too_few_training_rows_for_the_own_search_are_refused_before_loading(
    make_checkpoint: Callable[..., Path], sst2_train: Path, sst2_dev: Path, tmp_path: Path
) -> None:
    from albert_edge.bench.recommend_depth import check_flags

    train = _head(sst2_train, 100, tmp_path / "train.tsv")  # 25 held out < 30
    dev = _head(sst2_dev, 60, tmp_path / "dev.tsv")
    with pytest.raises(BenchmarkError, match="depth search --recommend runs") as exc:
        check_flags(None, train, dev, exit_fit_rows=64)
    assert str(train) in str(exc.value) and "\n" not in str(exc.value)
    check_flags(tmp_path, train, dev, exit_fit_rows=64)  # with --depth-search: not its rows
