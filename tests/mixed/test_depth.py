"""A precision plan at a depth: ``convert --depth K --depth-search DIR --precision auto``
searches the plan on the truncated model, the manifest records the depth and the plan,
the plan is the truncated model's (its identity the truncated weights'), and
``--depth K --precision-plan`` replays it byte for byte. On a tiny random model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from albert_edge.cli import main


@pytest.fixture(scope="module")
def searched(make_checkpoint: Any, sst2_train: Path, tmp_path_factory: Any) -> tuple[Path, Path]:
    """A tiny random checkpoint (3 layers) and its sealed depth search."""
    from albert_edge.depth import FitSettings, SplitSettings, save_search, search_depths

    ckpt = make_checkpoint("tiny")
    rows = tmp_path_factory.mktemp("depth-plan") / "rows.tsv"
    rows.write_text("\n".join(sst2_train.read_text().splitlines()[:81]) + "\n")
    split = SplitSettings(fit_rows=48, held_out_rows=32, max_length=32, resamples=200)
    search = search_depths(ckpt, rows, split=split, fit=FitSettings(epochs=1))
    out = rows.parent / "search"
    save_search(search, out)
    return ckpt, out


def _convert(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["convert", "-q", "--no-verify", *argv])
    return code, capsys.readouterr().err.strip()


# every plan passes: the point here is the plumbing, not a random model's accuracy
BUDGET = ("--max-drop", "5", "--min-lower-bound", "-100", "--search-rows", "60")


def test_auto_plan_at_a_depth_records_both_and_replays(
    searched: tuple[Path, Path],
    rows_tsv: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.layout import source_record

    ckpt, search = searched
    at = ("--depth", "2", "--depth-search", str(search))
    out = tmp_path / "auto"
    code, err = _convert(
        capsys,
        str(ckpt),
        *at,
        "--precision",
        "auto",
        *BUDGET,
        "--data",
        str(rows_tsv),
        "-o",
        str(out),
    )
    assert code == 0, err
    m = json.loads((out / "manifest.json").read_text())
    assert (m["depth"]["layers"], m["depth"]["of_layers"]) == (2, 3)
    plan = json.loads((out / "plan.json").read_text())
    assert m["precision_plan"] == plan
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 2
    # the plan is the truncated model's: not the full checkpoint's weights
    full = source_record(load_checkpoint(ckpt))["weights_sha256"]
    made_for = plan["checkpoint"]["weights_sha256"]
    assert made_for != full and plan["checkpoint"]["name"].endswith("-depth2")
    assert plan["search"]["rows"] == 60

    again = tmp_path / "again"
    code, err = _convert(
        capsys, str(ckpt), *at, "--precision-plan", str(out / "plan.json"), "-o", str(again)
    )
    assert code == 0, err
    m2 = json.loads((again / "manifest.json").read_text())
    assert (out / m["model_file"]).read_bytes() == (again / m2["model_file"]).read_bytes()
    assert m2["depth"]["layers"] == 2 and m2["precision_plan"]["units"] == plan["units"]

    # the same plan at full depth, or at another depth, is another model's: one line each
    for where, extra, want in (
        ("full", (), "made at depth 2"),
        ("d1", ("--depth", "1", "--depth-search", str(search)), "not at depth 1"),
    ):
        plan_file = str(out / "plan.json")
        code, err = _convert(
            capsys, str(ckpt), *extra, "--precision-plan", plan_file, "-o", str(tmp_path / where)
        )
        assert code != 0 and want in err and len(err.splitlines()) == 1, err
        assert not (tmp_path / where).exists()


def test_own_head_depths_share_weights_yet_a_plan_keeps_its_depth(
    searched: tuple[Path, Path],
    rows_tsv: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With the model's own head, depths 1 and 2 of a one-group model hold the same
    weights (same sha256): the plan's depth is still checked, for K and for auto."""
    ckpt, search = searched
    own = ("--depth-search", str(search), "--exit-head", "own")
    out = tmp_path / "auto"
    code, err = _convert(
        capsys, str(ckpt), "--depth", "2", *own, "--precision", "auto", *BUDGET,
        "--data", str(rows_tsv), "-o", str(out),
    )  # fmt: skip
    assert code == 0, err
    plan_file = str(out / "plan.json")
    for depth, want in (("1", "not at depth 1"), ("auto", "not at depth")):
        # the rule's flags only where the rule chooses (with --depth 1 they are refused)
        rule = ("--max-point-loss", "100", "--min-lower-bound", "-100") if depth == "auto" else ()
        argv = ("--depth", depth, *own, *rule)
        code, err = _convert(
            capsys, str(ckpt), *argv, "--precision-plan", plan_file, "-o", str(tmp_path / "o")
        )
        assert code != 0 and want in err and len(err.splitlines()) == 1, err
        assert not (tmp_path / "o").exists()
    # renamed past the early name check, the plan's identity (its depth) still refuses it
    # (depth 1 with the own head holds depth 2's weights: the sha256 check passes)
    plan = json.loads((out / "plan.json").read_text())
    assert plan["checkpoint"]["num_hidden_layers"] == 2
    renamed_plan = tmp_path / "renamed.json"
    ck = {**plan["checkpoint"], "name": "x-depth1"}
    renamed_plan.write_text(json.dumps({**plan, "checkpoint": ck}))
    code, err = _convert(
        capsys, str(ckpt), "--depth", "1", *own, "--precision-plan", str(renamed_plan),
        "-o", str(tmp_path / "o"),
    )  # fmt: skip
    assert code != 0 and "made at depth 2 (x-depth1), not at depth 1" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "o").exists()
    # the truncated checkpoint written under another name is that model: the plan applies
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.depth import load_search, write_truncated

    renamed = write_truncated(
        load_checkpoint(ckpt), 2, tmp_path / "renamed", search=load_search(search), head="own"
    )
    code, err = _convert(
        capsys, str(renamed), "--precision-plan", plan_file, "-o", str(tmp_path / "r")
    )
    assert code == 0, err
    m = json.loads((out / "manifest.json").read_text())
    r = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert (out / m["model_file"]).read_bytes() == (tmp_path / "r" / r["model_file"]).read_bytes()


def test_depth_plan_refusals_come_before_the_model_loads(
    searched: tuple[Path, Path],
    rows_tsv: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ckpt, search = searched
    at = ("--depth", "2", "--depth-search", str(search))
    bad = tmp_path / "plan.json"
    bad.write_text("{not json")
    cases = [
        ((*at, "--precision-plan", str(bad)), "not a readable precision plan"),
        (
            (*at, "--precision", "auto", "--max-drop", "1", "--data", str(rows_tsv)),
            "give at least 200 rows",
        ),
        (
            ("--depth", "2", "--precision", "auto", *BUDGET, "--data", str(rows_tsv)),
            "--depth needs --depth-search",
        ),
        (
            (
                "--depth-search",
                str(search),
                "--precision",
                "auto",
                *BUDGET,
                "--data",
                str(rows_tsv),
            ),
            "--depth-search needs --depth",
        ),
        ((*at, "--precision", "auto", "--data", str(rows_tsv)), "--max-drop POINTS and --data"),
    ]
    for argv, want in cases:
        out = tmp_path / "o"
        code, err = _convert(capsys, str(ckpt), *argv, "-o", str(out))
        assert code != 0 and want in err and len(err.splitlines()) == 1, (argv, err)
        assert not out.exists()
