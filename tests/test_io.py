"""albert_edge.io: guards, lock, atomic replace, one-line filesystem errors, leftovers.

Fast: no model is converted here; artifacts are small directories sealed by
:func:`write_manifest`, which is exactly how the pipelines finish theirs.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from albert_edge.errors import OutputError, OutputExistsError
from albert_edge.io import (
    atomic_output_dir,
    check_output,
    clean_stale_siblings,
    is_albert_edge_artifact,
    lock_path,
    output_lock,
)
from albert_edge.manifest import write_manifest
from albert_edge.scratch import clean_stale_scratch, run_scratch


def make_artifact(path: Path, payload: bytes = b"model") -> Path:
    path.mkdir(parents=True)
    (path / "model.onnx").write_bytes(payload)
    (path / "config.json").write_text("{}\n")
    write_manifest(path, {"target": "onnx", "model_file": "model.onnx", "files": ["model.onnx"]})
    return path


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def sums(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


# --- guards -------------------------------------------------------------------------


def test_overwrite_refuses_a_checkpoint_directory(tmp_path: Path) -> None:
    """Was: ``convert CKPT -o CKPT --overwrite`` deleted model.safetensors (exit 0)."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"weights")
    (ckpt / "config.json").write_text("{}")
    before = sums(ckpt)
    with (
        pytest.raises(OutputExistsError, match="would replace the input"),
        atomic_output_dir(ckpt, overwrite=True, inputs=[ckpt]),
    ):
        pass
    with (
        pytest.raises(OutputExistsError, match="did not write"),
        atomic_output_dir(ckpt, overwrite=True, inputs=[tmp_path / "elsewhere"]),
    ):
        raise AssertionError("the body must not run")
    assert sums(ckpt) == before


def test_overwrite_refuses_any_non_artifact(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "thesis.txt").write_text("years of work")
    with pytest.raises(OutputExistsError, match="only replaces a previous albert-edge artifact"):
        check_output(notes, overwrite=True)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(OutputExistsError):
        check_output(a_file, overwrite=True)
    # an artifact the user added a file to is no longer only albert-edge's
    art = make_artifact(tmp_path / "art")
    assert is_albert_edge_artifact(art)
    (art / "my-notes.txt").write_text("mine")
    assert not is_albert_edge_artifact(art)
    with pytest.raises(OutputExistsError):
        check_output(art, overwrite=True)
    assert (notes / "thesis.txt").read_text() == "years of work"


def test_output_containing_the_input_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputExistsError, match="would replace the input"):
        check_output(tmp_path, overwrite=True, inputs=[tmp_path / "ckpt"])


def test_overwrite_replaces_a_previous_artifact_atomically(tmp_path: Path) -> None:
    out = make_artifact(tmp_path / "out", b"old")
    with atomic_output_dir(out, overwrite=True) as tmp:
        assert tmp.parent == out.parent and tmp.name.startswith(".out.tmp-")
        assert (out / "model.onnx").read_bytes() == b"old"  # untouched while writing
        (tmp / "model.onnx").write_bytes(b"new")
        write_manifest(tmp, {"target": "onnx", "model_file": "model.onnx"})
    assert (out / "model.onnx").read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no tmp, old or lock left


def test_failure_leaves_the_previous_output_and_no_temp(tmp_path: Path) -> None:
    out = make_artifact(tmp_path / "out", b"old")
    before = sums(out)
    with pytest.raises(RuntimeError), atomic_output_dir(out, overwrite=True) as tmp:
        (tmp / "model.onnx").write_bytes(b"half")
        raise RuntimeError("export crashed")
    assert sums(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_modes_are_0755_and_0644(tmp_path: Path) -> None:
    """Was: artifact directories were created 0700 (mkdtemp's mode)."""
    old = os.umask(0o022)
    try:
        with atomic_output_dir(tmp_path / "out") as tmp:
            (tmp / "sub").mkdir()
            (tmp / "sub" / "model.onnx").write_bytes(b"m")
            fd, name = tempfile.mkstemp(dir=tmp)  # 0600, as mkstemp makes them
            os.close(fd)
    finally:
        os.umask(old)
    out = tmp_path / "out"
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "sub").stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "sub" / "model.onnx").stat().st_mode) == 0o644
    assert stat.S_IMODE((out / Path(name).name).stat().st_mode) == 0o644


# --- errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "no space left"),
        (errno.EACCES, "permission denied"),
        (errno.EROFS, "read-only"),
    ],
)
def test_os_errors_become_one_line_naming_the_output(tmp_path: Path, code: int, words: str) -> None:
    """Was: a traceback for ENOSPC in spiece.model / manifest / TFLite writes."""
    out = tmp_path / "new" / "deeper" / "out"
    with pytest.raises(OutputError) as info, atomic_output_dir(out) as tmp:
        (tmp / "spiece.model").write_bytes(b"x")
        raise OSError(code, os.strerror(code), str(tmp / "spiece.model"))
    msg = str(info.value)
    assert words in msg and str(out) in msg and "\n" not in msg
    assert ".tmp-" not in msg  # never names the temp dir that is gone
    assert not (tmp_path / "new").exists()  # parents it created are removed again


