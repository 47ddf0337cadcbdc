"""``manifest.json``: what an artifact is, how it was made, and how well it verified.

Common keys (every target): ``format_version``, ``albert_edge_version``, ``target``,
``source`` ({name, kind: hf|tf1, embedded, weights_sha256}: never a path), ``head``, ``precision``, ``model_file``,
``inputs``/``outputs`` (name, dtype, shape with symbolic axes), ``sizes`` (file_bytes,
floor_bytes, ratio_to_floor, ...), the matmul counts, ``factorized_embedding_intact``,
``files`` (all built by :func:`artifact_record`), and ``verification`` (per-output errors
against PyTorch, or ``{"skipped": why}`` when no comparison ran).
A depth-truncated artifact adds ``depth`` (:mod:`albert_edge.depth`: k of L layers, the
groups kept, the full model's source, how the depth was chosen and its held-out evidence).
Targets add their own keys (``opset`` and ``passes`` for ONNX, ``signatures`` for TFLite);
the schema keeps them as :attr:`Manifest.extra`, untouched.

The manifest is data to check, not to trust (format version 2):

* paths it names (``model_file``, ``files``, ``sha256``) are relative POSIX paths inside
  the artifact (subdirectories allowed), never absolute, never ``..``; a manifest that
  points elsewhere could make ``verify`` check one file and PASS another;
* ``sha256`` records every file of the finished directory, found by walking it (not by
  trusting a list the pipelines built), and is checked by ``verify`` and by
  :func:`albert_edge.runtime.model_file` whenever an artifact is loaded;
* ``manifest_sha256`` seals the manifest itself, and the file must be byte-for-byte the
  serialization :func:`write_manifest` produces, so no truncation or bit flip anywhere in
  the artifact can leave a manifest that reads as valid.

One writer (:func:`write_manifest`) and one reader (:func:`load_manifest`, or
:func:`read_manifest` for the plain dict) so the rules live in one place.

**Identity.** An artifact is what albert-edge wrote and sealed, nothing else. Only a
manifest of the current format, sealed, proves that (:func:`foreign_reason`): ``verify``
refuses any other one and ``--overwrite`` never replaces its directory, with one line
saying why. The formats albert-edge wrote before are named (:data:`LEGACY_FORMATS`):
format 1 (albert-edge 0.1.0 before the seal: ``format_version`` 1 and
``albert_edge_version``, no hashes) still loads for reading (path and type checks; nothing
can be said about its bytes) but is never verified or replaced. A manifest without
``format_version`` was never written by albert-edge (every release wrote one): it is
foreign, whatever keys it has. Files in the artifact that the manifest does not list
(:func:`unlisted_files`) fail ``verify``: the manifest describes the whole directory.
Target- or feature-specific keys (depth fields, ...) are free inside the seal.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from albert_edge.errors import AlbertEdgeError, ArtifactIntegrityError

FORMAT_VERSION = 2
MANIFEST_NAME = "manifest.json"
_SEAL = "manifest_sha256"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# Keys the schema types; everything else is target-specific and kept as-is.
_TYPED = ("format_version", "albert_edge_version", "model_file", "files", "sha256", _SEAL)


class ManifestError(AlbertEdgeError):
    """manifest.json is not valid JSON of the manifest schema."""


def check_relative(path: object, where: Path, key: str) -> str:
    """``path`` as a safe in-artifact relative POSIX path, or a :class:`ManifestError`."""
    if not isinstance(path, str) or not path:
        raise ManifestError(f"{where}: {key} must be a non-empty string, got {path!r}")
    p = PurePosixPath(path)
    if p.is_absolute() or "\\" in path or ".." in p.parts or path.startswith("~"):
        raise ManifestError(
            f"{where}: {key} {path!r} is not a relative path inside the artifact; "
            "re-run albert-edge convert"
        )
    return p.as_posix()


@dataclass
class Manifest:
    """The typed view of ``manifest.json``; :attr:`extra` holds target-specific keys."""

    model_file: str
    format_version: int = FORMAT_VERSION
    albert_edge_version: str | None = None
    files: list[str] = field(default_factory=list)
    sha256: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    # False when the file has no format_version key (read as format 1): albert-edge
    # always wrote one, so such a manifest is someone else's (foreign_reason).
    declared: bool = True

    @property
    def target(self) -> str | None:
        value = self.extra.get("target")
        return str(value) if value is not None else None

    @property
    def precision(self) -> str | None:
        value = self.extra.get("precision")
        return str(value) if value is not None else None

    def recorded_files(self) -> list[str]:
        """Every in-artifact path the manifest names (manifest.json itself excluded)."""
        names = [self.model_file, *self.files, *self.sha256]
        return list(dict.fromkeys(names))

    def to_dict(self) -> dict[str, Any]:
        """The on-disk dict: common keys first, then the target's, then the hashes."""
        d: dict[str, Any] = {"format_version": self.format_version}
        if self.albert_edge_version is not None:
            d["albert_edge_version"] = self.albert_edge_version
        d.update(self.extra)
        d["model_file"] = self.model_file
        d["files"] = list(self.files)
        if self.sha256:
            d["sha256"] = dict(self.sha256)
        return d

    @classmethod
    def from_dict(cls, data: object, where: Path) -> Manifest:
        """Validate ``data`` against the schema; raise :class:`ManifestError` naming ``where``."""
        if not isinstance(data, dict):
            raise ManifestError(
                f"{where}: expected a JSON object, got {type(data).__name__}; "
                "re-run albert-edge convert"
            )
        version = data.get("format_version", 1)
        if type(version) is not int or not 1 <= version <= FORMAT_VERSION:
            raise ManifestError(
                f"{where}: unsupported format_version {version!r} (this albert-edge reads "
                f"1..{FORMAT_VERSION}); upgrade albert-edge or re-run convert"
            )
        if "model_file" not in data:
            raise ManifestError(f"{where}: no model_file; re-run albert-edge convert")
        model = check_relative(data["model_file"], where, "model_file")
        files = data.get("files", [])
        if not isinstance(files, list):
            raise ManifestError(f"{where}: files must be a list of paths")
        files = [check_relative(f, where, "files entry") for f in files]
        sha = data.get("sha256", {})
        if not isinstance(sha, dict) or not all(
            isinstance(v, str) and _HEX64.match(v) for v in sha.values()
        ):
            raise ManifestError(f"{where}: sha256 must map paths to 64 hex digits")
        sha = {check_relative(k, where, "sha256 entry"): v for k, v in sha.items()}
        if version >= 2 and model not in sha:
            raise ManifestError(f"{where}: model_file {model!r} has no sha256")
        aev = data.get("albert_edge_version")
        return cls(
            model_file=model,
            format_version=version,
            declared="format_version" in data,
            albert_edge_version=str(aev) if aev is not None else None,
            files=files,
            sha256=sha,
            extra={k: v for k, v in data.items() if k not in _TYPED},
        )


