"""SIGTERM and SIGHUP behave like Ctrl-C (issue 26): one line, temp files and lock gone,
the previous output intact, exit 128 + N, no orphaned bench worker. And the two hostile
environments a case table cannot set up: a deleted working directory, a full TMPDIR.

A signal is sent once the run is inside its write (its ``.OUT.lock`` exists, or its bench
worker runs), so it interrupts real work, not the interpreter's start-up.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.harness import MountUnavailable, error_lines, tmpfs
from tests.hostile.files import MAKERS
from tests.hostile.judge import UNDER_TEST, Case, judge, run_case, tree

TINY = (
    '{"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64, "embedding_size": 16}'
)


def _env(tmpdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(UNDER_TEST),
        "OMP_NUM_THREADS": "1",
        "TMPDIR": str(tmpdir),
    }


def _wait_for(ready: Callable[[], bool], proc: subprocess.Popen[str], limit: float = 120) -> None:
    t0 = time.monotonic()
    while not ready():
        assert proc.poll() is None, f"finished before the signal: {proc.communicate()}"
        assert time.monotonic() - t0 < limit, "never reached its write"
        time.sleep(0.005)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


pytestmark = pytest.mark.usefixtures("signals_not_ignored")


SIGNALLED = [
    ("convert-onnx", ["convert", "{ckpt}", "-o", "out", "--no-verify", "--overwrite"], "lock"),
    ("convert-tflite", ["convert", "{ckpt}", "--to", "tflite", "-o", "out", "--no-verify"], "lock"),
    (
        "quantize",
        ["quantize", "{art}", "-o", "out", "--precision", "int8-dynamic", "--no-verify"],
        "lock",
    ),
    (
        "train",
        [
            "train",
            "-o",
            "out",
            "--train",
            "bom.tsv",
            "--dev",
            "bom.tsv",
            "--epochs",
            "1",
            "--config",
            TINY,
        ],
        "lock",
    ),
    (
        "bench",
        [
            "bench",
            "{art}",
            "--backend",
            "ort-cpu",
            "--runs",
            "100000",
            "--warmup",
            "0",
            "--json",
            "r.json",
        ],
        "worker",
    ),
]
SLOW = {"convert-tflite", "train"}


@pytest.mark.parametrize(
    ("name", "args", "wait", "sig"),
    [
        pytest.param(
            n, a, w, s, id=f"{n}:SIG{s.name[3:]}", marks=[pytest.mark.slow] if n in SLOW else []
        )
        for n, a, w in SIGNALLED
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
        if s != signal.SIGINT or n == "convert-onnx"
    ],
)
def test_signal(
    name: str,
    args: list[str],
    wait: str,
    sig: signal.Signals,
    tmp_path: Path,
    hostile_shared: dict[str, Path],
) -> None:
    work, tmpdir = tmp_path / "case", tmp_path / "tmpdir"
    work.mkdir()
    tmpdir.mkdir()
    MAKERS["bom.tsv"](work, hostile_shared)
    if "--overwrite" in args:  # a previous artifact that the run replaces: it must survive
        shutil.copytree(hostile_shared["art"], work / "out")
    before = {"tmp": tree(work), **{k: tree(p) for k, p in hostile_shared.items()}}
    argv = [a.replace("{ckpt}", str(hostile_shared["ckpt"])) for a in args]
    argv = [a.replace("{art}", str(hostile_shared["art"])) for a in argv]
    proc = subprocess.Popen(
        [sys.executable, "-m", "albert_edge.cli", *argv, "--quiet"],
        cwd=work,
        env=_env(tmpdir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if wait == "lock":
            _wait_for(lambda: (work / ".out.lock").exists(), proc)
        else:
            _wait_for(lambda: bool(_children(proc.pid)), proc)
            time.sleep(1.0)  # the worker is loading or timing
        workers = _children(proc.pid)
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    r = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert r.returncode == 128 + sig, (r.returncode, err)
    assert f"stopped by {sig.name}" in err and len(error_lines(err)) == 1, err
    for pid in workers:  # no orphan: the worker is gone, not re-parented
        assert (
            not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
        )
    after = {"tmp": tree(work), **{k: tree(p) for k, p in hostile_shared.items()}}
    # bench keeps its row log (r.json.rows.jsonl) on purpose: the next run resumes from it
    keep = ("r.json.rows.jsonl",) if name == "bench" else ()
    judge(Case(name, tuple(argv), r.returncode, creates=keep), r, before, after, tmpdir)


def test_deleted_working_directory(tmp_path: Path, hostile_shared: dict[str, Path]) -> None:
    """Was: an MKL fatal error. Now one line naming the cause, before anything loads."""
    gone = tmp_path / "gone"
    gone.mkdir()
    (tmp_path / "tmpdir").mkdir()
    script = (
        f"cd {gone} && rmdir {gone} && exec {sys.executable} -m albert_edge.cli "
        f"convert {hostile_shared['ckpt']} -o out --quiet"
    )
    r = subprocess.run(
        ["sh", "-c", script], capture_output=True, text=True, env=_env(tmp_path / "tmpdir")
    )
    assert r.returncode == 2, r.stderr
    assert "current directory no longer exists" in r.stderr, r.stderr
    assert len(error_lines(r.stderr)) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "MKL" not in r.stderr and sorted(os.listdir(tmp_path)) == ["tmpdir"]


def test_full_tmpdir_is_named_not_the_output(
    tmp_path: Path, hostile_shared: dict[str, Path]
) -> None:
    """Was: "cannot write -o". A full TMPDIR on its own file system is named as such."""
    small = tmp_path / "small"
    try:
        with tmpfs(small, "64k"):
            (small / "fill").write_bytes(b"\0" * 60 * 1024)
            case = Case(
                "convert-onnx:full-tmpdir",
                ("convert", "{ckpt}", "-o", "out", "--no-verify"),
                2,
                r"temporary directory .*small is full",
                env={"TMPDIR": str(small)},
            )
            (tmp_path / "run").mkdir()
            run_case(case, tmp_path / "run", hostile_shared, MAKERS)
            assert os.listdir(small) == ["fill"]  # the run's scratch is gone too
    except MountUnavailable as exc:
        pytest.skip(f"no tmpfs here: {exc}")
