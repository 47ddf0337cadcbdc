"""Heavy fault cases (@slow): SIGKILL at seeded random moments, a full disk, concurrent
writers. benchmarks/fault_injection.py runs the same cases at scale and reports figures.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.conftest import EMBEDDED, ROOT, one_line_error, run_cli, tree

pytestmark = pytest.mark.slow
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def complete(out: Path) -> bool:
    from albert_edge.errors import AlbertEdgeError
    from albert_edge.manifest import check_files, load_manifest

    try:
        check_files(out, load_manifest(out))
    except AlbertEdgeError:
        return False
    return True


def test_kill_9_never_half_writes_and_the_next_run_cleans(tmp_path: Path) -> None:
    from albert_edge.io import clean_stale_siblings

    rng = random.Random(13)
    ckpt = tmp_path / "ckpt"
    shutil.copytree(EMBEDDED, ckpt)
    before = tree(ckpt)
    for i in range(8):
        out = tmp_path / f"out{i}"
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "albert_edge.cli",
                "convert",
                str(ckpt),
                "-o",
                str(out),
                "--no-verify",
            ],
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=rng.uniform(0.5, 8.0))
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert not out.exists() or complete(out)
        clean_stale_siblings(out)
        assert not [q.name for q in tmp_path.iterdir() if q.name.startswith(f".out{i}.")]
    assert tree(ckpt) == before


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}): disk-full case not run")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


@pytest.mark.parametrize("size", ["64k", "2m", "8m"])
def test_disk_full_is_one_line_and_leaves_nothing(tmp_path: Path, size: str) -> None:
    with tmpfs(tmp_path / "mnt", size) as mnt:
        r = run_cli("convert", "-o", str(mnt / "out"), "--no-verify")
        assert one_line_error(r) and "no space left" in r.stderr, r.stderr
        assert list(mnt.iterdir()) == []


@pytest.mark.parametrize("n", [2, 4])
def test_concurrent_converts_to_one_output(tmp_path: Path, n: int) -> None:
    out = tmp_path / "out"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "albert_edge.cli",
                "convert",
                "-o",
                str(out),
                "--no-verify",
                "--overwrite",
            ],
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    results = [(p.wait(), p.stderr.read() if p.stderr else "") for p in procs]
    assert any(rc == 0 for rc, _ in results)
    for rc, err in results:
        assert rc == 0 or ("writing this output" in err and len(err.strip().splitlines()) == 1)
    assert complete(out)
    assert sorted(q.name for q in tmp_path.iterdir()) == ["out"]


def test_truncated_tflite_says_truncated_not_op_versions(tmp_path: Path) -> None:
    """Was: a truncated .tflite said "see op versions"."""
    from albert_edge.convert import convert
    from albert_edge.errors import UnsupportedError
    from albert_edge.options import ConvertOptions
    from albert_edge.tflite.runtime import LiteRTRunner

    art = tmp_path / "art"
    convert(None, art, ConvertOptions(target="tflite", verify=False, seq_lens=(16,)))
    bare = tmp_path / "bare.tflite"  # no manifest beside it: the runtime must say why
    data = (art / "model.tflite").read_bytes()
    bare.write_bytes(data[: len(data) // 2])
    with pytest.raises(UnsupportedError, match="truncated or corrupt") as info:
        LiteRTRunner(bare)
    assert "op versions" not in str(info.value)
