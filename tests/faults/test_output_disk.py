"""A full disk is named by the file system that is full (issue 43): an output on a small
disk mounted under TMPDIR was reported as "temporary directory /tmp is full", because the
failing file's path began with TMPDIR's. Real tmpfs mounts (root); skipped where none can
be mounted."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest

from albert_edge.io import describe_os_error
from tests.faults.harness import MountUnavailable, one_line_error, run_cli, tmpfs


def _enospc(filename: Path | None = None, written: Path | None = None) -> OSError:
    """ENOSPC as Python raises it: no file, one file, or (a copy) source and destination."""
    code = errno.ENOSPC
    if filename is None:
        return OSError(code, os.strerror(code))
    if written is None:
        return OSError(code, os.strerror(code), str(filename))
    return OSError(code, os.strerror(code), str(filename), None, str(written))


def test_output_disk_under_tmpdir_is_the_one_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # TMPDIR is tmp_path
    try:
        with tmpfs(tmp_path / "mnt", "64k") as mnt:
            out = mnt / "out"
            failing = mnt / ".out.tmp-1-x" / "tokenizer.json"  # already removed, as in a run
            scratch = tmp_path / "albert-edge-run-1-x" / "tokenizer.json"  # the copy's source
            for exc in (_enospc(failing), _enospc(), _enospc(scratch, failing)):
                msg = str(describe_os_error(exc, out))
                assert "temporary directory" not in msg, msg
                assert msg.startswith(f"{out}: cannot write (no space left on device)"), msg
                assert f"the disk mounted at {mnt}" in msg, msg
    except MountUnavailable as exc:
        pytest.skip(f"cannot mount a tmpfs here ({exc})")


def test_a_full_tmpdir_is_still_named_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side (issue 26): TMPDIR on its own full disk, the output elsewhere."""
    try:
        with tmpfs(tmp_path / "tmpdir", "64k") as tmpdir:
            monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
            (tmpdir / "filler").write_bytes(b"\0" * 60 * 1024)  # the tmpfs is now full
            outside = tmp_path / "src.txt"  # a copy from elsewhere into the scratch directory
            for exc in (_enospc(tmpdir / "x"), _enospc(outside, tmpdir / "x"), _enospc()):
                msg = str(describe_os_error(exc, tmp_path / "out"))
                assert msg.startswith(f"temporary directory {tmpdir} is full"), msg
    except MountUnavailable as exc:
        pytest.skip(f"cannot mount a tmpfs here ({exc})")


@pytest.mark.slow  # three trims of the embedded model (~10 s each)
@pytest.mark.parametrize("size", ["256k", "1100k", "1400k"])
def test_trim_onto_a_full_disk_under_tmpdir(tmp_path: Path, size: str) -> None:
    """Sizes met at different points of the write: safetensors' weights (was a
    ``SafetensorError`` traceback), the tokenizer files (was "temporary directory ... is
    full"). The run's TMPDIR is ``tmp_path``; the output's disk is mounted inside it."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a warm , funny film\nthe plot is thin\nsmart and tender\n")
    try:
        with tmpfs(tmp_path / "mnt", size) as mnt:
            r = run_cli("trim", "--corpus", str(corpus), "-o", str(mnt / "out"), tmpdir=tmp_path)
            assert one_line_error(r), r.stderr
            assert "no space left on device" in r.stderr, r.stderr
            assert f"the disk mounted at {mnt}" in r.stderr, r.stderr
            assert "temporary directory" not in r.stderr, r.stderr
            assert list(mnt.iterdir()) == []
    except MountUnavailable as exc:
        pytest.skip(f"cannot mount a tmpfs here ({exc})")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "mnt"]


def test_file_size_limit_is_named_as_ulimit_f(tmp_path: Path) -> None:
    """Was: "cannot write (File too large); choose another -o", when no -o helps: the
    shell's ``ulimit -f`` stops every file past it."""
    import resource
    import subprocess

    from tests.faults.harness import cli_argv, cli_env

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))

    (tmp_path / "tmp").mkdir()  # the run's private TMPDIR
    r = subprocess.run(
        cli_argv("convert", "-o", str(tmp_path / "out"), "--no-verify"),
        capture_output=True,
        text=True,
        env=cli_env(tmp_path / "tmp"),
        cwd="/",
        preexec_fn=limit,
        timeout=600,
    )
    assert one_line_error(r), r.stderr
    assert f"ulimit -f, of {1 << 20} bytes" in r.stderr and "raise it" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_mount_point_output_is_refused_before_any_work(tmp_path: Path) -> None:
    """Was: "cannot write (Device or resource busy)" after the whole conversion: a mount
    point cannot be swapped for the new directory."""
    import subprocess

    from tests.faults.harness import cli_argv, cli_env

    try:
        with tmpfs(tmp_path / "mnt", "1m") as mnt:
            for out, cwd in ((str(mnt), "/"), (".", str(mnt))):
                r = subprocess.run(
                    cli_argv("convert", "-o", out, "--overwrite", "--no-verify"),
                    capture_output=True,
                    text=True,
                    env=cli_env(),
                    cwd=cwd,
                    timeout=600,
                )
                assert one_line_error(r), r.stderr
                assert f"{mnt}: is a mount point" in r.stderr, r.stderr
                assert f"-o {mnt / 'model'}" in r.stderr, r.stderr
                assert list(mnt.iterdir()) == []
    except MountUnavailable as exc:
        pytest.skip(f"cannot mount a tmpfs here ({exc})")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mnt"]


def test_no_inodes_left_is_not_called_a_lack_of_space(tmp_path: Path) -> None:
    """ENOSPC with megabytes free: the disk's file entries are used up, and "free space"
    would send the user to ``df``, which shows room."""
    try:
        with tmpfs(tmp_path / "mnt", "8m,nr_inodes=8") as mnt:
            n = 0
            with pytest.raises(OSError) as full:
                while n < 100:
                    (mnt / f"f{n}").write_bytes(b"")
                    n += 1
            assert full.value.errno == errno.ENOSPC
            msg = str(describe_os_error(full.value, mnt / "out"))
            assert "only 0 file entries (inodes) are free there" in msg, msg
            assert f"df -i {mnt}" in msg, msg
    except MountUnavailable as exc:
        pytest.skip(f"cannot mount a tmpfs here ({exc})")