def test_errors_name_the_output_not_the_deleted_temp(tmp_path: Path) -> None:
    from albert_edge.errors import VerificationError

    out = tmp_path / "out"
    with pytest.raises(VerificationError) as info, atomic_output_dir(out) as tmp:
        raise VerificationError(f"{tmp / 'model.onnx'}: disagrees")
    assert str(info.value) == f"{out / 'model.onnx'}: disagrees"


def test_missing_writable_parent_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with (
        pytest.raises(OutputError, match="parent path is a file"),
        atomic_output_dir(blocker / "sub" / "out"),
    ):
        pass


# --- lock ---------------------------------------------------------------------------


def test_second_writer_to_one_output_fails_fast(tmp_path: Path) -> None:
    """Was: two converts into one output both exited 0 with files from both."""
    out = tmp_path / "out"
    with output_lock(out):
        assert lock_path(out).read_text().strip() == str(os.getpid())
        code = (
            "import sys; from pathlib import Path; from albert_edge.io import atomic_output_dir\n"
            "from albert_edge.errors import OutputExistsError\n"
            "try:\n"
            f"    with atomic_output_dir(Path({str(out)!r})): pass\n"
            "except OutputExistsError as e: print(e); sys.exit(3)\n"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert r.returncode == 3, r.stderr
        assert "another albert-edge process" in r.stdout and f"pid {os.getpid()}" in r.stdout
        with atomic_output_dir(tmp_path / "other") as tmp:  # other outputs: unaffected
            (tmp / "f").write_text("x")
    assert not lock_path(out).exists()
    assert not out.exists()


# --- leftovers ----------------------------------------------------------------------


def test_next_run_cleans_leftovers_of_a_killed_run(tmp_path: Path) -> None:
    """Was: SIGKILL left ``.OUT.tmp-*`` and ``.OUT.old-<pid>`` for ever."""
    out = make_artifact(tmp_path / "out")
    pid = dead_pid()
    stale_tmp = tmp_path / f".out.tmp-{pid}-abc"
    stale_tmp.mkdir()
    (stale_tmp / "model.onnx").write_bytes(b"half")
    stale_old = tmp_path / f".out.old-{pid}"
    stale_old.mkdir()
    live = tmp_path / f".out.tmp-{os.getpid()}-live"  # a live run's: never touched
    live.mkdir()
    unrelated = tmp_path / ".other.tmp-1-x"
    unrelated.mkdir()
    cleaned = clean_stale_siblings(out)
    assert sorted(cleaned) == sorted([stale_tmp, stale_old])
    assert live.exists() and unrelated.exists() and out.exists()


def test_stale_lock_file_is_removed_but_a_held_one_is_not(tmp_path: Path) -> None:
    """Was: a kill -9 during convert left ``.OUT.lock`` behind for ever (found by
    benchmarks/fault_injection.py); the kernel drops the flock, the file stayed."""
    out = tmp_path / "out"
    lock_path(out).write_text("12345\n")  # what a killed writer leaves
    assert clean_stale_siblings(out) == [lock_path(out)]
    assert not lock_path(out).exists()
    with output_lock(out):  # a live writer's lock is never touched
        code = (
            "from pathlib import Path; from albert_edge.io import clean_stale_siblings\n"
            f"print(clean_stale_siblings(Path({str(out)!r})))\n"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr
        assert lock_path(out).exists()
    assert not lock_path(out).exists()


def test_killed_between_renames_restores_the_old_artifact(tmp_path: Path) -> None:
    out = tmp_path / "out"
    old = make_artifact(tmp_path / f".out.old-{dead_pid()}", b"old")
    clean_stale_siblings(out)
    assert (out / "model.onnx").read_bytes() == b"old" and not old.exists()


def test_run_scratch_holds_every_temp_and_is_removed(tmp_path: Path) -> None:
    stale = tmp_path / f"albert-edge-run-{dead_pid()}-x"
    stale.mkdir()
    assert clean_stale_scratch(tmp_path) == [stale]
    with run_scratch() as scratch:
        t = tempfile.mkdtemp(prefix="albert-edge-export-")
        assert Path(t).parent == scratch
        assert os.environ["TMPDIR"] == str(scratch)
    assert not scratch.exists()
    assert tempfile.gettempdir() != str(scratch)


NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")


def test_unwritable_output_is_refused_before_any_work(tmp_path: Path) -> None:
    def as_nobody(code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*NOBODY, sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        )

    probe = as_nobody("import albert_edge.io")
    if "setpriv" in probe.stderr and probe.returncode == 127:
        pytest.skip("setpriv is not available")
    if probe.returncode != 0:  # e.g. the clone sits under a 0700 directory (mktemp -d, ~)
        pytest.skip("uid 65534 cannot import albert_edge from this clone: " + probe.stderr[-200:])
    r = as_nobody(
        "from pathlib import Path; from albert_edge.io import check_output\n"
        f"check_output(Path({str(tmp_path / 'sub' / 'out')!r}), overwrite=False)"
    )
    assert r.returncode != 0 and "OutputError" in r.stderr and "permission denied" in r.stderr
