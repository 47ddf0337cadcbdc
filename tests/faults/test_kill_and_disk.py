"""Heavy fault cases (@slow): SIGKILL inside each command's measured running window, a
full disk, concurrent writers. benchmarks/fault_injection.py runs the same trials (the same
code: tests/faults/harness.py) at scale and reports figures.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from tests.faults.harness import (
    EMBEDDED,
    KillCommand,
    MountUnavailable,
    calibrate,
    complete_artifact,
    concurrent_converts,
    kill_trial,
    one_line_error,
    refused_as_busy,
    run_cli,
    tmpfs,
)

pytestmark = pytest.mark.slow


def test_kill_9_never_half_writes_and_the_next_run_cleans(tmp_path: Path) -> None:
    """Real kills (exit status -9 of a running convert), fresh and --overwrite: the input
    keeps every byte, the output is absent, the previous artifact or a complete new one,
    and the next run succeeds and leaves no temp, old, lock or scratch name."""
    rng = random.Random(13)
    ckpt = tmp_path / "ckpt"
    shutil.copytree(EMBEDDED, ckpt)
    previous = tmp_path / "previous"
    assert run_cli("convert", str(ckpt), "-o", str(previous), "--no-verify").returncode == 0
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    cmd = KillCommand(
        "convert -> ONNX",
        lambda o: ["convert", str(ckpt), "-o", str(o), "--no-verify"],
        [ckpt],
        previous,
    )
    calibrate(cmd, tmp_path, tmpdir, runs=1)
    results = [
        kill_trial(
            cmd, tmp_path / f"out{i}", rng.uniform(0.02, 0.98), overwrite=i % 2 == 1, tmpdir=tmpdir
        )
        for i in range(6)
    ]
    assert sum(r.killed for r in results) >= 3, [r.as_dict() for r in results]
    for r in results:
        assert not (r.inputs_lost or r.half_written or r.tracebacks), r.as_dict()
        assert not (r.leftovers or r.next_run_failed), r.as_dict()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "previous", "tmp"]


@pytest.mark.parametrize("size", ["64k", "2m", "8m"])
def test_disk_full_is_one_line_and_leaves_nothing(tmp_path: Path, size: str) -> None:
    try:
        with tmpfs(tmp_path / "mnt", size) as mnt:
            r = run_cli("convert", "-o", str(mnt / "out"), "--no-verify")
            assert one_line_error(r) and "no space left" in r.stderr, r.stderr
            assert list(mnt.iterdir()) == []
    except MountUnavailable as exc:
        pytest.skip(f"cannot mount a tmpfs here ({exc}): disk-full case not run")


@pytest.mark.parametrize("n", [2, 4])
def test_concurrent_converts_to_one_output(tmp_path: Path, n: int) -> None:
    out = tmp_path / "out"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    results = concurrent_converts([out] * n, overwrite=True, tmpdir=tmpdir)
    assert any(rc == 0 for rc, _ in results)
    for rc, err in results:
        assert rc == 0 or refused_as_busy(rc, err), err
    assert complete_artifact(out)
    assert sorted(q.name for q in tmp_path.iterdir()) == ["out", "tmp"]
    assert list(tmpdir.iterdir()) == []


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