# --- the record every target shares ----------------------------------------------------

# The manifest's size and matmul figures, by key: what ``albert_edge.facts`` computes for
# any model file (``facts`` imports these: one list of keys). Defined here because the
# manifest is what promises them, and every layer may import this module.
SIZE_KEYS = (
    "file_bytes",
    "unique_tensor_bytes",
    "duplicate_tensor_bytes",
    "unique_params",
    "checkpoint_params",
    "floor_precision",
    "floor_bytes",
    "ratio_to_floor",
)
MATMUL_KEYS = ("matmuls_total", "matmuls_quantized", "matmuls_fp16")


def artifact_record(
    target: str,
    *,
    source: dict[str, Any],
    head: str,
    precision: str,
    model_file: str,
    inputs: list[Any],
    outputs: list[Any],
    facts: Mapping[str, Any],
    sizes: Mapping[str, Any] | None = None,
    files: Sequence[str] = (),
) -> dict[str, Any]:
    """The manifest keys every artifact has, built in one place for every producer
    (``convert --to onnx``, ``convert --to tflite``, ``quantize``).

    Why one function: the keys readers compare across targets (``sizes``, the matmul
    counts, ``factorized_embedding_intact``, ``files``) drifted when each target spelled
    its own dict (TFLite's ``files`` left out its model; quantize dropped
    ``matmuls_fp16``). ``facts`` is :func:`albert_edge.facts.onnx_facts` /
    ``tflite_facts`` of the written model; ``sizes`` adds the target's own size figures
    after the shared ones; ``files`` are the artifact's other files (the model file is
    listed first). The target adds its own keys to the returned dict.
    """
    missing = [
        k for k in (*SIZE_KEYS, *MATMUL_KEYS, "factorized_embedding_intact") if k not in facts
    ]
    if missing:
        raise AlbertEdgeError(
            f"{model_file}: facts lack {', '.join(missing)} (a bug in albert-edge; report it)"
        )
    return {
        "target": target,
        "source": dict(source),
        "head": head,
        "precision": precision,
        "model_file": model_file,
        "inputs": list(inputs),
        "outputs": list(outputs),
        "sizes": {**{k: facts[k] for k in SIZE_KEYS}, **(sizes or {})},
        **{k: facts[k] for k in MATMUL_KEYS},
        "factorized_embedding_intact": facts["factorized_embedding_intact"],
        "files": list(dict.fromkeys([model_file, *files])),
    }


