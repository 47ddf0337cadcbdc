"""A flag the command would ignore is refused in one line, before any model loads.

Was: ``convert --precision int8-dynamic --max-drop 0.5`` converted without a word that the
budget applies only to ``--precision auto``. The same for every flag that one mode of a
command reads and another ignores (convert, depth truncate, bench, train, trim,
early-exit). A flag is refused only when typed: its default is told apart.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EMBEDDED = ROOT / "albert_edge" / "models" / "sst2-albert-tiny"
SST2 = ROOT / "tests" / "data" / "sst2" / "dev.tsv"

CASES = [
    # convert: the search's flags without a search
    (("convert", "--precision", "int8-dynamic", "--max-drop", "0.5", "-o", "out"),
     "--max-drop applies to --precision auto"),
    (("convert", "--precision", "int4", "--data", str(SST2), "-o", "out"),
     "--data applies to --precision auto"),
    (("convert", "--objective", "latency", "-o", "out"), "--objective applies to --precision auto"),
    (("convert", "--search-rows", "100", "-o", "out"), "--search-rows applies to --precision auto"),
    (("convert", "--workers", "2", "-o", "out"), "--workers applies to --precision auto"),
    (("convert", "--cluster", "local", "-o", "out"), "--cluster applies to --precision auto"),
    # convert / depth truncate: the depth rule and head without a depth chosen by them
    (("convert", "--max-point-loss", "1", "-o", "out"), "--max-point-loss applies to --depth auto"),
    (("convert", "--min-lower-bound", "-1", "-o", "out"), "--min-lower-bound applies to"),
    (("convert", "--exit-head", "own", "-o", "out"), "--exit-head needs --depth K"),
    (("depth", "truncate", "--depth", "2", "--depth-search", "s", "--max-point-loss", "0.5",
      "-o", "out"), "--depth 2 is fixed: drop --max-point-loss"),
    # bench: --recommend's and --adb's flags without them
    (("bench", "--report-data", str(SST2)), "--report-data applies to bench --recommend"),
    (("bench", "--exit-fit-rows", "2000"), "--exit-fit-rows applies to bench --recommend"),
    (("bench", "--trim-keep", "100"), "--trim-keep applies to bench --recommend"),
    (("bench", "--candidates", "onnx:fp32"), "--candidates applies to bench --recommend"),
    (("bench", "--serial", "emulator-5554"), "--serial applies to bench --adb"),
    (("bench", "--benchmark-model", "/x/benchmark_model"), "--benchmark-model applies to bench --adb"),
    # train: distillation weights without a teacher, a QAT recipe without QAT
    (("train", "--init", str(EMBEDDED), "--train", str(SST2), "--alpha", "0.5", "-o", "out"),
     "--alpha weighs the teacher's term"),
    (("train", "--init", str(EMBEDDED), "--train", str(SST2), "--temperature", "3", "-o", "out"),
     "--temperature weighs the teacher's term"),
    (("train", "--init", str(EMBEDDED), "--train", str(SST2), "--qat-target", "x86", "-o", "out"),
     "--qat-target picks the recipe --qat simulates"),
    # trim: the heal's seed and threads without --heal
    (("trim", "--corpus", str(SST2), "--seed", "13", "-o", "out"),
     "--seed applies to the healing fine-tune"),
    (("trim", "--corpus", str(SST2), "--threads", "2", "-o", "out"),
     "--threads applies to the healing fine-tune"),
    # early-exit: the held-out rows of --max-drop without it
    (("early-exit", str(EMBEDDED), "--data", str(SST2), "--held-out-rows", "200", "-o", "out"),
     "--held-out-rows sets the rows --max-drop"),
]  # fmt: skip


@pytest.mark.parametrize("argv,says", CASES, ids=[" ".join(c[0][:3]) for c in CASES])
def test_an_ignored_flag_is_refused_in_one_line(
    argv: tuple[str, ...], says: str, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "albert_edge.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in lines if ln.startswith("import time:")}
    said = [ln for ln in lines if not ln.startswith("import time:")]
    assert r.returncode != 0 and len(said) == 1, said
    assert says in said[0] and "error:" in said[0], said[0]
    assert "torch" not in imported  # refused before any model loads
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_flag_typed_at_its_default_where_it_applies_is_not_refused() -> None:
    """The defaults are told apart from typed values, and both parse to the same number."""
    from albert_edge.cli import build_parser
    from albert_edge.depth.command import typed

    p = build_parser()
    a = p.parse_args(["convert", "-o", "x", "--depth", "auto", "--max-point-loss", "0.5"])
    assert typed(a, "max_point_loss") and a.max_point_loss == 0.5
    b = p.parse_args(["convert", "-o", "x"])
    assert not typed(b, "max_point_loss") and b.max_point_loss == 0.5
    assert not typed(b, "exit_head") and b.exit_head == "refit"
