"""convert's precision-plan flags refuse bad input in one line, before any model work,
and write nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from albert_edge.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["convert", "-q", *argv])
    return code, capsys.readouterr().err.strip()


def test_auto_without_budget_or_data(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = _run(capsys, "--precision", "auto", "-o", str(tmp_path / "o"))
    assert code != 0 and "--max-drop POINTS and --data" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_too_few_rows_names_the_minimum(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, rows_tsv: Path
) -> None:
    out = tmp_path / "o"
    code, err = _run(
        capsys, "--precision", "auto", "--max-drop", "0.5", "--data", str(rows_tsv), "-o", str(out)
    )
    assert code != 0 and "give at least 400 rows" in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_a_file_that_is_not_a_plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "plan.json"
    bad.write_text('{"units": []}')
    code, err = _run(capsys, "--precision-plan", str(bad), "-o", str(tmp_path / "o"))
    assert code != 0 and "not a precision plan" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_plan_with_another_precision(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    code, err = _run(
        capsys,
        "--precision",
        "int8-dynamic",
        "--precision-plan",
        str(plan),
        "-o",
        str(tmp_path / "o"),
    )
    assert code != 0 and "drop --precision int8-dynamic" in err


def test_tflite_integer_fallback_is_int8_full(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, rows_tsv: Path
) -> None:
    code, err = _run(
        capsys,
        *("--to", "tflite", "--precision", "int8-static", "--max-drop", "5"),
        *("--data", str(rows_tsv), "-o", str(tmp_path / "o")),
    )
    assert code != 0 and "use --precision int8-full" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_auto_refuses_calibration(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, rows_tsv: Path
) -> None:
    code, err = _run(
        capsys,
        *("--precision", "auto", "--max-drop", "5", "--data", str(rows_tsv)),
        *("--calibration", str(rows_tsv), "-o", str(tmp_path / "o")),
    )
    assert code != 0 and "drop --calibration" in err and len(err.splitlines()) == 1