def _serialize(d: dict[str, Any], *, strict: bool = False) -> str:
    # strict when writing; a manifest already on disk is compared as it was written
    # (sealed manifests of this format written before strict JSON may hold Infinity).
    return json.dumps(d, indent=2, sort_keys=False, default=str, allow_nan=not strict) + "\n"


# --- strict JSON -----------------------------------------------------------------------

NON_FINITE_KEY = "non_finite"


def strict_json(value: Any, *, where: str = "") -> tuple[Any, dict[str, str]]:
    """``value`` with every non-finite float replaced by ``null``, and what was replaced.

    Python's json writes ``NaN``/``Infinity``, which no strict parser (JavaScript's
    ``JSON.parse``, jq, Go, Rust serde) reads: one NaN metric makes a whole report
    unreadable. Every JSON file albert-edge writes goes through here and is dumped with
    ``allow_nan=False``; the second value maps each nulled key path (``a.b[2]``) to
    ``"nan"``, ``"inf"`` or ``"-inf"``, the reason the number is missing.
    """
    nulled: dict[str, str] = {}

    def walk(v: Any, path: str) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            nulled[path or "."] = "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
            return None
        if isinstance(v, dict):
            return {str(k): walk(x, f"{path}.{k}" if path else str(k)) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [walk(x, f"{path}[{i}]") for i, x in enumerate(v)]
        if hasattr(v, "item") and hasattr(v, "dtype") and getattr(v, "ndim", 1) == 0:
            return walk(v.item(), path)  # numpy scalars
        return v

    return walk(value, where), nulled


def strict_json_object(data: dict[str, Any]) -> dict[str, Any]:
    """A JSON object ready for ``json.dumps(..., allow_nan=False)``: non-finite floats
    become ``null`` and :data:`NON_FINITE_KEY` says which were which (omitted if none)."""
    clean, nulled = strict_json(data)
    if nulled:
        before = clean.get(NON_FINITE_KEY)
        clean[NON_FINITE_KEY] = {**(before if isinstance(before, dict) else {}), **nulled}
    return dict(clean)


def dumps_strict(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`strict_json_object` (objects) or :func:`strict_json`
    (anything else), never writing NaN or Infinity."""
    clean = strict_json_object(value) if isinstance(value, dict) else strict_json(value)[0]
    return json.dumps(clean, allow_nan=False, **kwargs)


def _seal(d: dict[str, Any]) -> str:
    body = {k: v for k, v in d.items() if k != _SEAL}
    return hashlib.sha256(_serialize(body).encode()).hexdigest()


def _walk_files(out_dir: Path, record: str = MANIFEST_NAME) -> list[str]:
    """Every regular file under ``out_dir`` except the record (the manifest), sorted."""
    found = []
    for root, dirs, files in os.walk(out_dir):
        dirs.sort()
        for name in files:
            rel = Path(root, name).relative_to(out_dir).as_posix()
            if rel != record:
                found.append(rel)
    return sorted(found)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@functools.lru_cache(maxsize=64)
def _sha256_cached(path: str, size: int, mtime_ns: int, ino: int) -> str:
    return sha256_file(Path(path))


def sha256_cached(path: Path) -> str:
    """sha256 of ``path``, computed once per (size, mtime, inode): cheap to ask again."""
    st = path.stat()
    return _sha256_cached(str(path), st.st_size, st.st_mtime_ns, st.st_ino)


def write_manifest(
    out_dir: Path, manifest: dict[str, Any] | Manifest, *, record: str = MANIFEST_NAME
) -> Path:
    """Write ``out_dir/manifest.json``: validated, every file hashed, sealed.

    Call it last, on the finished directory: it walks ``out_dir`` so files that a
    pipeline wrote but forgot to list are hashed too. ``record``: the file name, for
    the sealed evidence directories of :mod:`albert_edge.sealed` (same format, same seal).
    """
    from albert_edge.version import __version__

    out_dir = Path(out_dir)
    data = manifest.to_dict() if isinstance(manifest, Manifest) else dict(manifest)
    for key in ("sha256", _SEAL, "format_version", "albert_edge_version"):
        data.pop(key, None)
    data = {"format_version": FORMAT_VERSION, "albert_edge_version": __version__, **data}
    walked = _walk_files(out_dir, record)
    data["sha256"] = {rel: sha256_file(out_dir / rel) for rel in walked}
    m = Manifest.from_dict(data, out_dir / record)
    if m.model_file not in m.sha256:
        raise AlbertEdgeError(f"{out_dir / m.model_file}: the model file was not written")
    d = strict_json_object(m.to_dict())
    d[_SEAL] = _seal(d)
    path = out_dir / record
    with open(path, "w") as f:
        f.write(_serialize(d, strict=True))
        f.flush()
        os.fsync(f.fileno())
    return path


def manifest_path(artifact: str | Path) -> Path:
    """manifest.json of an artifact directory, or of the artifact holding a model file
    (the ONNX model lives one level down, in ``onnx/``)."""
    from albert_edge.layout import artifact_root

    return artifact_root(artifact) / MANIFEST_NAME


def load_manifest(artifact: str | Path) -> Manifest:
    """The validated manifest of an artifact directory (or of the directory of a model file).

    Format 2: the file must be exactly what :func:`write_manifest` wrote (seal and bytes).
    """
    p = Path(artifact)
    path = manifest_path(p)
    if not path.is_file():
        raise ManifestError(f"{p}: no manifest.json; is this an albert-edge output directory?")
    return load_record(path)


def load_record(path: Path, fix: str = "re-run albert-edge convert") -> Manifest:
    """The validated, seal-checked manifest-format record at ``path`` (``manifest.json``
    of an artifact, ``seal.json`` of a sealed evidence directory); ``fix`` ends a refusal."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: corrupt manifest ({exc}); {fix}") from None
    sealed = isinstance(data, dict) and (
        data.get("format_version") != 1 and any(k in data for k in ("sha256", _SEAL))
    )
    m = Manifest.from_dict(data, path)
    if m.format_version >= 2 or sealed:
        assert isinstance(data, dict)
        if data.get(_SEAL) != _seal(data) or raw != _serialize(data).encode():
            raise ArtifactIntegrityError(
                f"{path}: {path.name} was modified or damaged after albert-edge wrote it "
                f"(seal mismatch); {fix}"
            )
        if m.format_version < 2:
            raise ManifestError(f"{path}: format_version does not match its hashes")
    return m


def read_manifest(artifact: str | Path) -> dict[str, Any]:
    """The manifest of an artifact directory, or of the directory holding a model file."""
    m = load_manifest(artifact)
    d = m.to_dict()
    return d


def check_files(
    folder: Path,
    manifest: Manifest,
    only: str | None = None,
    *,
    record: str = MANIFEST_NAME,
    fix: str = "re-run albert-edge convert",
) -> None:
    """Raise :class:`ArtifactIntegrityError` unless the recorded files are intact.

    Every path must resolve inside ``folder`` (a symlink out of the artifact is refused)
    and hash to its recorded sha256. ``only`` checks one relative path. Format-1
    manifests have no hashes: only the paths are checked.
    """
    root = folder.resolve()
    names = [only] if only is not None else manifest.recorded_files()
    for rel in names:
        path = folder / rel
        try:
            inside = path.resolve().is_relative_to(root)
        except OSError:
            inside = False
        if not inside:
            raise ArtifactIntegrityError(f"{path}: resolves outside the artifact {folder}; {fix}")
        if not path.is_file():
            raise ArtifactIntegrityError(f"{path}: missing (named by {record}); {fix}")
        want = manifest.sha256.get(rel)
        if want is None:
            if manifest.format_version >= 2:
                raise ArtifactIntegrityError(f"{path}: not recorded in {record}'s sha256; {fix}")
            continue
        got = sha256_cached(path)
        if got != want:
            raise ArtifactIntegrityError(
                f"{path}: sha256 {got[:12]}... differs from {record}'s {want[:12]}...; "
                f"the file was modified or damaged; {fix}"
            )


# --- identity ------------------------------------------------------------------------

# The formats earlier albert-edge releases wrote, by number: named so that a refusal says
# which one it met instead of "invalid".
LEGACY_FORMATS: dict[int, str] = {
    1: "format 1 (albert-edge 0.1.0 before sealing: no file hashes, no seal)",
}


def foreign_reason(manifest: Manifest) -> str | None:
    """Why ``manifest`` does not prove that albert-edge wrote its directory, or ``None``.

    Only the current format proves it: :func:`load_manifest` has checked its seal and
    its hashes cover every file. Anything else may hold files albert-edge never wrote
    (a user's ``data.csv`` beside a hand-written ``{"model_file": ...}``), so replacing
    it could delete them and verifying it would vouch for bytes nobody recorded.
    """
    if not manifest.declared:
        return "manifest.json has no format_version, so albert-edge did not write it"
    if manifest.format_version < FORMAT_VERSION:
        name = LEGACY_FORMATS.get(manifest.format_version, f"format {manifest.format_version}")
        if manifest.albert_edge_version is None:
            return f"manifest.json claims format {manifest.format_version} but names no albert_edge_version, so albert-edge did not write it"
        return f"manifest.json is {name}; re-run albert-edge convert to get a sealed artifact"
    return None


def load_sealed_manifest(artifact: str | Path) -> Manifest:
    """:func:`load_manifest`, refusing any manifest that is not current and sealed."""
    m = load_manifest(artifact)
    reason = foreign_reason(m)
    if reason is not None:
        raise ManifestError(
            f"{manifest_path(artifact)}: not a sealed albert-edge artifact: {reason}"
        )
    return m


def unlisted_files(folder: Path, manifest: Manifest, record: str = MANIFEST_NAME) -> list[str]:
    """Every entry under ``folder`` that ``manifest`` does not record, as relative paths.

    Walked, not taken from the manifest: a file someone added (or a symlink to a
    directory) is exactly what a list written before it existed cannot name.
    """
    recorded = set(manifest.recorded_files()) | {record}
    extra = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if Path(root, d).is_symlink()]:
            rel = Path(root, name).relative_to(folder).as_posix()
            if rel not in recorded:
                extra.append(rel)
    return extra


def check_complete(
    folder: Path,
    manifest: Manifest,
    *,
    record: str = MANIFEST_NAME,
    fix: str = "re-run albert-edge convert",
) -> None:
    """Raise :class:`ArtifactIntegrityError` when ``folder`` holds a file ``manifest`` does
    not list: what ``verify`` passes is the directory as recorded, byte for byte."""
    extra = unlisted_files(folder, manifest, record)
    if extra:
        more = f" and {len(extra) - 1} more" if len(extra) > 1 else ""
        raise ArtifactIntegrityError(
            f"{folder / extra[0]}{more}: not listed in {record}, so albert-edge did not "
            f"write it; move it out of the directory or {fix}"
        )
