"""The artifact layout: a Hugging Face model repo that transformers.js also loads as written.

Why this layout: an artifact is only useful where it lands. optimum/transformers read
``config.json`` + ``tokenizer.json``/``tokenizer_config.json``/``special_tokens_map.json``;
transformers.js (``@huggingface/transformers``) additionally looks for the model under
``onnx/`` with a file-name suffix per dtype (``DEFAULT_DTYPE_SUFFIX_MAPPING`` in its
``src/utils/dtypes.js``: fp32 → ``model.onnx``, q8 → ``model_quantized.onnx``, int8 →
``model_int8.onnx``, fp16 → ``model_fp16.onnx``, q4 → ``model_q4.onnx``) and takes its default
dtype from ``config.json["transformers.js_config"]["dtype"]``, so writing that key makes
``pipeline('sentiment-analysis', dir)`` pick the file we wrote without any option.

``manifest["model_file"]`` stays the single source of truth for the model's relative path:
every reader (verify, bench, inspect, quantize) follows it.

No absolute path of the build machine is written anywhere: the source checkpoint is
recorded by name, kind and the sha256 of its weights (:func:`source_record`), and in an
artifact's manifest also by its path relative to the artifact directory
(:func:`anchored_source`), so ``verify OUT`` finds it again while both stay where they were
(the sha256 tells a moved or re-trained checkpoint from the one converted).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import CheckpointError

if TYPE_CHECKING:
    from albert_edge.torch_model import Checkpoint

# albert-edge ONNX precision → (transformers.js dtype, file name under onnx/).
ONNX_DTYPES: dict[str, tuple[str, str]] = {
    "fp32": ("fp32", "model.onnx"),
    "fp16": ("fp16", "model_fp16.onnx"),
    "int8-dynamic": ("q8", "model_quantized.onnx"),
    "int8-static": ("int8", "model_int8.onnx"),
    "int4": ("q4", "model_q4.onnx"),
}
ONNX_SUBDIR = "onnx"
MANIFEST_NAME = "manifest.json"  # albert_edge.manifest writes it; the name is the layout's
EMBEDDED_NAME = "embedded"
# The embedded model's directory (re-exported by albert_edge.checkpoint): defined here, below
# the checkpoint loader and the sealed-directory reader, so both can name it without a cycle.
DEFAULT_MODEL = Path(__file__).parent / "models" / "sst2-albert-tiny"


def onnx_model_file(precision: str) -> str:
    """The artifact-relative path of the ONNX model for ``precision`` (POSIX separators)."""
    return f"{ONNX_SUBDIR}/{ONNX_DTYPES.get(precision, ONNX_DTYPES['fp32'])[1]}"


def transformers_js_dtype(precision: str) -> str:
    return ONNX_DTYPES.get(precision, ONNX_DTYPES["fp32"])[0]


@dataclass(frozen=True)
class ArtifactFiles:
    """Where an artifact's files are, found from any path inside it (see :func:`find_artifact`).

    ``manifest`` is the parsed ``manifest.json`` as written (not validated: callers that
    must trust it use :func:`albert_edge.manifest.load_manifest`), or ``None`` when the
    directory has none (a bare model file).
    """

    root: Path
    manifest: dict[str, Any] | None
    model: Path | None

    def file(self, name: str) -> Path:
        """A file of the artifact by its artifact-relative name (``config.json``, ...)."""
        return self.root / name

    def read_json(self, name: str) -> dict[str, Any] | None:
        """A JSON file of the artifact, or ``None`` when it is absent or unreadable."""
        try:
            data = json.loads(self.file(name).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def max_sequence_length(self) -> int | None:
        """The longest sequence the model accepts: the manifest's ``max_sequence_length``
        (what ``convert`` writes), else ``config.json``'s ``max_position_embeddings``."""
        for data, key in (
            (self.manifest, "max_sequence_length"),
            (self.read_json("config.json"), "max_position_embeddings"),
        ):
            value = data.get(key) if data else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None


