"""Writing outputs so that a failure never costs the user a file.

The promises, and how each is kept:

* **No lost input.** ``--overwrite`` replaces only a directory that albert-edge wrote
  itself: one whose ``manifest.json`` is valid and lists every file the directory holds
  (:func:`is_albert_edge_artifact`). A checkpoint, a home directory, or an artifact a user
  dropped an extra file into is refused, and the output may never be an input.
* **No half-written output.** Everything is written into a sibling temp directory
  (``.OUT.tmp-<pid>-*``), fsynced, then swapped in with one ``renameat2(RENAME_EXCHANGE)``
  (or two renames where the filesystem lacks it); only then is the old artifact removed.
  Any failure removes the temp directory and leaves ``OUT`` as it was.
* **One writer per output.** ``.OUT.lock`` beside the output is ``flock``-ed for the
  whole write; a second writer fails at once. The kernel drops the lock when a process
  dies, so a ``kill -9`` never leaves a lock that blocks the next run.
* **Leftovers of killed runs are cleaned by the next run.** Temp names carry the pid;
  the next writer to the same output removes those of dead pids (and restores an old
  artifact if a run died between the two renames of the fallback swap). Framework temp
  files go under one per-run scratch directory (:func:`run_scratch`) that the next run
  removes when its owner is dead.
* **One-line errors.** ``OSError`` (EACCES, ENOSPC, EROFS, ...) becomes an
  :class:`OutputError` naming the output and the fix.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from albert_edge.errors import AlbertEdgeError, OutputError, OutputExistsError

_RUN_PREFIX = "albert-edge-run-"


# --- errors --------------------------------------------------------------------------


def describe_os_error(exc: OSError, path: Path, action: str = "write") -> OutputError:
    """One line for an ``OSError`` met while writing ``path``: what failed and the fix."""
    code = exc.errno
    if code == errno.ENOSPC or code == errno.EDQUOT:
        why, fix = "no space left on device", "free disk space or choose another -o"
    elif code in (errno.EACCES, errno.EPERM):
        why, fix = "permission denied", "choose a directory you can write to as -o"
    elif code == errno.EROFS:
        why, fix = "read-only file system", "choose a writable location as -o"
    elif code == errno.ENOENT:
        why, fix = "a parent directory does not exist", "create it or choose another -o"
    elif code == errno.ENOTDIR:
        why, fix = "a parent path is a file, not a directory", "choose another -o"
    else:
        why, fix = exc.strerror or type(exc).__name__, "choose another -o"
    return OutputError(f"{path}: cannot {action} ({why}); {fix}; nothing was written")


# --- guards --------------------------------------------------------------------------


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
    except ValueError:
        return False
    return True


def is_albert_edge_artifact(path: Path) -> bool:
    """True when ``path`` holds exactly what albert-edge wrote there, nothing else.

    The test is the manifest: valid, and every file in the directory (walked, not taken
    from the manifest) is a file the manifest records. A checkpoint, or an artifact the
    user added a file to, fails it, so ``--overwrite`` cannot delete their data.
    """
    from albert_edge.manifest import MANIFEST_NAME, load_manifest

    if not path.is_dir() or path.is_symlink():
        return False
    try:
        manifest = load_manifest(path)
    except AlbertEdgeError:
        return False
    recorded = set(manifest.recorded_files()) | {MANIFEST_NAME}
    for root, dirs, files in os.walk(path):
        for name in files + [d for d in dirs if Path(root, d).is_symlink()]:
            rel = Path(root, name).relative_to(path).as_posix()
            if rel not in recorded:
                return False
    return True


@dataclass(frozen=True)
class OutputKind:
    """What a command writes, and how to recognise a previous output of its own.

    ``--overwrite`` replaces only a directory for which :attr:`is_own` is true, so each
    command says what "albert-edge wrote this" means for its output: ``convert`` and
    ``quantize`` a manifest listing every file (:data:`ARTIFACT`); ``train`` its own record
    (``albert_edge.train``). A training output is then no artifact to ``convert
    --overwrite`` (it holds a checkpoint), and an artifact no training output.
    """

    name: str  # "artifact", "training output": used in messages
    is_own: Callable[[Path], bool]
    hint: str  # why a directory failed is_own, for the refusal


ARTIFACT = OutputKind("artifact", is_albert_edge_artifact, "no valid manifest.json listing them")


def check_output(
    out: Path, *, overwrite: bool, inputs: Iterable[Path] = (), kind: OutputKind = ARTIFACT
) -> None:
    """Refuse an output that would destroy something: an input, or what ``kind`` did not
    write.

    Called before any work, so a refusal costs nothing and changes no byte.
    """
    try:
        _check_output(out, overwrite=overwrite, inputs=inputs, kind=kind)
    except OSError as exc:  # e.g. EACCES on stat: a directory on the way is closed to us
        raise describe_os_error(exc, out) from None


def _check_output(out: Path, *, overwrite: bool, inputs: Iterable[Path], kind: OutputKind) -> None:
    resolved = out.resolve()
    for src in inputs:
        src = Path(src).resolve()
        if resolved == src or _inside(src, resolved):
            raise OutputExistsError(
                f"{out}: the output would replace the input {src}; choose another -o"
            )
    if not (out.exists() or out.is_symlink()):
        _check_writable(out)
        return
    if not overwrite:
        raise OutputExistsError(f"{out}: output exists; choose another -o or pass --overwrite")
    if out.is_symlink() or not out.is_dir():
        raise OutputExistsError(
            f"{out}: exists and is not an albert-edge {kind.name} directory; --overwrite only "
            "replaces those; choose another -o"
        )
    if any(out.iterdir()) and not kind.is_own(out):
        raise OutputExistsError(
            f"{out}: holds files albert-edge did not write ({kind.hint}); --overwrite only "
            f"replaces a previous albert-edge {kind.name}; choose another -o"
        )
    _check_writable(out)


def _check_writable(out: Path) -> None:
    """Fail before any work when the output's directory cannot be written."""
    anc = out.parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise describe_os_error(OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)), out)
    if not os.access(anc, os.W_OK | os.X_OK):
        try:
            read_only = bool(os.statvfs(anc).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        code = errno.EROFS if read_only else errno.EACCES
        raise describe_os_error(OSError(code, os.strerror(code)), out)


# --- lock ----------------------------------------------------------------------------


def lock_path(out: Path) -> Path:
    return out.with_name(f".{out.name}.lock")


@contextlib.contextmanager
def output_lock(out: Path) -> Iterator[None]:
    """Hold ``.OUT.lock`` (``flock``, non-blocking) for the duration of a write.

    The lock file is removed on release; a holder re-checks after locking that the file
    it locked is still the one at the path, so an unlink by a finishing writer never
    lets two writers in at once.
    """
    path = lock_path(out)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise describe_os_error(exc, out, "lock the output") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            with contextlib.suppress(OSError, ValueError):
                holder = f" (pid {int(os.pread(fd, 32, 0).split()[0])})"
            os.close(fd)
            raise OutputExistsError(
                f"{out}: another albert-edge process{holder} is writing this output; "
                "wait for it or choose another -o"
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the previous holder unlinked it between our open and flock
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


# --- leftovers of killed runs ----------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _clean_stale_lock(out: Path) -> list[Path]:
    """Remove ``.OUT.lock`` when nobody holds it (a ``kill -9`` leaves the file; the kernel
    has already dropped the lock). Unlinked while we hold it, so :func:`output_lock`'s
    inode re-check keeps a writer that opened it meanwhile from proceeding on a dead file."""
    path = lock_path(out)
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return []
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return []  # held: a live writer
    try:
        os.unlink(path)
    except OSError:
        return []
    finally:
        os.close(fd)
    return [path]


def clean_stale_siblings(out: Path) -> list[Path]:
    """Remove ``.OUT.tmp-<pid>-*`` / ``.OUT.old-<pid>`` left by dead runs; return them.

    Only names this module creates, and only of pids that no longer run, are touched. If
    a run died between the two renames of the fallback swap (``OUT`` gone, its old copy
    at ``.OUT.old-<pid>``), the old artifact is renamed back instead of deleted.
    """
    if not out.parent.is_dir():
        return []
    pattern = re.compile(rf"^\.{re.escape(out.name)}\.(tmp|old)-(\d+)(-.*)?$")
    cleaned = _clean_stale_lock(out)
    for entry in out.parent.iterdir():
        m = pattern.match(entry.name)
        if not m or _pid_alive(int(m.group(2))):
            continue
        if m.group(1) == "old" and not (out.exists() or out.is_symlink()):
            with contextlib.suppress(OSError):
                os.replace(entry, out)
                cleaned.append(entry)
                continue
        with contextlib.suppress(OSError):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            cleaned.append(entry)
    return cleaned


def clean_stale_scratch(base: str | Path | None = None) -> list[Path]:
    """Remove ``albert-edge-run-<pid>-*`` scratch directories of dead processes."""
    base = Path(base or tempfile.gettempdir())
    cleaned = []
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            m = re.match(rf"^{_RUN_PREFIX}(\d+)-", entry.name)
            if m and not _pid_alive(int(m.group(1))) and entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
                cleaned.append(entry)
    return cleaned


@contextlib.contextmanager
def run_scratch() -> Iterator[Path]:
    """Route every temp file of this run (ours, torch's, ORT's) into one directory.

    ``tempfile`` and child processes (``TMPDIR``) put their files under
    ``/tmp/albert-edge-run-<pid>-*``, removed on every exit path Python sees; a run killed
    with SIGKILL leaves it for the next run, which removes it because its pid is dead.
    """
    clean_stale_scratch()
    base = tempfile.gettempdir()
    scratch = Path(tempfile.mkdtemp(prefix=f"{_RUN_PREFIX}{os.getpid()}-", dir=base))
    saved_env, saved_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = str(scratch)
    try:
        yield scratch
    finally:
        tempfile.tempdir = saved_dir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        shutil.rmtree(scratch, ignore_errors=True)


# --- writing -------------------------------------------------------------------------


def _fsync_tree(root: Path) -> None:
    """Give the finished tree normal modes (0755/0644 under umask 022) and flush it."""
    umask = os.umask(0)
    os.umask(umask)
    for dirpath, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            p = os.path.join(dirpath, name)
            os.chmod(p, 0o666 & ~umask)
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.chmod(dirpath, 0o777 & ~umask)
        _fsync_dir(Path(dirpath))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2``); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    rc = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _made_parents(out: Path) -> list[Path]:
    """Create ``out``'s missing parents; return those created (deepest first)."""
    made = []
    p = out.parent
    while not p.exists():
        made.append(p)
        p = p.parent
    for d in reversed(made):
        d.mkdir()
    return made


@contextlib.contextmanager
def atomic_output_dir(
    out: str | Path,
    *,
    overwrite: bool = False,
    inputs: Iterable[Path] = (),
    kind: OutputKind = ARTIFACT,
) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces ``out`` atomically.

    ``inputs`` are the paths the run reads: the output may not be (or contain) one.
    ``kind`` says which existing directory ``overwrite`` may replace. On any exception the
    temp directory is removed and ``out`` is untouched; ``OSError`` becomes a one-line
    :class:`OutputError`. See the module docstring for the rest.
    """
    out = Path(out)
    inputs = list(inputs)
    check_output(out, overwrite=overwrite, inputs=inputs, kind=kind)
    made: list[Path] = []
    try:
        made = _made_parents(out)
    except OSError as exc:
        raise describe_os_error(exc, out, "create the output's parent directory") from None
    try:
        with output_lock(out):
            clean_stale_siblings(out)
            # re-check under the lock
            check_output(out, overwrite=overwrite, inputs=inputs, kind=kind)
            tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
            try:
                try:
                    yield tmp
                except AlbertEdgeError as exc:
                    # The temp dir is about to vanish: name the output the user asked for.
                    if str(tmp) in str(exc):
                        exc.args = (str(exc).replace(str(tmp), str(out)),)
                    raise
                _fsync_tree(tmp)
                _swap_into_place(tmp, out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)  # gone already after a successful swap
    except BaseException as exc:
        for d in made:
            with contextlib.suppress(OSError):
                d.rmdir()
        if isinstance(exc, OSError):
            raise describe_os_error(exc, out) from None
        raise


def _swap_into_place(tmp: Path, out: Path) -> None:
    if out.exists():
        if _exchange(tmp, out):
            _fsync_dir(out.parent)
            shutil.rmtree(tmp)  # now the old artifact; a kill here leaves .OUT.tmp-<pid>
            return
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
        os.replace(tmp, out)
        _fsync_dir(out.parent)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)
        _fsync_dir(out.parent)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write a single file via temp + fsync + rename (same directory: the rename is atomic)."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-{os.getpid()}-", dir=path.parent)
    except OSError as exc:
        raise describe_os_error(exc, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise describe_os_error(exc, path) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
