"""One line for a filesystem error: what failed, where (the output's disk or TMPDIR's,
named by its mount point) and the fix; and the refusal of a model file that is missing,
a directory, a FIFO or empty.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from pathlib import Path

from albert_edge.errors import AlbertEdgeError, OutputError
from albert_edge.scratch import RUN_PREFIX


def describe_os_error(exc: OSError, path: Path, action: str = "write") -> OutputError:
    """One line for an ``OSError`` met while writing ``path``: what failed and the fix."""
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT) and _tmpdir_is_the_full_one(exc, path):
        return OutputError(
            f"temporary directory {_tmp_base()} is full (no space left on device; "
            f"albert-edge writes its scratch files there, not into {path}); free space "
            "there or point TMPDIR at a roomier directory; nothing was written"
        )
    if code == errno.ENAMETOOLONG:
        return OutputError(f"{path}: file name too long; choose a shorter -o; nothing was written")
    if code == errno.ENOSPC or code == errno.EDQUOT:
        why = "disk quota exceeded" if code == errno.EDQUOT else "no space left on device"
        where = _mount_point(path.parent)  # the output's own disk, named
        disk = f"the disk mounted at {where}" if where is not None else "its disk"
        fix = f"free space on {disk} or choose an -o on another disk"
        inodes = _few_inodes(where) if code == errno.ENOSPC and where is not None else None
        if inodes is not None:  # df shows room: say what else runs out
            why = f"no space left on device; only {inodes} file entries (inodes) are free there"
            fix = f"remove files on {disk} (df -i {where} counts them) or choose another -o"
    elif code in (errno.EACCES, errno.EPERM):
        why, fix = "permission denied", "choose a directory you can write to as -o"
    elif code == errno.EROFS:
        why, fix = "read-only file system", "choose a writable location as -o"
    elif code == errno.ENOENT:
        why, fix = "a parent directory does not exist", "create it or choose another -o"
    elif code == errno.ENOTDIR:
        why, fix = "a parent path is a file, not a directory", "choose another -o"
    elif code == errno.EFBIG:
        why, fix = _file_size_limit()
    else:
        why, fix = exc.strerror or type(exc).__name__, "choose another -o"
    return OutputError(f"{path}: cannot {action} ({why}); {fix}; nothing was written")


def _few_inodes(mount: Path) -> int | None:
    """The free file entries (inodes) of ``mount`` when bytes are to spare but entries are
    (almost) gone, else ``None``: ``df`` then shows room, and "free space" alone would send
    the user the wrong way. Counted after the run removed its own temp files."""
    try:
        st = os.statvfs(mount)
    except OSError:
        return None
    few = bool(st.f_files) and st.f_favail < 1000 and st.f_bavail * st.f_frsize >= 1 << 20
    return st.f_favail if few else None


def _file_size_limit() -> tuple[str, str]:
    """Why a write met EFBIG, and the fix: this process's file-size limit (``ulimit -f``)
    when one is set, else the file system's largest file (FAT32: 4 GiB)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY:
        return (
            f"a file would pass this shell's file-size limit, ulimit -f, of {soft} bytes",
            "raise it (ulimit -f unlimited) or run from another shell",
        )
    return "a file would pass the largest the file system allows", "choose an -o on another disk"


def require_model_file(path: Path, what: str) -> None:
    """Refuse ``path`` unless it is a non-empty regular file, naming what it is instead
    (missing, a directory, a FIFO or device, zero bytes): "no such file" for a FIFO sends
    a user looking in the wrong place, and an empty file would read as an empty model."""
    if not path.exists():
        raise AlbertEdgeError(f"{path}: no such {what} file")
    if path.is_dir():
        raise AlbertEdgeError(f"{path}: is a directory, not a {what} file")
    if not path.is_file():
        raise AlbertEdgeError(
            f"{path}: not a regular file (a FIFO, socket or device); give the {what} file itself"
        )
    if path.stat().st_size == 0:
        raise AlbertEdgeError(f"{path}: empty file (0 bytes); re-convert the {what} model")


def _tmp_base() -> str:
    """The TMPDIR the user set (the run's scratch directory lives inside it)."""
    scratch = Path(tempfile.gettempdir())
    if scratch.name.startswith(RUN_PREFIX):
        return str(scratch.parent)
    return str(scratch)


def _free_bytes(path: str | Path) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _device(path: Path) -> int | None:
    """The file system (``st_dev``) of ``path``, or of its nearest existing ancestor: a
    failing temp file may already be removed when the error is described."""
    anc = path
    while True:
        try:
            return os.stat(anc).st_dev
        except FileNotFoundError:
            if anc == anc.parent:
                return None
            anc = anc.parent
        except OSError:
            return None


def _mount_point(path: Path) -> Path | None:
    """The mount point of the file system holding ``path`` (or its nearest existing
    ancestor), so a full-disk message names the disk that is full."""
    anc = Path(os.path.abspath(path))
    dev = _device(anc)
    if dev is None:
        return None
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    while anc != anc.parent and _device(anc.parent) == dev:
        anc = anc.parent
    return anc


def _tmpdir_is_the_full_one(exc: OSError, out: Path) -> bool:
    """Whether a full disk is TMPDIR's rather than the output's, so a full TMPDIR
    is not reported as "cannot write -o". Judged by file system, never by path prefix: an
    output on a small disk mounted under /tmp is the output's disk. The file written when
    it failed says it when known; otherwise the file system with (almost) no room left is
    the full one."""
    tmp = Path(_tmp_base())
    dev_tmp, dev_out = _device(tmp), _device(out.parent)
    if dev_tmp is None or dev_tmp == dev_out:
        return False  # one file system: the output's message covers both
    # A copy names both ends (shutil.copyfile: filename = the source, filename2 = the file
    # written): the written one is the one on the full disk, not the scratch directory a
    # file is copied from.
    written = exc.filename2 or exc.filename
    if written:
        return _device(Path(os.fsdecode(written))) == dev_tmp
    anc = out.parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    free_tmp, free_out = _free_bytes(tmp), _free_bytes(anc)
    return free_tmp is not None and free_tmp < 1 << 20 and (free_out or 0) >= 1 << 20


def os_error_in(exc: BaseException) -> OSError | None:
    """The ``OSError`` a Rust library (safetensors, tokenizers) reports only as text,
    ``"... (os error 28)"``: a full disk while writing the output then reads as every
    other write error, not as a traceback."""
    if isinstance(exc, OSError | AlbertEdgeError) or not isinstance(exc, Exception):
        return None
    m = re.search(r"\(os error (\d+)\)", str(exc))
    if m is None:
        return None
    code = int(m.group(1))
    return OSError(code, os.strerror(code))
