"""Hostile inputs to ``bench --recommend --trim-corpus / --trim-keep`` (tests/hostile/judge.py
says what each case asserts): each is refused in one line before any model loads."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.hostile.files import MAKERS, ROWS
from tests.hostile.judge import Case, params, run_case


def _rows80(work: Path, shared: Mapping[str, Path]) -> None:
    """80 labelled rows: enough for both halves' bootstrap minimum (30 each)."""
    rows = [ROWS[i % len(ROWS)] for i in range(80)]
    (work / "rows80.tsv").write_text(
        "label\tsentence\n" + "".join(f"{y}\t{t}\n" for y, t in rows), encoding="utf-8"
    )


FILES = {**MAKERS, "rows80.tsv": _rows80}
R = ("bench", "{ckpt}", "--recommend", "--candidates", "onnx:fp32", "--data", "rows80.tsv")
NO_TORCH = ("torch",)

CASES = [
    Case("bench:recommend-trim-corpus-latin1", (*R, "--trim-corpus", "latin1.tsv"), 2,
         "latin1.tsv.*not UTF-8", ("rows80.tsv", "latin1.tsv"), no_import=NO_TORCH),
    Case("bench:recommend-trim-corpus-empty", (*R, "--trim-corpus", "empty.tsv"), 2,
         "empty.tsv", ("rows80.tsv", "empty.tsv"), no_import=NO_TORCH),
    Case("bench:recommend-trim-keep-below-minimum",
         (*R, "--trim-corpus", "calib.txt", "--trim-keep", "20000,5"), 2,
         r"--trim-keep 5 is below the \d+ pieces every trim", ("rows80.tsv", "calib.txt"),
         no_import=NO_TORCH),
    Case("bench:recommend-trim-keep-without-corpus", (*R, "--trim-keep", "5000"), 2,
         "--trim-keep needs --trim-corpus", ("rows80.tsv",), no_import=NO_TORCH),
]  # fmt: skip


@pytest.mark.parametrize("case", params(CASES))
def test_command(case: Case, tmp_path: Path, hostile_shared: dict[str, Path]) -> None:
    run_case(case, tmp_path, hostile_shared, FILES)
