"""Output paths in-process (issue 43): ``.``-style names, the working directory replaced,
an output inside an input, and errors a Rust library reports only as text."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from albert_edge.errors import OutputError, OutputExistsError
from albert_edge.io import (
    OutputKind,
    atomic_output_dir,
    check_output,
    named_output,
    os_error_in,
    replaced_cwd,
)

# "ours": a directory holding only the marker this test writes
MARKED = OutputKind("marked output", lambda p: (p / "marker").is_file(), "no marker")


def test_dot_names_resolve_to_the_directory_they_mean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a")
    here = (tmp_path / "a").resolve()
    for given, want in ((".", here), ("./", here), ("..", here.parent), ("b/..", here)):
        assert named_output(given) == want, given
    assert named_output("b") == Path("b")  # every other path as given
    with pytest.raises(OutputExistsError, match="root directory"):
        check_output(Path("/"), overwrite=True)


def test_dot_replaces_the_working_directory_and_the_process_re_enters_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "marker").write_text("old")
    monkeypatch.chdir(out / "sub")
    with atomic_output_dir("..", overwrite=True, kind=MARKED) as tmp:
        (tmp / "marker").write_text("new")
        (tmp / "sub").mkdir()
    assert Path(os.getcwd()) == (out / "sub").resolve()  # the new one, alive
    assert Path("../marker").read_text() == "new"  # relative paths see the new output
    assert replaced_cwd() == out.resolve() and replaced_cwd() is None  # said once
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temp, lock, old
    monkeypatch.chdir(out)
    with atomic_output_dir(".", overwrite=True, kind=MARKED) as tmp:
        (tmp / "marker").write_text("newer")
    assert Path("marker").read_text() == "newer"  # "sub" is gone: the output itself
    assert replaced_cwd() == out.resolve()


def test_an_output_inside_an_input_directory_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "ckpt"
    src.mkdir()
    (src / "config.json").write_text("{}")
    for out, words in (
        (src / "onnx", "is inside the input"),
        (src, "would replace the input"),
        (tmp_path, "would replace the input"),
    ):
        with pytest.raises(OutputExistsError, match=words):
            check_output(out, overwrite=True, inputs=[src, None])
    check_output(tmp_path / "elsewhere", overwrite=False, inputs=[src, None])
    assert sorted(p.name for p in src.iterdir()) == ["config.json"]


class _RustError(Exception):
    """What safetensors raises: no errno, only the text."""


def test_a_rust_libraries_os_error_text_is_the_write_error(tmp_path: Path) -> None:
    exc = _RustError("Error while serializing: I/O error: No space left on device (os error 28)")
    found = os_error_in(exc)
    assert found is not None and found.errno == errno.ENOSPC
    assert os_error_in(ValueError("a shape mismatch")) is None
    assert os_error_in(KeyboardInterrupt()) is None
    with (
        pytest.raises(OutputError, match="no space left on device") as info,
        atomic_output_dir(tmp_path / "out") as tmp,
    ):
        (tmp / "x").write_text("x")
        raise exc
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
