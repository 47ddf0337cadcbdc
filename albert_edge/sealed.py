"""Sealed evidence directories: outputs that later work trusts, checked before it does.

A depth search (its heads and held-out evidence), a truncated checkpoint, a training
output and a ``bench --recommend`` work directory are read again later: ``convert
--depth`` ships a search's head and quotes its accuracy, ``depth search`` starts from a
training output's PABEE exit heads. An edited file there would ship silently under a
sealed artifact, so each such directory is sealed the way an artifact is, by the same
writer and reader (:mod:`albert_edge.manifest`), under another name (:data:`SEAL_NAME`,
so no evidence directory ever reads as an artifact):

* ``seal.json`` records the sha256 of every file in the directory (walked, not listed)
  and seals itself (``manifest_sha256``);
* it names what the directory is (``evidence``: its :class:`EvidenceKind`) and what it
  was made from (``made_from``): the identity of the checkpoint (a content hash of its
  config and weights, :func:`checkpoint_identity`) and the sha256 of each data file.

A reader calls :func:`open_sealed` first (every file present, unchanged, nothing added)
and :func:`check_made_from` before any expensive work; each refusal is one line naming
the file and how to make the directory again. A directory without ``seal.json`` (what
earlier releases wrote) is refused the same way: nothing can be said about its bytes.

A seal is a checksum, not a signature: it catches a changed, truncated, swapped or added
file and a search of another checkpoint, not someone who rewrites ``seal.json`` on purpose.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError
from albert_edge.io import OutputKind
from albert_edge.manifest import (
    Manifest,
    check_complete,
    check_files,
    load_record,
    sha256_cached,
    write_manifest,
)

SEAL_NAME = "seal.json"


class EvidenceError(AlbertEdgeError):
    """A sealed evidence directory is missing its seal, changed, or made from other inputs."""


@dataclass(frozen=True)
class EvidenceKind:
    """What one kind of evidence directory is: its name (``seal.json``'s ``evidence``),
    the file it cannot be without, and the command that makes it again."""

    name: str
    primary: str
    regenerate: str

    def output_kind(self) -> OutputKind:
        """The :class:`~albert_edge.io.OutputKind` for writing one: ``--overwrite`` replaces
        only a directory sealed as this kind, unchanged."""
        return OutputKind(
            self.name,
            lambda p: sealed_reason(p, self) is None,
            f"no {SEAL_NAME} sealing it as an albert-edge {self.name}",
            lambda p: (sealed_reason(p, self) or "").split("; ")[0] or None,
        )


# --- identities --------------------------------------------------------------------


def _tf1_weights(f: Path) -> bool:
    return ".data-" in f.name or f.suffix == ".index"


def _checkpoint_files(path: Path) -> list[Path]:
    """The files that make a checkpoint what it computes: its config and its weights (a
    transformers directory; an original TF1 directory, resolved as the loader resolves it;
    or a TF1 prefix)."""
    if path.is_dir():
        hf = sorted(
            f
            for f in path.iterdir()
            if f.is_file()
            and (f.name == "config.json" or f.suffix in {".safetensors", ".bin"})
            and not f.name.startswith(".")
        )
        return hf or _tf1_directory_files(path)
    return sorted(f for f in path.parent.glob(path.name + ".*") if _tf1_weights(f))


def _tf1_directory_files(path: Path) -> list[Path]:
    """An original TF1 directory's ``albert_config.json`` and the ``.index`` / ``.data-*``
    files of the checkpoint the loader takes from it (:func:`converters.tf1_files.
    locate_tf1_files`: the ``checkpoint`` file's choice or the highest step, a TF-Hub
    module's ``variables/``); none when it is not one."""
    from albert_edge.errors import CheckpointError
    from converters.tf1_files import locate_tf1_files

    try:
        tf1 = locate_tf1_files(path)
    except CheckpointError:
        return []
    prefix = tf1.prefix
    weights = (f for f in prefix.parent.glob(prefix.name + ".*") if _tf1_weights(f))
    return sorted([tf1.config, *weights])


@functools.lru_cache(maxsize=32)
def _identity(files: tuple[tuple[str, str], ...]) -> str:
    h = hashlib.sha256()
    for name, digest in files:
        h.update(f"{name}\0{digest}\n".encode())
    return h.hexdigest()


def checkpoint_identity(path: str | Path | None) -> str:
    """A content hash of a checkpoint's config and weight files (``None``: the embedded
    model): the same bytes give the same identity wherever the directory lives. Each file's
    hash is cached by path, size, mtime and inode, so asking again costs a ``stat``."""
    from albert_edge.layout import DEFAULT_MODEL

    p = Path(path) if path is not None else DEFAULT_MODEL
    files = _checkpoint_files(p)
    if not files:
        raise EvidenceError(f"{p}: no config or weight files to identify the checkpoint by")
    try:
        return _identity(tuple((f.name, sha256_cached(f)) for f in files))
    except OSError as exc:
        raise EvidenceError(f"{p}: cannot read the checkpoint ({exc.strerror})") from None


def data_identity(path: str | Path) -> str:
    """sha256 of a data file (cached like :func:`checkpoint_identity`)."""
    try:
        return sha256_cached(Path(path))
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot read ({exc.strerror})") from None


def made_from(
    checkpoint: str | Path | None = None,
    data: Mapping[str, str | Path | None] | None = None,
    *,
    with_checkpoint: bool = True,
) -> dict[str, Any]:
    """The ``made_from`` record: the checkpoint's name and identity, and each data file's
    name and sha256 by role (``{"data": path, "report": path}``); names, never paths."""
    from albert_edge.layout import DEFAULT_MODEL

    rec: dict[str, Any] = {}
    if with_checkpoint:
        p = Path(checkpoint) if checkpoint is not None else DEFAULT_MODEL
        rec["checkpoint"] = {"name": p.name, "identity": checkpoint_identity(p)}
    for role, path in (data or {}).items():
        if path is not None:
            rec[role] = {"name": Path(path).name, "sha256": data_identity(path)}
    return rec


# What later work trusts a training output by (the PABEE exit heads `depth search` starts
# from): seal.json over training.json, with the sha256 of every file and the data (and, for
# a fine-tune, the checkpoint) it was trained from. Here, below both train and depth, so
# the writer and the reader share one definition.
TRAINED = EvidenceKind("training output", "training.json", "train again (`albert-edge train`)")
# What ``albert-edge depth truncate`` writes: a checkpoint whose truncation.json is quoted
# into the manifest. Here for the same reason (the writer in depth, readers in convert and
# the checkpoint loader).
TRUNCATED_CHECKPOINT = EvidenceKind(
    "truncated checkpoint",
    "truncation.json",
    "truncate the model again (`albert-edge depth truncate`)",
)
# The sealed directories a checkpoint can be: :func:`check_sealed_checkpoint` opens each
# by the kind its seal names.
CHECKPOINT_KINDS = {k.name: k for k in (TRAINED, TRUNCATED_CHECKPOINT)}


# --- writing and reading -------------------------------------------------------------


def seal(folder: Path, kind: EvidenceKind, record: Mapping[str, Any], **extra: Any) -> Path:
    """Write ``folder/seal.json`` (call it last, on the finished directory): the hashes
    of every file, ``kind``'s name, ``made_from`` = ``record``, and ``extra`` keys."""
    if not (folder / kind.primary).is_file():
        raise EvidenceError(f"{folder / kind.primary}: was not written")
    m = Manifest(
        model_file=kind.primary,
        extra={"evidence": kind.name, "made_from": dict(record), **extra},
    )
    return write_manifest(folder, m, record=SEAL_NAME)


def sealed_reason(folder: Path, kind: EvidenceKind) -> str | None:
    """Why ``folder`` is not an intact sealed ``kind``, or ``None`` when it is."""
    try:
        open_sealed(folder, kind)
    except AlbertEdgeError as exc:
        return str(exc)
    return None


def open_sealed(folder: str | Path, kind: EvidenceKind) -> Manifest:
    """``folder``'s seal, after checking it is ``kind``, its seal holds, every file it
    records is there unchanged and nothing was added; one line naming the file if not."""
    folder = Path(folder)
    path = folder / SEAL_NAME
    if not folder.is_dir():
        raise EvidenceError(f"{folder}: no such {kind.name} directory; {kind.regenerate}")
    if not path.is_file():
        raise EvidenceError(
            f"{path}: missing, so nothing vouches for this {kind.name}'s files (written "
            f"before albert-edge sealed them, or not by albert-edge); {kind.regenerate}"
        )
    try:
        m = load_record(path, kind.regenerate)
        if m.format_version < 2 or m.extra.get("evidence") != kind.name:
            raise EvidenceError(
                f"{path}: seals a {m.extra.get('evidence') or 'different output'}, not a "
                f"{kind.name}; {kind.regenerate}"
            )
        check_files(folder, m, record=SEAL_NAME, fix=kind.regenerate)
        check_complete(folder, m, record=SEAL_NAME, fix=kind.regenerate)
    except EvidenceError:
        raise
    except AlbertEdgeError as exc:  # the manifest module's integrity errors: one type here
        raise EvidenceError(str(exc)) from None
    return m


def check_made_from(
    where: Path,
    kind: EvidenceKind,
    record: Mapping[str, Any] | Manifest,
    *,
    checkpoint: str | Path | None = None,
    check_checkpoint: bool = True,
    data: Mapping[str, str | Path | None] | None = None,
) -> None:
    """Refuse what ``record`` (a seal, or its ``made_from``) says was made from another
    checkpoint (by identity) or other data (by sha256, per role given): before any model
    loads, in one line starting with ``where``."""
    rec = record.extra.get("made_from") if isinstance(record, Manifest) else record
    rec = rec if isinstance(rec, Mapping) else {}
    if check_checkpoint:
        want = (rec.get("checkpoint") or {}).get("identity")
        have = checkpoint_identity(checkpoint)
        if want != have:
            name = (rec.get("checkpoint") or {}).get("name", "unknown")
            raise EvidenceError(
                f"{where}: this {kind.name} was made from another checkpoint ({name}, identity "
                f"{str(want)[:12]}...; this one is {have[:12]}...); make it from this checkpoint"
                f" ({kind.regenerate})"
            )
    for role, path in (data or {}).items():
        if path is None:
            continue
        want = (rec.get(role) or {}).get("sha256")
        have = data_identity(path)
        if want != have:
            name = (rec.get(role) or {}).get("name", "unknown")
            raise EvidenceError(
                f"{where}: this {kind.name} was made from other {role} ({name}, sha256 "
                f"{str(want)[:12]}...; {Path(path).name} is {have[:12]}...); {kind.regenerate}"
            )


def check_sealed_checkpoint(path: Path) -> None:
    """Refuse a sealed checkpoint directory (a training output, a truncated checkpoint)
    whose files no longer match its seal: one line naming the changed, missing or added
    file and how to make the directory again. Called by the checkpoint loader before it
    reads a byte of config or weights, so every command that loads a checkpoint checks
    it and none can skip it. A directory without ``seal.json`` is not a sealed output
    (a Hugging Face download, the embedded model): nothing to check."""
    if not (path / SEAL_NAME).is_file():
        return
    import json

    try:
        evidence = json.loads((path / SEAL_NAME).read_text(encoding="utf-8")).get("evidence")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        evidence = None  # open_sealed names what is wrong with the seal itself
    open_sealed(path, CHECKPOINT_KINDS.get(str(evidence), TRAINED))
