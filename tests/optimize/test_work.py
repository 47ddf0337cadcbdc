"""The sealed work directory and the refusals before any model loads."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from albert_edge.cli import main
from albert_edge.optimize.splits import split_sizes
from albert_edge.optimize.work import WORK_MARK, OptimizeError, Work
from albert_edge.tasks.write import write_lines_subset


def test_a_stage_runs_once_per_inputs_and_is_redone_when_changed(tmp_path: Path) -> None:
    work = Work(tmp_path / "w")
    work.open()
    calls: list[str] = []

    def fn(d: Path) -> dict[str, object]:
        calls.append(d.name)
        (d / "out.txt").write_text("x")
        return {"value": 1}

    a = work.run("stages", "s", {"data": "abc"}, fn)
    assert a["cached"] is False and a["value"] == 1 and calls == [".s.tmp"]
    b = work.run("stages", "s", {"data": "abc"}, fn)
    assert b["cached"] is True and len(calls) == 1
    # other inputs: the record is not theirs, done again
    work.run("stages", "s", {"data": "abd"}, fn)
    assert len(calls) == 2
    # a file changed after the seal: not trusted, done again
    (work.dir("stages", "s") / "out.txt").write_text("y")
    work.run("stages", "s", {"data": "abd"}, fn)
    assert len(calls) == 3
    assert (work.dir("stages", "s") / "out.txt").read_text() == "x"


def test_what_an_interrupted_stage_left_is_removed_and_redone(tmp_path: Path) -> None:
    work = Work(tmp_path / "w")
    work.open()

    def boom(d: Path) -> dict[str, object]:
        (d / "half.txt").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        work.run("stages", "s", {}, boom)
    assert not work.dir("stages", "s").exists()
    rec = work.run("stages", "s", {}, lambda d: {"ok": True})
    assert rec["ok"] is True
    assert not (work.dir("stages", "s") / "half.txt").exists()


def test_a_foreign_work_dir_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    (d / "notes.txt").write_text("keep me")
    with pytest.raises(OptimizeError, match="did not write"):
        Work(d).open()
    assert (d / "notes.txt").read_text() == "keep me"
    Work(tmp_path / "new").open()
    assert (tmp_path / "new" / WORK_MARK).is_file()


def test_split_files_keep_the_header_and_the_lines(tmp_path: Path, sst2_train: Path) -> None:
    from albert_edge.tasks import read_task_file

    src = tmp_path / "d.tsv"
    src.write_text("".join(sst2_train.read_text().splitlines(keepends=True)[:41]))
    rows = read_task_file(src)
    write_lines_subset(src, rows, [3, 0, 7], tmp_path / "s.tsv")
    back = read_task_file(tmp_path / "s.tsv")
    assert [e.text for e in back.examples] == [rows.examples[i].text for i in (3, 0, 7)]
    assert [e.label for e in back.examples] == [rows.examples[i].label for i in (3, 0, 7)]
    assert split_sizes(4000) == (2000, 1000, 1000)
    assert split_sizes(100000) == (96000, 2000, 2000)


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    t0 = time.monotonic()
    code = main(["optimize", *argv])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert len(err.splitlines()) == 1, err
    assert time.monotonic() - t0 < 60  # no model was loaded, no Ray started
    return err


def test_bad_input_is_one_line_before_any_model_loads(
    tmp_path: Path, sst2_train: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    few = tmp_path / "few.tsv"
    few.write_text("".join(sst2_train.read_text().splitlines(keepends=True)[:50]))
    err = _refused(["--data", str(few), "--max-drop", "0.5", "-o", str(out)], capsys)
    assert "few.tsv" in err and "rows" in err
    err = _refused(
        ["--data", str(tmp_path / "none.tsv"), "--max-drop", "0.5", "-o", str(out)], capsys
    )
    assert "none.tsv" in err
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "x").write_text("x")
    err = _refused(
        [
            "--data",
            str(sst2_train),
            "--max-drop",
            "0.5",
            "-o",
            str(out),
            "--work-dir",
            str(foreign),
        ],
        capsys,
    )
    assert "did not write" in err and (foreign / "x").read_text() == "x"
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "mine.txt").write_text("mine")
    err = _refused(["--data", str(sst2_train), "--max-drop", "0.5", "-o", str(existing)], capsys)
    assert "output exists" in err
    with pytest.raises(SystemExit):
        main(["optimize", "--data", str(sst2_train), "--max-drop", "nan", "-o", str(out)])
    assert not out.exists() and not (tmp_path / ".out.optimize-work").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing", "few.tsv", "foreign"]


def test_the_heal_stage_is_keyed_by_every_heal_setting() -> None:
    """A build whose heal differs (a new default) heals again rather than reusing a sealed
    heal of other settings: every HealOptions field but the step count (keyed apart) and
    overwrite is in the stage's inputs."""
    from dataclasses import fields

    from albert_edge.optimize.stages import heal_settings
    from albert_edge.vocab.heal import HealOptions

    got = heal_settings()
    want = {f.name for f in fields(HealOptions)} - {"steps", "overwrite"}
    assert set(got) == want
    assert got["anchor"] == HealOptions().anchor and got["resegment"] == HealOptions().resegment


def test_a_sealed_stage_with_more_rows_is_reused_by_a_smaller_budget(tmp_path: Path) -> None:
    """The fine-tune's rows (the heal's steps) are sized by --max-minutes: a rerun with a
    smaller budget reuses the larger sealed work; a larger budget or other inputs redo it."""
    work = Work(tmp_path / "w")
    work.open()
    calls: list[int] = []

    def fn(d: Path) -> dict[str, object]:
        calls.append(1)
        (d / "model.bin").write_bytes(b"w")
        return {"checkpoint": "model"}

    made = work.run("stages", "finetune", {"checkpoint": "c", "rows": 15000}, fn)
    got = work.reusable("stages", "finetune", {"checkpoint": "c", "rows": 4000}, ("rows",))
    assert got is not None and got["inputs"]["rows"] == 15000
    assert got["inputs_sha256"] == made["inputs_sha256"]
    assert work.reusable("stages", "finetune", {"checkpoint": "c", "rows": 4000}) is None
    assert (
        work.reusable("stages", "finetune", {"checkpoint": "c", "rows": 20000}, ("rows",)) is None
    )
    assert work.reusable("stages", "finetune", {"checkpoint": "d", "rows": 4000}, ("rows",)) is None
    # keyed by the adopted inputs, the stage is read back, never run again
    again = work.run("stages", "finetune", got["inputs"], fn)
    assert again["cached"] is True and calls == [1]
    (work.dir("stages", "finetune") / "model.bin").write_bytes(b"changed")
    assert work.reusable("stages", "finetune", {"checkpoint": "c", "rows": 4000}, ("rows",)) is None
