"""``albert-edge prune`` from the command line: every flag reaches the run, and bad input
is one line, non-zero, before any model loads (the checkpoint here has no weights at all),
with nothing written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.prune.conftest import squad

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "USE_TF": "0", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", "prune", *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_every_flag_reaches_the_record(
    make_checkpoint: Callable[..., Path], sst2_rows: Path, tmp_path: Path
) -> None:
    out = tmp_path / "p"
    args = [
        make_checkpoint("tiny"),
        "--data", sst2_rows, "-o", out,
        "--heads-keep", "1", "--ffn-keep", "0.25",
        "--importance", "own", "--importance-rows", "50",
        "--choose-rows", "40", "--report-rows", "33",
        "--heal-steps", "2", "--heal-lr", "0.001", "--heal-alpha", "0", "--heal-batch-size", "8",
        "--max-len", "40", "--seed", "3", "--threads", "1", "--runtime-threads", "2",
        "--json", "-q",
    ]  # fmt: skip
    done = _run(*args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # -q
    rec = json.loads(done.stdout)
    assert rec == json.loads((out / "prune.json").read_text())
    assert (rec["kept"]["heads_per_layer"], rec["kept"]["ffn_per_layer"]) == (1, 16)
    d = rec["data"]
    assert (d["choose_rows"], d["report_rows"], d["fit_rows"]) == (40, 33, 87)
    assert "default_rng(3)" in d["split"] and rec["importance"]["rows"] == 50
    assert "own argmax" in rec["importance"]["loss"]
    h = rec["heal"]
    assert (h["steps"], h["lr"], h["alpha"], h["batch_size"]) == (2, 0.001, 0.0, 8)
    assert "heads paid in rounds of 2" in rec["selection"]["cost"]


def test_overwrite_replaces_its_own_output(
    make_checkpoint: Callable[..., Path],
    sst2_rows: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from albert_edge.cli import main

    out = tmp_path / "p"
    args = [make_checkpoint("tiny"), "--data", sst2_rows, "-o", out, "--heads-keep", "1"]
    args += ["--importance-rows", "32", "--heal-steps", "0", "--max-len", "32", "-q"]
    assert main(["prune", *map(str, args)]) == 0
    capsys.readouterr()
    assert main(["prune", *map(str, args)]) != 0  # exists: refused without --overwrite
    assert "exists" in capsys.readouterr().err
    assert main(["prune", *map(str, args), "--overwrite", "--ffn-keep", "16"]) == 0
    printed = capsys.readouterr().out
    assert "unhealed" in json.loads((out / "prune.json").read_text())["heal"]["kept"]
    assert printed.startswith(f"{out}: heads 1/2 and FFN 16/64 per shared layer")
    assert "report rows, before heal: accuracy on 32 rows" in printed


def test_heads_per_shared_layer(
    make_checkpoint: Callable[..., Path],
    sst2_rows: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--heads-keep 1+2+2+1`` on 2 groups x 2 inner layers: each flat layer keeps its
    own count, transformers' pruned_heads names each layer's removed head, the record
    lists the counts; a count list of the wrong length is refused before any load."""
    from albert_edge.cli import main
    from albert_edge.torch_model import kept_heads

    src, out = make_checkpoint("tiny-groups"), tmp_path / "p"
    args = [src, "--data", sst2_rows, "-o", out, "--heads-keep", "1+2+2+1", "--ffn-keep", "16"]
    args += ["--importance-rows", "32", "--heal-steps", "0", "--max-len", "32", "-q"]
    assert main(["prune", *map(str, args)]) == 0
    assert capsys.readouterr().out.startswith(f"{out}: heads 1+2+2+1/2 and FFN 16/64")
    rec = json.loads((out / "prune.json").read_text())
    assert rec["kept"]["heads_per_layer"] == [1, 2, 2, 1]
    assert sorted(rec["kept"]["pruned_heads"]) == ["0", "3"]
    cfg = json.loads((out / "config.json").read_text())
    assert kept_heads(cfg) == (1, 2, 2, 1)
    wrong = [src, "--data", sst2_rows, "-o", tmp_path / "q", "--heads-keep", "1+2"]
    assert main(["prune", *map(str, wrong)]) != 0
    assert "has 4 shared layers" in capsys.readouterr().err
    assert not (tmp_path / "q").exists()


