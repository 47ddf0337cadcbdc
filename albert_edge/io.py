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
  :class:`OutputError` naming the output and the fix.
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
import signal
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError, Interrupted, OutputError, OutputExistsError

_RUN_PREFIX = "albert-edge-run-"


# --- errors --------------------------------------------------------------------------


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
    if scratch.name.startswith(_RUN_PREFIX):
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
    """Whether a full disk is TMPDIR's rather than the output's (issue 26: a full TMPDIR
    was reported as "cannot write -o"). Judged by file system, never by path prefix: an
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


# --- signals -------------------------------------------------------------------------

# A stop signal (SIGINT, SIGTERM, SIGHUP) that arrives while a temp directory or lock is
# being created is held until the name is under a ``finally`` that removes it: otherwise a
# signal between ``mkdir`` and ``try:`` leaves the name behind (issue 26: a SIGTERM sent
# as the lock appeared left ``.OUT.tmp-<pid>-*``). The CLI's handlers call
# :func:`stop_or_defer`; library callers keep Python's own SIGINT behaviour.
_held = {"depth": 0, "pending": 0, "startup": 0, "recheck": 0}
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# The handlers that were in place before :func:`hold_stop_signals` (restored on exit).
_saved: dict[int, object] = {}
# How soon a signal that arrived mid-import is looked at again (seconds).
_IMPORT_RECHECK_S = 0.02


def stop_or_defer(signum: int) -> None:
    """The stop signals' handler body: raise :class:`Interrupted` now, or, inside
    :func:`signals_held`, when the held section ends."""
    if _held["depth"]:
        _held["pending"] = _held["pending"] or signum
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):  # one message, one unwinding
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


def _importing(frame: object) -> bool:
    """Whether the interrupted code runs inside an ``import`` (the import machinery's
    frames are on the stack). An exception raised there leaves a half-initialised module
    in ``sys.modules``: torch, half imported, then fails the clean-up's own imports with
    errors that name neither the signal nor the run (a RecursionError was seen)."""
    f: Any = frame
    while f is not None:
        if f.f_code.co_filename.startswith("<frozen importlib"):
            return True
        f = f.f_back
    return False


def _resend(signum: int) -> None:
    _held["recheck"] = 0
    os.kill(os.getpid(), signum)


def _on_stop(signum: int, frame: object) -> None:
    """The stop handler: mid-import, the signal is kept and looked at again shortly
    (re-sent to this process until the import has finished); otherwise
    :func:`stop_or_defer`."""
    if not _held["depth"] and _importing(frame):
        _held["pending"] = _held["pending"] or signum
        if not _held["recheck"]:  # one re-send in flight at a time
            import threading

            _held["recheck"] = 1
            timer = threading.Timer(_IMPORT_RECHECK_S, _resend, (signum,))
            timer.daemon = True
            timer.start()
        return
    if _held["pending"] and not _held["depth"]:
        signum, _held["pending"] = _held["pending"], 0
    stop_or_defer(signum)


def hold_stop_signals() -> None:
    """First thing an entry point does (before its own imports): SIGINT, SIGTERM and SIGHUP
    get the stop handler and are held until :func:`release_stop_signals`, so that a signal
    during start-up ends the run with the same one line and exit status as one during the
    work, never half-way through an import. A signal the caller ignores (``nohup``, a
    background job's SIGINT) stays ignored. Idempotent."""
    if _held["startup"]:
        return
    for sig in STOP_SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread
            previous = signal.getsignal(sig)
            if previous != signal.SIG_IGN and previous is not _on_stop:
                _saved[int(sig)] = previous
                signal.signal(sig, _on_stop)
    _held["startup"] = 1
    _held["depth"] += 1


def release_stop_signals() -> None:
    """The end of start-up: from here a stop signal raises :class:`Interrupted` where the
    run is; one that came during start-up is raised now (call it inside the ``try`` that
    reports it)."""
    if _held["startup"] != 1:
        return
    _held["startup"] = 2
    _held["depth"] -= 1
    if not _held["depth"] and _held["pending"]:
        signum, _held["pending"] = _held["pending"], 0
        stop_or_defer(signum)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold stop signals for a short section (creating a name and handing it to its
    clean-up); one that came meanwhile is raised at the end, where the caller's ``try``
    already covers the name."""
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
        if not _held["depth"] and _held["pending"]:
            signum, _held["pending"] = _held["pending"], 0
            stop_or_defer(signum)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP stop a run as Ctrl-C does (issue 26): all three raise
    :class:`Interrupted` (a ``KeyboardInterrupt``), so every ``finally`` removes its temp
    directory, lock and scratch and kills bench children; one that arrives while such a
    name is being created waits until its clean-up covers it (:func:`signals_held`), and
    one that arrives mid-import waits until the import is done. A signal the caller
    ignores stays ignored; repeated SIGTERM/SIGHUP during the clean-up are ignored. The
    CLI and ``python -m albert_edge.train`` both run under it.

    Signals are held from entry (or from an earlier :func:`hold_stop_signals`) until the
    body calls :func:`release_stop_signals` inside the ``try`` that reports them."""
    hold_stop_signals()
    try:
        yield
    finally:
        if _held["startup"] == 1:  # never released: the body failed before its try
            _held["depth"] -= 1
        _held["startup"] = 0
        _held["pending"] = 0
        for sig, previous in _saved.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(sig, previous)  # type: ignore[arg-type]
        _saved.clear()


def report_stopped(prog: str, exc: KeyboardInterrupt) -> int:
    """The one line a stopped run prints (``prog``: ``albert-edge convert``, ...) and its
    exit status, 128 + the signal: the same for the CLI and ``python -m albert_edge.train``."""
    import sys

    signum = exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
    with contextlib.suppress(OSError):  # SIGHUP: the terminal may be gone
        print(
            f"{prog}: stopped by {signal.Signals(signum).name}; temp files and lock removed, "
            "nothing half-written (the output is as it was, or complete)",
            file=sys.stderr,
        )
    return 128 + signum


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
    pattern = re.compile(rf"^\.{re.escape(sibling_stem(out))}\.(tmp|old)-(\d+)(-.*)?$")
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
    saved_env, saved_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    scratch: Path | None = None
    try:
        with signals_held():  # the name is ours to remove from the moment it exists
            scratch = _make_scratch(base)
            os.environ["TMPDIR"] = str(scratch)
            tempfile.tempdir = str(scratch)
        yield scratch
    finally:
        tempfile.tempdir = saved_dir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _make_scratch(base: str) -> Path:
    try:
        return Path(tempfile.mkdtemp(prefix=f"{_RUN_PREFIX}{os.getpid()}-", dir=base))
    except OSError as exc:  # TMPDIR full, read-only or closed: say so, not "-o"
        why = exc.strerror or type(exc).__name__
        raise OutputError(
            f"temporary directory {base}: cannot create albert-edge's scratch directory "
            f"({why}); free space there or point TMPDIR at a writable directory"
        ) from None


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
