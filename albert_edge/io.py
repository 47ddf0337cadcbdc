"""Writing outputs so that a failure never costs the user a file.

The promises, and how each is kept:

* **No lost input.** ``--overwrite`` replaces only a directory that albert-edge wrote
  itself: one whose ``manifest.json`` is valid and lists every file the directory holds
  (:func:`is_albert_edge_artifact`). A checkpoint, a home directory, or an artifact a user
  dropped an extra file into is refused, and the output may never be, hold, or lie
  inside an input (a directory written into an artifact breaks its manifest).
* **Outputs are named directories.** ``-o .``, ``..`` and ``sub/..`` resolve to the
  directory they mean (:func:`named_output`); when that is the working directory, the
  swap replaces it and the process re-enters the new one. The root directory, a mount
  point and a symbolic link are refused: none can be swapped.
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
  :class:`OutputError` naming the output and the fix (:mod:`albert_edge.fs_errors`).

Stop signals live in :mod:`albert_edge.signals`, the run's scratch directory in
:mod:`albert_edge.scratch`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from albert_edge.errors import AlbertEdgeError, OutputError, OutputExistsError

# hold_stop_signals ... signals_interrupt, require_model_file, run_scratch: public names
# that moved to their own modules and are still imported from here by their users.
from albert_edge.fs_errors import describe_os_error, os_error_in, require_model_file
from albert_edge.scratch import pid_alive, run_scratch
from albert_edge.signals import (
    hold_stop_signals,
    release_stop_signals,
    report_stopped,
    signals_held,
    signals_interrupt,
)

__all__ = [
    "ARTIFACT",
    "OutputKind",
    "artifact_foreign_reason",
    "atomic_output_dir",
    "atomic_write_bytes",
    "check_name_fits",
    "check_output",
    "check_output_file",
    "clean_stale_siblings",
    "describe_os_error",
    "hold_stop_signals",
    "is_albert_edge_artifact",
    "lock_path",
    "name_max",
    "named_output",
    "os_error_in",
    "output_arg",
    "output_lock",
    "portable_command",
    "preflight_output",
    "release_stop_signals",
    "replaced_cwd",
    "report_stopped",
    "require_model_file",
    "run_scratch",
    "shown_path",
    "sibling_stem",
    "signals_held",
    "signals_interrupt",
]

# --- names ---------------------------------------------------------------------------

# What albert-edge adds to an output's name for its siblings: "." + ".tmp-" + a pid (up to
# 7 digits) + "-" + mkdtemp's 8 characters, with room to spare.
_SIBLING_ROOM = 32


def name_max(directory: Path) -> int:
    """The longest file name (bytes) the file system of ``directory`` (or of its nearest
    existing ancestor) allows."""
    anc = directory
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    try:
        return int(os.pathconf(anc, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def sibling_stem(out: Path) -> str:
    """The name the temp, old and lock siblings of ``out`` are built from: ``out.name``
    itself, or, when that plus the sibling suffixes would pass the file-name limit, its
    head and a hash of the whole name. A legal 240-byte output name then works instead of
    failing after the model loaded (issue 26)."""
    raw = os.fsencode(out.name)
    limit = name_max(out.parent) - _SIBLING_ROOM
    if len(raw) <= limit:
        return out.name
    digest = hashlib.sha256(raw).hexdigest()[:12]
    head = raw[: max(1, limit - len(digest) - 1)].decode("utf-8", "ignore")
    return f"{head}~{digest}"


def check_name_fits(out: Path, flag: str = "-o", suffix: str = "") -> None:
    """Refuse, before any work, an output path the file system cannot hold: a name over
    NAME_MAX bytes (with ``suffix``, a companion file named after it, e.g. bench's row
    log) or a path over PATH_MAX."""
    limit = name_max(out.parent)
    for i, part in enumerate(out.parts):
        n = len(os.fsencode(part))
        extra = len(suffix) if i == len(out.parts) - 1 else 0
        if n + extra > limit:
            also = f" + {extra} for its {suffix} companion" if extra else ""
            raise OutputError(
                f"{_clip(part)}: file name too long ({n} bytes{also}; this file system "
                f"allows {limit}); choose a shorter {flag}; nothing was written"
            )
    total = len(os.fsencode(os.path.abspath(out)))
    if total >= 4096:
        raise OutputError(
            f"{_clip(str(out))}: path too long ({total} bytes; Linux allows 4095); "
            f"choose a shorter {flag}; nothing was written"
        )


def _clip(text: str) -> str:
    return text if len(text) <= 80 else f"{text[:60]}...{text[-12:]}"


def named_output(out: str | Path) -> Path:
    """``out`` with a last component that names it: ``.``, ``./``, ``..`` and ``sub/..``
    are resolved to the directory they mean, since the temp, old and lock siblings are
    named after the output's last component.
    Every other path is returned as given, a symlink as a symlink (the checks refuse it).
    Where the working directory is gone, the path is returned as given: the CLI names that
    cause itself."""
    path = Path(out)
    if path.name in ("", ".", ".."):
        with contextlib.suppress(OSError):
            return path.resolve()
    return path


def output_arg(text: str) -> Path:
    """The argparse ``type`` of every ``-o``: :func:`named_output` of the text. An empty
    text (``-o "$OUT"`` with ``OUT`` unset) is refused, never taken as the current
    directory."""
    if not text.strip():
        import argparse

        raise argparse.ArgumentTypeError(
            "empty path (an unset shell variable?); name the directory to write"
        )
    return named_output(text)


def _refuse_root(out: Path, flag: str = "-o") -> None:
    if out.is_absolute() and out == out.parent:
        raise OutputExistsError(
            f"{out}: the root directory cannot be an output (albert-edge writes a new "
            f"directory and swaps it in); choose a new directory as {flag}"
        )


def preflight_output(out: Path, *, overwrite: bool, flag: str = "-o") -> None:
    """What the CLI checks of an output before anything loads (issue 26: an existing output
    was refused only after a 12 s model load): the name fits, and without ``overwrite``
    nothing is there. :func:`check_output` still runs the full checks before writing."""
    out = named_output(out)
    _refuse_root(out, flag)
    check_name_fits(out, flag)
    try:
        there = out.exists() or out.is_symlink()
    except OSError as exc:
        raise describe_os_error(exc, out) from None
    if there and not overwrite:
        raise OutputExistsError(f"{out}: output exists; choose another -o or pass --overwrite")


# --- guards --------------------------------------------------------------------------


def shown_path(path: str | Path, base: str | Path) -> str:
    """``path`` as a record or a title may show it: relative to ``base`` (an output's
    parent directory, the current directory) when it lies inside, else its name alone, so
    that what albert-edge writes or prints never names a directory of the machine it ran
    on (``/home/alice/...``, a CI runner's work dir)."""
    p = Path(os.path.abspath(Path(path).expanduser()))
    b = Path(os.path.abspath(Path(base).expanduser()))
    try:
        rel = p.relative_to(b)
    except ValueError:
        return p.name or str(path)
    return str(rel) if str(rel) != "." else "."


def portable_command(argv: list[str], out_flags: tuple[str, ...] = ("-o", "--out")) -> list[str]:
    """``argv`` with every path in it shown relative to the output's parent directory (or
    by its name where it lies elsewhere): the command a record keeps, run again from the
    directory that holds the output. A token is a path when it names something that
    exists, is the output, or is absolute; ``--flag=PATH`` is rewritten alike."""
    out = None
    for i, tok in enumerate(argv):
        if tok in out_flags and i + 1 < len(argv):
            out = argv[i + 1]
        for flag in out_flags:
            if flag.startswith("--") and tok.startswith(flag + "="):
                out = tok.split("=", 1)[1]
    base = Path(os.path.abspath(out)).parent if out else Path.cwd()

    def one(tok: str) -> str:
        if tok.startswith("-"):
            flag, eq, value = tok.partition("=")
            return f"{flag}={one(value)}" if eq and flag.startswith("--") and value else tok
        if not tok or "\n" in tok or tok.lstrip().startswith(("{", "[")):
            return tok  # JSON (--config) and the like: never a path
        try:
            is_path = tok == out or tok.startswith(("/", "~")) or Path(tok).exists()
        except (OSError, ValueError):
            is_path = False
        return shown_path(tok, base) if is_path else tok

    return [one(tok) for tok in argv]


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
    except ValueError:
        return False
    return True


def is_albert_edge_artifact(path: Path) -> bool:
    """True when ``path`` holds exactly what albert-edge wrote there, nothing else.

    The test is the manifest: current and sealed, and every file in the directory
    (walked, not taken from the manifest) is a file the manifest records. A checkpoint, a
    directory with a manifest someone else wrote (``{"model_file": "data.csv"}``), or an
    artifact the user added a file to fails it, so ``--overwrite`` cannot delete their data.
    """
    return artifact_foreign_reason(path) is None


def artifact_foreign_reason(path: Path) -> str | None:
    """Why ``path`` is not an artifact albert-edge wrote and sealed, or ``None`` if it is."""
    from albert_edge.manifest import foreign_reason, load_manifest, unlisted_files

    if not path.is_dir() or path.is_symlink():
        return "not a directory"
    try:
        manifest = load_manifest(path)
    except AlbertEdgeError as exc:
        return str(exc).split(": ", 1)[-1]
    reason = foreign_reason(manifest)
    if reason is None:
        extra = unlisted_files(path, manifest)
        if extra:
            reason = f"{extra[0]} is not listed in its manifest.json"
    return reason


@dataclass(frozen=True)
class OutputKind:
    """What a command writes, and how to recognise a previous output of its own.

    ``--overwrite`` replaces only a directory for which :attr:`is_own` is true, so each
    command says what "albert-edge wrote this" means for its output: ``convert`` and
    ``quantize`` a manifest listing every file (:data:`ARTIFACT`); ``train``, ``depth``
    and ``bench --recommend --work-dir`` an intact ``seal.json`` of their kind
    (:meth:`albert_edge.sealed.EvidenceKind.output_kind`). A training output is then no artifact to ``convert
    --overwrite`` (it holds a checkpoint), and an artifact no training output.
    """

    name: str  # "artifact", "training output": used in messages
    is_own: Callable[[Path], bool]
    hint: str  # why a directory failed is_own, for the refusal
    why: Callable[[Path], str | None] | None = None  # the specific reason, when known


ARTIFACT = OutputKind(
    "artifact",
    is_albert_edge_artifact,
    "no valid manifest.json listing them",
    artifact_foreign_reason,
)


def check_output(
    out: Path,
    *,
    overwrite: bool,
    inputs: Iterable[Path | str | None] = (),
    kind: OutputKind = ARTIFACT,
) -> None:
    """Refuse an output that would destroy something: an input (the output is it, holds
    it, or lies inside an input directory: a new directory inside an artifact is a file
    its manifest does not list, and ``verify`` then fails it), or what ``kind`` did not
    write. ``None`` inputs (a default not given) are skipped.

    Called before any work, so a refusal costs nothing and changes no byte.
    """
    out = named_output(out)
    _refuse_root(out)
    try:
        _check_output(out, overwrite=overwrite, inputs=inputs, kind=kind)
    except OSError as exc:  # e.g. EACCES on stat: a directory on the way is closed to us
        raise describe_os_error(exc, out) from None


def _check_output(
    out: Path, *, overwrite: bool, inputs: Iterable[Path | str | None], kind: OutputKind
) -> None:
    resolved = out.resolve()
    for given in inputs:
        if given is None:
            continue
        src = Path(given).resolve()
        if resolved == src or _inside(src, resolved):
            raise OutputExistsError(
                f"{out}: the output would replace the input {src}; choose another -o"
            )
        if _inside(resolved, src):
            raise OutputExistsError(
                f"{out}: is inside the input {src}; albert-edge never writes into an input; "
                "choose an -o outside it"
            )
    if not (out.exists() or out.is_symlink()):
        _check_writable(out)
        return
    if not overwrite:
        raise OutputExistsError(f"{out}: output exists; choose another -o or pass --overwrite")
    if out.is_symlink():
        raise OutputExistsError(
            f"{out}: is a symbolic link (to {os.readlink(out)}), not an albert-edge "
            f"{kind.name} directory; --overwrite never replaces a link or what it points to; "
            "give the directory itself as -o"
        )
    if not out.is_dir():
        raise OutputExistsError(
            f"{out}: exists and is not an albert-edge {kind.name} directory; --overwrite only "
            "replaces those; choose another -o"
        )
    if os.path.ismount(out):  # the swap would end in EBUSY, after all the work
        raise OutputExistsError(
            f"{out}: is a mount point, which cannot be replaced (albert-edge writes a new "
            f"directory beside the output and swaps it in); write into a directory inside "
            f"it, e.g. -o {out / 'model'}"
        )
    if any(out.iterdir()) and not kind.is_own(out):
        hint = (kind.why(out) if kind.why else None) or kind.hint
        raise OutputExistsError(
            f"{out}: holds files albert-edge did not write ({hint}); --overwrite only "
            f"replaces a previous albert-edge {kind.name}; choose another -o"
        )
    _check_writable(out)


def check_output_file(
    out: Path,
    *,
    inputs: Iterable[Path | str | None],
    flag: str,
    is_own: Callable[[Path], bool] | None = None,
) -> None:
    """Refuse, before any work, a single-file output (``bench --json``, ``--markdown``,
    ``--plot``) that is a directory, an input, or inside an input directory: a report
    written into an artifact, a checkpoint or a sealed search would replace a file of it or
    break its seal (the rule of :func:`check_output`, for files). With ``is_own``, an
    existing file is replaced only when ``is_own`` recognises it as one albert-edge wrote
    (a previous report of the same kind), never a user's file of the same name."""
    try:
        if out.is_dir():
            raise OutputExistsError(f"{out}: is a directory; {flag} names a file to write")
        if is_own is not None and (out.is_symlink() or out.exists()) and not _own_file(out, is_own):
            raise OutputExistsError(
                f"{out}: exists and is not a report albert-edge wrote; albert-edge never "
                f"replaces a user's file; move it away or choose another {flag}"
            )
        resolved = out.resolve()
        for src in inputs:
            if src is None:
                continue
            path = Path(src).resolve()
            if resolved == path or _inside(resolved, path):
                where = "is" if resolved == path else "is inside"
                raise OutputExistsError(
                    f"{out}: {where} the input {src}; albert-edge never writes into an input; "
                    f"choose another {flag}"
                )
    except OSError as exc:
        raise describe_os_error(exc, out) from None


def _own_file(out: Path, is_own: Callable[[Path], bool]) -> bool:
    """A regular file (not a link) that ``is_own`` recognises; unreadable counts as not."""
    if out.is_symlink() or not out.is_file():
        return False
    try:
        return bool(is_own(out))
    except (OSError, ValueError):
        return False


def _check_writable(out: Path) -> None:
    """Fail before any work when the output's directory cannot be written."""
    anc = out.parent
    while not anc.exists() and anc != anc.parent:
        if anc.is_symlink():  # mkdir would say "File exists" of a name that leads nowhere
            raise OutputError(
                f"{out}: {anc} is a symbolic link to {os.readlink(anc)}, which does not "
                "exist; create its target or choose another -o; nothing was written"
            )
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
    return out.with_name(f".{sibling_stem(out)}.lock")


@contextlib.contextmanager
def output_lock(out: Path) -> Iterator[None]:
    """Hold ``.OUT.lock`` (``flock``, non-blocking) for the duration of a write.

    The lock file is removed on release; a holder re-checks after locking that the file
    it locked is still the one at the path, so an unlink by a finishing writer never
    lets two writers in at once.
    """
    path = lock_path(out)
    fd = -1
    try:
        with signals_held():  # a stop signal now would leave the lock file behind
            fd = _acquire_lock(path, out)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(path)
            os.close(fd)


def _acquire_lock(path: Path, out: Path) -> int:
    """Open and ``flock`` ``path``; the locked descriptor, or a one-line refusal."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise describe_os_error(exc, out, "lock the output") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            # The holder writes its pid just after it locks: it may not be there yet.
            with contextlib.suppress(OSError, ValueError, IndexError):
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
            return fd
        os.close(fd)  # the previous holder unlinked it between our open and flock


# --- leftovers of killed runs ----------------------------------------------------------


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
    pattern = re.compile(rf"^\.{re.escape(sibling_stem(out))}\.(tmp|old)-(\d+)(-.*)?$")
    cleaned = _clean_stale_lock(out)
    for entry in out.parent.iterdir():
        m = pattern.match(entry.name)
        if not m or pid_alive(int(m.group(2))):
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
    out = named_output(out)
    inputs = list(inputs)
    check_output(out, overwrite=overwrite, inputs=inputs, kind=kind)
    made: list[Path] = []
    try:
        with signals_held():
            try:
                made = _made_parents(out)
            except OSError as exc:
                raise describe_os_error(exc, out, "create the output's parent directory") from None
        with output_lock(out):
            clean_stale_siblings(out)
            # re-check under the lock
            check_output(out, overwrite=overwrite, inputs=inputs, kind=kind)
            stem = sibling_stem(out)
            tmp: Path | None = None
            try:
                with signals_held():  # a stop signal now would leave the temp dir behind
                    tmp = Path(
                        tempfile.mkdtemp(prefix=f".{stem}.tmp-{os.getpid()}-", dir=out.parent)
                    )
                try:
                    yield tmp
                except AlbertEdgeError as exc:
                    # The temp dir is about to vanish: name the output the user asked for.
                    if str(tmp) in str(exc):
                        exc.args = (str(exc).replace(str(tmp), str(out)),)
                    raise
                _fsync_tree(tmp)
                with signals_held():  # the swap's renames are one step, never half done
                    _swap_into_place(tmp, out)
            finally:
                if tmp is not None:  # gone already after a successful swap
                    shutil.rmtree(tmp, ignore_errors=True)
    except BaseException as exc:
        for d in made:
            with contextlib.suppress(OSError):
                d.rmdir()
        if isinstance(exc, OSError):
            raise describe_os_error(exc, out) from None
        embedded = os_error_in(exc)
        if embedded is not None:
            raise describe_os_error(embedded, out) from None
        raise


# The directory the last swap replaced while it was this process's working directory (or
# held it): the CLI tells the user that their shell still sits in the old, deleted one.
_replaced: dict[str, Path] = {}


def replaced_cwd() -> Path | None:
    """The output that replaced this process's working directory (``-o .``) since the
    last call, if any (each call reports a replacement once)."""
    return _replaced.pop("cwd", None)


def _cwd_within(out: Path) -> str | None:
    """This process's working directory when it is ``out`` or inside it, else ``None``."""
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    with contextlib.suppress(OSError):
        if _inside(Path(cwd), out.resolve()):
            return cwd
    return None


def _return_to(cwd: str | None, out: Path) -> None:
    """After a swap that replaced the working directory: enter the same path again, now the
    new output (or the output itself where that path is gone), so the rest of the run and
    relative paths see a live directory, not the removed old one."""
    if cwd is None:
        return
    _replaced["cwd"] = out
    for where in (cwd, str(out)):
        with contextlib.suppress(OSError):
            os.chdir(where)
            return


def _swap_into_place(tmp: Path, out: Path) -> None:
    cwd = _cwd_within(out)
    if out.exists():
        if _exchange(tmp, out):
            _fsync_dir(out.parent)
            _return_to(cwd, out)
            shutil.rmtree(tmp)  # now the old artifact; a kill here leaves .OUT.tmp-<pid>
            return
        old = out.with_name(f".{sibling_stem(out)}.old-{os.getpid()}")
        os.replace(out, old)
        os.replace(tmp, out)
        _fsync_dir(out.parent)
        _return_to(cwd, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)
        _fsync_dir(out.parent)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write a single file via temp + fsync + rename (same directory: the rename is atomic)."""
    path = Path(path)
    try:
        prefix = f".{sibling_stem(path)}.tmp-{os.getpid()}-"
        fd, tmp = tempfile.mkstemp(prefix=prefix, dir=path.parent)
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
