"""Progress outside a terminal (issue 52): a counted loop says where it is at each tenth.

The CLI runs in a subprocess with stderr to a pipe, as in a CI log or ``2> log``: there
rich draws no live bar, and a two-minute training epoch used to print its start and its
end and nothing between. The training run here is a tiny tagger (a few seconds).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = json.dumps(
    {
        "hidden_size": 32,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "embedding_size": 16,
        "num_hidden_layers": 2,
        "max_position_embeddings": 64,
    }
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "USE_TF": "0"}


def _conll(path: Path, n: int) -> Path:
    people, places = ["John Smith", "Anna Lee", "Peter Brown"], ["Paris", "Tokyo", "Lima"]
    lines = ["-DOCSTART- -X- -X- O", ""]
    for i in range(n):
        words = [(w, "I-PER") for w in people[i % 3].split()]
        words += [("visited", "O"), (places[i % 3], "I-LOC"), (".", "O")]
        lines += [f"{w} NNP I-NP {t}" for w, t in words] + [""]
    path.write_text("\n".join(lines) + "\n")
    return path


def _tenths(lines: list[str], description: str) -> list[int]:
    """The percentages of the tenth lines of ``description`` between its start and end."""
    start = lines.index(f"albert-edge: {description} …")
    end = next(i for i, ln in enumerate(lines) if ln.startswith(f"albert-edge: ✓ {description} ("))
    pattern = re.compile(rf"albert-edge: {description} (\d+)/(\d+) \((\d+) %\) [\d.]+ s, ETA ")
    found = [pattern.match(ln) for ln in lines[start + 1 : end]]
    assert all(found), lines[start : end + 1]
    return [int(m.group(3)) for m in found if m]


def test_training_epoch_prints_each_tenth_to_a_pipe(tmp_path: Path, spiece_path: Path) -> None:
    """A training epoch of 45 steps, stderr a pipe: 9 lines between its start and its end
    (10 %, 20 %, ... 90 %), each with the ETA and the epoch's loss so far; stdout's summary
    line prints the metric in points and names no directory (training.json's command
    neither: its paths are relative to the output's parent)."""
    data = _conll(tmp_path / "ner.txt", 200)
    out = tmp_path / "tagger"
    cmd = [sys.executable, "-m", "albert_edge.cli", "train", "--train", str(data), "-o", str(out)]
    cmd += ["--spiece", str(spiece_path), "--epochs", "1", "--batch-size", "4", "--max-len", "32"]
    cmd += ["--config", TINY]
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stderr.splitlines()
    percents = _tenths(lines, "epoch 1")
    assert len(percents) == 9 and percents == sorted(percents), lines
    assert [p // 10 for p in percents] == list(range(1, 10)), percents
    assert all(re.search(r", loss \d+\.\d{4}$", ln) for ln in lines if " %) " in ln), lines
    # the summary: points with 2 decimals, never a raw fraction, names not paths
    summary = r.stdout.strip().splitlines()[-1]
    assert re.fullmatch(
        r"tagger: token-classification: held-out f1 \d+\.\d\d \[\d+\.\d\d, \d+\.\d\d\], "
        r"epoch 1 chosen, [\d,]+ parameters, \d+\.\d s",
        summary,
    ), summary
    assert str(tmp_path) not in r.stdout
    record = (out / "training.json").read_text()
    assert str(tmp_path) not in record and str(ROOT) not in record
    command = json.loads(record)["command"]
    assert "--train ner.txt -o tagger" in command, command


_LOOPS = """
import sys
from albert_edge import progress
assert not progress.console().is_terminal
for _ in progress.track(range(100), total=100, description="rows", status=lambda: "loss 1"):
    pass
for _ in progress.track(iter(range(50)), description="unknown"):  # no total: no tenths
    pass
with progress.Counter(7, "chunks") as c:  # uneven chunks past several tenths at once
    for n in (1, 3, 3):
        c.advance(n)
for _ in progress.track(range(3), total=3, description="three"):
    pass
for _ in progress.track(range(10), total=10, description="long " + "x" * 90):
    pass  # a log line longer than rich's 80 columns stays one line
"""


def test_track_and_counter_print_tenths_outside_a_terminal() -> None:
    r = subprocess.run(
        [sys.executable, "-c", _LOOPS], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert _tenths(lines, "rows") == [10, 20, 30, 40, 50, 60, 70, 80, 90], lines
    rows = [ln for ln in lines if re.match(r"albert-edge: rows \d+/100 ", ln)]
    assert len(rows) == 9 and all(ln.endswith(", loss 1") for ln in rows), lines
    assert _tenths(lines, "unknown") == []
    assert lines.index("albert-edge: chunks (7) …") >= 0
    chunks = [ln for ln in lines if re.match(r"albert-edge: chunks \d+/7 ", ln)]
    assert [ln.split()[2] for ln in chunks] == ["1/7", "4/7"], lines  # 7/7: the end line
    assert _tenths(lines, "three") == [33, 66], lines  # 1/3 passes the first 3 tenths
    assert _tenths(lines, "long " + "x" * 90) == [10, 20, 30, 40, 50, 60, 70, 80, 90], lines


def test_quiet_prints_no_tenths() -> None:
    """``-q`` (``set_enabled(False)``): the same loops print nothing at all."""
    code = _LOOPS.replace(
        "assert not progress.console().is_terminal", "progress.set_enabled(False)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