def find_artifact(path: str | Path) -> ArtifactFiles:
    """The artifact holding ``path``: an artifact directory or any file in it.

    Why one function: ``convert`` writes the ONNX model one level down (``onnx/model*.onnx``)
    and the TFLite model at the root, and readers that guessed the layout themselves read
    the wrong folder (the ONNX runner looked for the manifest beside the model and fell back
    to 512 tokens). Every reader (runners, verify, quantize, inspect, bench) asks here.
    """
    p = Path(path)
    if p.is_dir():
        root = p
    else:  # the model sits at the root (TFLite) or one level down (ONNX: onnx/)
        above = (d for d in (p.parent, p.parent.parent) if (d / MANIFEST_NAME).is_file())
        root = next(above, p.parent)
    manifest: dict[str, Any] | None = None
    try:
        data = json.loads((root / MANIFEST_NAME).read_text())
        manifest = data if isinstance(data, dict) else None
    except (OSError, ValueError):
        manifest = None
    model: Path | None = None if p.is_dir() else p
    if model is None and manifest is not None and isinstance(manifest.get("model_file"), str):
        model = root / manifest["model_file"]
    return ArtifactFiles(root=root, manifest=manifest, model=model)


def artifact_root(path: str | Path) -> Path:
    """The artifact directory holding ``manifest.json`` for a directory or a model file in it
    (the model lives one level down, in ``onnx/``)."""
    return find_artifact(path).root


def _weights_sha256(ckpt: Checkpoint) -> str | None:
    """sha256 of the checkpoint's weight file(s): identifies the source without its path."""
    return weights_sha256(Path(ckpt.path))


def weights_sha256(path: Path) -> str | None:
    """sha256 of the weight file(s) of the checkpoint at ``path`` (a directory's
    ``*.safetensors``/``*.bin``, a TF1 prefix's ``.data-*``); None when it has none."""
    p = Path(path)
    files: list[Path] = []
    if p.is_dir():
        files = sorted(
            f for f in p.iterdir() if f.suffix in {".safetensors", ".bin"} or ".data-" in f.name
        )
    elif p.parent.is_dir():  # TF1 prefix: model.ckpt-1000 → model.ckpt-1000.data-*
        files = sorted(p.parent.glob(p.name + ".data-*"))
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def is_embedded(ckpt: Checkpoint) -> bool:
    try:
        return Path(ckpt.path).resolve() == Path(DEFAULT_MODEL).resolve()
    except OSError:
        return False


def source_record(ckpt: Checkpoint) -> dict[str, Any]:
    """What the manifest says about the source: a name, never a path of this machine."""
    embedded = is_embedded(ckpt)
    return {
        "name": EMBEDDED_NAME if embedded else Path(ckpt.path).name,
        "kind": ckpt.source,
        "embedded": embedded,
        "weights_sha256": _weights_sha256(ckpt),
    }


def relative_to_artifact(path: str | Path, artifact_dir: str | Path) -> str:
    """``path`` relative to ``artifact_dir`` (both resolved, so ``..`` crosses the real
    directories), POSIX separators: what a manifest may say about where a file is."""
    rel = os.path.relpath(Path(path).resolve(), Path(artifact_dir).resolve())
    return Path(rel).as_posix()


def anchored_source(ckpt: Checkpoint, artifact_dir: str | Path) -> dict[str, Any]:
    """:func:`source_record` plus ``relative_path``: where the checkpoint is, relative to
    the artifact directory being written (a sibling temporary directory of the output is
    the same place: :func:`albert_edge.io.atomic_output_dir` makes it beside the output).
    The embedded model needs no path: it ships inside albert-edge."""
    rec = source_record(ckpt)
    if not rec["embedded"] and not albert_edge_temporary(ckpt.path):
        rec["relative_path"] = relative_to_artifact(ckpt.path, artifact_dir)
    return rec


def albert_edge_temporary(path: str | Path) -> bool:
    """Whether ``path`` lies in a temporary directory albert-edge made for itself
    (``albert-edge-depth-*``: the truncated model ``convert --depth`` converts), removed
    when the command ends: a path to it would name only a directory that is gone, so the
    source is recorded by name and sha256 alone."""
    import tempfile

    roots = {Path(tempfile.gettempdir()).resolve()}
    for d in Path(path).resolve().parents:
        inside_run = d.parent.name.startswith("albert-edge-run-")
        if d.name.startswith("albert-edge-") and (d.parent in roots or inside_run):
            return True
    return False