@pytest.mark.slow
def test_max_drop_searches_levels(
    make_checkpoint: Callable[..., Path], sst2_rows: Path, tmp_path: Path
) -> None:
    """A budget every level meets (random model, wide bounds): the cheapest level wins."""
    done = _run(
        make_checkpoint("tiny"),
        "--data", sst2_rows, "-o", tmp_path / "p",
        "--max-drop", "99", "--min-lower-bound", "-100",
        "--importance-rows", "32", "--heal-steps", "1", "--max-len", "32",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rec = json.loads((tmp_path / "p" / "prune.json").read_text())
    sel = rec["selection"]
    assert sel["how"] == "max-drop search"
    assert sel["rule"] == {"max_point_loss": 99.0, "min_lower_bound": -100.0}
    assert (rec["kept"]["heads_per_layer"], rec["kept"]["ffn_per_layer"]) == (1, 4)
    assert [(r["heads_keep"], r["ffn_keep"]) for r in sel["evidence"] if r["chosen"]] == [(1, 4)]
    assert "level heads 1/2 FFN 4/64" in done.stderr


@pytest.fixture
def bare(make_checkpoint: Callable[..., Path], tmp_path: Path) -> Path:
    """A checkpoint directory without weights: any run that loads a model fails on it."""
    bare = tmp_path / "bare"
    bare.mkdir()
    src = make_checkpoint("tiny")
    for name in ("config.json", "spiece.model"):
        shutil.copyfile(src / name, bare / name)
    return bare


def _refused(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    from albert_edge.cli import main

    rc = main(["prune", *map(str, argv)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1, err
    assert err[0].startswith("albert-edge prune: error: ")
    return err[0]


def test_bad_input_is_one_line_before_any_model_loads(
    bare: Path, sst2_rows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p"
    base = (bare, "--data", sst2_rows, "-o", out)
    assert "--heads-keep N, --ffn-keep F or --max-drop P" in _refused(capsys, *base)
    assert "has 2 heads per layer" in _refused(capsys, *base, "--heads-keep", "3")
    assert "has 64 neurons" in _refused(capsys, *base, "--ffn-keep", "65")
    q = squad(tmp_path / "q.json", 40)
    line = _refused(capsys, bare, "--data", q, "-o", out, "--heads-keep", "1")
    assert "q.json" in line and "question-answering" in line
    few = tmp_path / "few.tsv"
    few.write_text("\n".join(sst2_rows.read_text().splitlines()[:80]) + "\n")
    assert "79 rows cannot give" in _refused(
        capsys, bare, "--data", few, "-o", out, "--heads-keep", "1"
    )
    assert "none.tsv: data file not found" in _refused(
        capsys, bare, "--data", tmp_path / "none.tsv", "-o", out, "--heads-keep", "1"
    )
    pruned = tmp_path / "pruned"
    shutil.copytree(bare, pruned)
    cfg = json.loads((pruned / "config.json").read_text())
    (pruned / "config.json").write_text(json.dumps({**cfg, "pruned_heads": {"0": [1]}}))
    assert "already has pruned_heads" in _refused(
        capsys, pruned, "--data", sst2_rows, "-o", out, "--heads-keep", "1"
    )
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("a user's file")
    line = _refused(
        capsys, bare, "--data", sst2_rows, "-o", mine, "--heads-keep", "1", "--overwrite"
    )
    assert "mine" in line
    assert (mine / "notes.txt").read_text() == "a user's file"
    assert not out.exists()


def test_flag_values_refused_at_parsing(
    bare: Path, sst2_rows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = (bare, "--data", sst2_rows, "-o", tmp_path / "p")
    for flag, value in (
        ("--ffn-keep", "1.5"),
        ("--ffn-keep", "0"),
        ("--heads-keep", "0"),
        ("--max-drop", "-1"),
        ("--choose-rows", "10"),
        ("--heal-alpha", "2"),
        ("--runtime-threads", "0"),
        ("--heads-keep", "2+x"),
        ("--heads-keep", "0+2"),
    ):
        with pytest.raises(SystemExit) as exc:
            from albert_edge.cli import main

            main(["prune", *map(str, base), flag, value])
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code != 0 and len(err) == 1 and flag in err[0], (flag, err)