def path_source(path: str | Path | None, artifact_dir: str | Path) -> dict[str, Any]:
    """The same record as :func:`anchored_source` read from a checkpoint's files, without
    loading it (``None``: the embedded model)."""
    embedded = path is None or Path(path).resolve() == DEFAULT_MODEL.resolve()
    p = DEFAULT_MODEL if embedded or path is None else Path(path)
    rec: dict[str, Any] = {
        "name": EMBEDDED_NAME if embedded else p.name,
        "embedded": embedded,
        "weights_sha256": weights_sha256(p),
    }
    if not embedded:
        rec["relative_path"] = relative_to_artifact(p, artifact_dir)
    return rec


def reanchor(source: Any, old_dir: str | Path, new_dir: str | Path) -> Any:
    """``source`` with its ``relative_path`` (relative to ``old_dir``) made relative to
    ``new_dir``: an artifact copied elsewhere keeps pointing at the same checkpoint."""
    if not isinstance(source, dict) or not isinstance(source.get("relative_path"), str):
        return source
    where = Path(old_dir).resolve() / source["relative_path"]
    return {**source, "relative_path": relative_to_artifact(where, new_dir)}


def find_recorded(source: Any, artifact: Path | str) -> Path | None:
    """The checkpoint ``source`` records by ``relative_path``, when it is still there with
    the recorded weights; else None."""
    if not isinstance(source, dict) or not isinstance(source.get("relative_path"), str):
        return None
    root = artifact_root(artifact)
    where = Path(os.path.normpath(root / source["relative_path"]))
    want = source.get("weights_sha256")
    have = weights_sha256(where)
    if have is None or (isinstance(want, str) and want and have != want):
        return None
    return where


def describe_recorded(source: Any, artifact: Path | str) -> str:
    """What ``source`` records and why it cannot be used, in one phrase: the relative path,
    the sha256 prefix, and whether the path is gone or holds other weights."""
    src = source if isinstance(source, dict) else {}
    rel, want = src.get("relative_path"), src.get("weights_sha256")
    sha = f"weights sha256 {str(want)[:12]}…" if want else "no weights sha256"
    if not isinstance(rel, str):
        return f"{src.get('name') or 'unknown'} ({sha}), by name only, not by path"
    where = Path(os.path.normpath(artifact_root(artifact) / rel))
    have = weights_sha256(where)
    why = (
        "which holds no checkpoint now"
        if have is None
        else f"whose weights there have changed (sha256 {have[:12]}…)"
    )
    return f"{rel} relative to the artifact ({sha}), {why}"


def resolve_source(source: Any, artifact: Path | str) -> Path | None:
    """The reference checkpoint a manifest's ``source`` points at, for verify/quantize.

    ``None`` means the embedded model. A ``relative_path`` (relative to the artifact) is
    followed when it still holds the recorded weights. Manifests written before this
    layout held a ``path``: still honoured when it exists. Otherwise the user must name
    the checkpoint, told in one line what was recorded.
    """
    if isinstance(source, dict) and source.get("embedded"):
        return None
    found = find_recorded(source, artifact)
    if found is not None:
        return found
    if isinstance(source, dict) and isinstance(source.get("relative_path"), str):
        raise CheckpointError(
            f"{artifact}: manifest.json records its source checkpoint as "
            f"{describe_recorded(source, artifact)}; pass --reference CHECKPOINT (the "
            "checkpoint it was converted from)"
        )
    path = source.get("path") if isinstance(source, dict) else source
    if path:
        if not Path(str(path)).exists():
            raise CheckpointError(
                f"{artifact}: reference checkpoint {path} (from manifest.json) does not exist; "
                "pass --reference CHECKPOINT"
            )
        return Path(str(path))
    name = source.get("name") if isinstance(source, dict) else None
    raise CheckpointError(
        f"{artifact}: manifest.json records the source only by name ({name or 'unknown'}), "
        "not by path; pass --reference CHECKPOINT (the checkpoint it was converted from)"
    )


# --- tokenizer files --------------------------------------------------------------------


def write_tokenizer_files(ckpt: Checkpoint, out_dir: Path) -> list[str]:
    """spiece.model, tokenizer.json (fast), tokenizer_config.json, special_tokens_map.json.

    tokenizer.json is built by transformers' ``AlbertConverter`` (the ``tokenizers``
    library's Unigram + Metaspace + the SentencePiece precompiled charsmap) from the
    checkpoint's SentencePiece model; parity with the slow tokenizer and with
    :mod:`albert_edge.tokenizer` is tested on SST-2 dev sentences.
    No ``remove_space`` key: transformers' fast tokenizer ignores it (keeps whitespace
    around ALBERT's user-defined pieces: "cliches ." → ``▁cliches ▁ .``, what fine-tuned
    models saw), but transformers.js honours it and strips, giving other ids on 283 of the
    291 sample sentences.
    ``model_max_length`` = ``max_position_embeddings``, so ``truncation=True`` works in
    transformers/optimum and transformers.js on texts longer than the model accepts; or
    the shorter length the checkpoint's own tokenizer config records
    (:func:`albert_edge.torch_model.trained_length`: what it was fine-tuned at), so a
    client's pipeline cuts windows where the model was trained to read (transformers'
    question-answering pipeline windows at ``min(384, model_max_length)``).
    """
    import shutil

    from transformers import AlbertTokenizer as SlowAlbert
    from transformers.convert_slow_tokenizer import convert_slow_tokenizer

    tok = ckpt.tokenizer()  # raises if missing: an artifact without its tokenizer is unusable
    shutil.copyfile(tok.path, out_dir / "spiece.model")
    from albert_edge.torch_model import trained_length

    max_len = trained_length(ckpt) or int(ckpt.config.max_position_embeddings)
    slow = SlowAlbert(
        vocab_file=str(out_dir / "spiece.model"),
        do_lower_case=ckpt.do_lower_case,
        keep_accents=False,
        model_max_length=max_len,
    )
    fast = convert_slow_tokenizer(slow)
    # Written by Python, not ``fast.save``: the tokenizers library reports a full disk as
    # a bare ``Exception``, where an OSError becomes the CLI's one-line message.
    (out_dir / "tokenizer.json").write_text(fast.to_str(pretty=True))
    # AlbertTokenizerFast declares [MASK] with lstrip=True (it eats the space before it);
    # the converter's added-token entry does not say so, and transformers.js reads only
    # tokenizer.json: state it there so both strip alike.
    data = json.loads((out_dir / "tokenizer.json").read_text())
    for tok_entry in data.get("added_tokens", []):
        if tok_entry.get("content") == "[MASK]":
            tok_entry["lstrip"] = True
    (out_dir / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False, indent=2))
    special = {
        "bos_token": "[CLS]",
        "eos_token": "[SEP]",
        "unk_token": "<unk>",
        "sep_token": "[SEP]",
        "pad_token": "<pad>",
        "cls_token": "[CLS]",
        "mask_token": {
            "content": "[MASK]",
            "lstrip": True,
            "rstrip": False,
            "normalized": False,
            "single_word": False,
        },
    }
    config = {
        "tokenizer_class": "AlbertTokenizer",
        "do_lower_case": bool(ckpt.do_lower_case),
        "keep_accents": False,
        "model_max_length": max_len,
        "padding_side": "right",
        "clean_up_tokenization_spaces": True,
        **{k: v for k, v in special.items() if k != "mask_token"},
        "mask_token": "[MASK]",
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
    return ["spiece.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]


def write_config(ckpt: Checkpoint, out_dir: Path, *, precision: str, target: str) -> str:
    """config.json: the checkpoint's, plus the transformers.js dtype of the model we wrote."""
    data = ckpt.config.to_dict()
    data.pop("_name_or_path", None)  # may hold the build machine's path
    if target == "onnx":
        data["transformers.js_config"] = {"dtype": transformers_js_dtype(precision)}
    (out_dir / "config.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return "config.json"


def set_config_dtype(config_path: Path, precision: str) -> None:
    """Point transformers.js at the model file of ``precision`` (``quantize`` re-targets)."""
    data = json.loads(config_path.read_text())
    data["transformers.js_config"] = {"dtype": transformers_js_dtype(precision)}
    config_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
