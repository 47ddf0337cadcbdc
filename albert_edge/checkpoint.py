"""Loading ALBERT checkpoints (Hugging Face directories and original TF1 checkpoints).

Strict on purpose: a checkpoint that loads with missing or unexpected tensors would
export, quantize and benchmark a model that is not the user's. Every problem becomes a
:class:`CheckpointError` that names the file and what to do.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import CheckpointError, ConfigError, TokenizerError
from albert_edge.heads import head_from_architectures
from albert_edge.layout import DEFAULT_MODEL as DEFAULT_MODEL  # the embedded model

# Re-exported: the reference model and its builders live in albert_edge.torch_model.
from albert_edge.torch_model import (
    Checkpoint,
    build_model,
    load_state_dict_strict,
    validate_config,
)

if TYPE_CHECKING:
    import torch
    from transformers import AlbertConfig


WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_FILES = ("spiece.model",)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(
            f"{path}: not valid JSON ({exc}); restore the original file"
        ) from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return data


def _is_int(text: str) -> bool:
    try:
        int(text)
    except (TypeError, ValueError):
        return False
    return True


def load_hf_config(path: Path) -> AlbertConfig:
    from transformers import AlbertConfig

    data = _read_json(path)
    model_type = data.get("model_type")
    if model_type != "albert":
        raise CheckpointError(
            f"{path}: model_type={model_type!r} is not an ALBERT checkpoint; albert-edge "
            "converts ALBERT only (model_type 'albert')"
        )
    pruned = data.get("pruned_heads")
    if isinstance(pruned, dict) and pruned:
        # config.json's keys are strings; transformers' from_pretrained makes them the
        # integer layer indices AlbertModel._prune_heads divides;
        # validate_config below judges the indices against the shape
        problems = [
            f"pruned_heads key {k!r} is not a layer index" for k in pruned if not _is_int(k)
        ]
        if problems:
            raise ConfigError(f"{path}: invalid ALBERT config: " + "; ".join(problems))
        data = {**data, "pruned_heads": {int(k): v for k, v in pruned.items()}}
    try:
        config = AlbertConfig(**{k: v for k, v in data.items() if k != "model_type"})
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: invalid ALBERT config ({exc})") from None
    validate_config(config, path)
    return config


def _load_state_dict(path: Path) -> dict[str, torch.Tensor]:
    import torch

    if not path.is_file() or path.stat().st_size == 0:
        raise CheckpointError(
            f"{path}: weights file is missing or empty; re-download or re-save it"
        )
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return dict(load_file(str(path)))
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, bad header, pickle rejected, ...
        text = str(exc)
        if "Weights only load failed" in text and "Unsupported global" in text:
            what = text.split("Unsupported global:", 1)[1].split()[0:2]
            raise CheckpointError(
                f"{path}: refused to unpickle it: it references {' '.join(what).rstrip('.')}, "
                "code that weights-only loading does not run (the file is intact); save the "
                "weights as model.safetensors instead"
            ) from None
        from albert_edge.environment import describe_resource_error

        limited = describe_resource_error(exc)  # ulimit -n / -v: the limit, not the file
        if limited is not None:
            raise CheckpointError(f"{path}: cannot read weights: {limited}") from None
        raise CheckpointError(
            f"{path}: cannot read weights ({type(exc).__name__}: {str(exc).splitlines()[0][:160]}); "
            "the file is truncated or corrupt, re-save or re-download it"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path}: not a state dict of tensors")
    return state


def is_tf1_checkpoint(path: Path) -> bool:
    """Whether ``path`` looks like an original TF1 checkpoint (directory, prefix or file).

    Cheap on purpose (no recursive globbing): a directory with albert_config.json, any
    ``*.index`` or a TF-Hub ``variables/variables.index``; a prefix whose ``.index``
    exists (the prefix itself is not a file); or one of its .index/.data-*/.meta files.
    """
    if path.is_dir():
        return (
            (path / "albert_config.json").is_file()
            or any(path.glob("*.index"))
            or (path / "variables" / "variables.index").is_file()
        )
    name = path.name
    if path.with_name(name + ".index").is_file():
        return True
    for marker in (".index", ".meta", ".data-"):
        if marker in name:
            stem = name[: name.rindex(marker)]
            if stem and path.with_name(stem + ".index").is_file():
                return True
    return False


def load_checkpoint(path: str | Path | None = None) -> Checkpoint:
    """Load an ALBERT from a Hugging Face directory or an original TF1 checkpoint.

    ``None`` loads the embedded default model (a small ALBERT trained on SST-2).
    """
    p = Path(path) if path is not None else DEFAULT_MODEL
    # A TF1 prefix (model.ckpt-1000) names no file of its own: test for it before existence.
    if is_tf1_checkpoint(p) and not (p.is_dir() and (p / "config.json").is_file()):
        from converters.tf1_checkpoint import load_tf1_checkpoint

        return check_finite(load_tf1_checkpoint(p))
    if not p.exists():
        raise CheckpointError(
            f"{p}: no such file or directory; pass an ALBERT checkpoint directory"
        )
    if not p.is_dir():
        raise CheckpointError(
            f"{p}: expected a checkpoint directory (config.json + model.safetensors or "
            "pytorch_model.bin + spiece.model) or a TF1 checkpoint"
        )
    from albert_edge.sealed import check_sealed_checkpoint

    # A sealed output (training, truncation) whose files changed is refused before a byte
    # of it is read: here, the one place every command opens a checkpoint.
    check_sealed_checkpoint(p)
    config_path = p / "config.json"
    if not config_path.is_file():
        raise CheckpointError(
            f"{p}: no config.json; an ALBERT checkpoint directory holds config.json, "
            "model.safetensors (or pytorch_model.bin) and spiece.model"
        )
    config = load_hf_config(config_path)
    head = head_from_architectures(getattr(config, "architectures", None))
    weights = next((p / name for name in WEIGHT_FILES if (p / name).exists()), None)
    if weights is None:
        raise CheckpointError(
            f"{p}: no model.safetensors or pytorch_model.bin; save the model with "
            "save_pretrained() into this directory"
        )
    state = _load_state_dict(weights)
    model = build_model(config, head)
    load_state_dict_strict(model, state, weights)

    spiece = p / "spiece.model"
    do_lower_case = True
    tok_cfg = p / "tokenizer_config.json"
    if tok_cfg.is_file():
        do_lower_case = bool(_read_json(tok_cfg).get("do_lower_case", True))
    ckpt = Checkpoint(
        path=p,
        source="hf",
        config=config,
        head=head,
        model=model,
        spiece_model=spiece if spiece.is_file() else None,
        do_lower_case=do_lower_case,
    )
    if (p / "truncation.json").is_file():  # written by albert_edge.depth; convert records it
        ckpt.extra_files["truncation"] = p / "truncation.json"
    if (p / "training.json").is_file():  # albert-edge train's record; convert reads its qat
        ckpt.extra_files["training"] = p / "training.json"
    if ckpt.spiece_model is not None:
        ckpt.tokenizer().check_vocab_size(config.vocab_size, config_path)
    if (p / TRIM_FILE).is_file():  # written by albert_edge.vocab; convert records it
        check_trimmed_tokenizer(read_trim_record(p / TRIM_FILE), ckpt.spiece_model, p)
        ckpt.extra_files["trim"] = p / TRIM_FILE
    return check_finite(ckpt, weights)


def check_finite(ckpt: Checkpoint, weights: Path | None = None) -> Checkpoint:
    """``ckpt``, or a :class:`CheckpointError` naming the first tensor with a NaN or Inf.

    Why at load: a non-finite weight converts without complaint (ONNX and TFLite store
    it as written), and then either verify blames "a conversion bug" or, when the random
    grid never meets that row, text that does meet it gives NaN logits whose equal argmax
    reads as agreement. The checkpoint is where the fault is, so that is what to name.
    """
    import torch

    for name, tensor in ckpt.model.state_dict().items():
        if not tensor.is_floating_point():
            continue
        bad = ~torch.isfinite(tensor)
        if bool(bad.any()):
            count = int(bad.sum())
            first = [int(i) for i in torch.nonzero(bad)[0].tolist()]
            value = float(tensor[tuple(first)])
            raise CheckpointError(
                f"{weights or ckpt.path}: tensor {name} holds {count} non-finite value(s) "
                f"({value} at index {first}); the checkpoint is damaged or its training "
                "diverged: restore or re-train it"
            )
    return ckpt


# ``trim.json``: the record a trimmed checkpoint carries (written by albert_edge.vocab.trim).
# Here, beside the loader, because the loader reads it on every load of a trimmed directory
# (to refuse a tokenizer that is not the one the table was trimmed for) and ``convert``
# copies it into the manifest (key ``vocabulary``); the vocab package writes and reads it
# through these names.
TRIM_FILE = "trim.json"


def read_trim_record(path: Path) -> dict[str, Any]:
    """The record in ``path`` (a ``trim.json``), or a one-line :class:`CheckpointError`."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc}); trim the model again") from None
    if not isinstance(data, dict) or not isinstance(data.get("pieces_kept"), int):
        raise CheckpointError(f"{path}: not a trim record; trim the model again")
    if not isinstance(data.get("spiece_sha256"), str):
        raise CheckpointError(f"{path}: trim record lacks spiece_sha256; trim the model again")
    return data


def check_trimmed_tokenizer(record: dict[str, Any], spiece: Path | None, where: Path) -> None:
    """Refuse a trimmed table paired with any SentencePiece model but the trimmed one.

    Why beside the vocab-size check: a table and a tokenizer of equal size but another
    piece order would convert, verify (verification feeds ids, not text) and ship a model
    that reads every sentence as other words.
    """
    if spiece is None:
        return  # no tokenizer: the loader's callers name that when they need one
    digest = hashlib.sha256(spiece.read_bytes()).hexdigest()
    if digest != record["spiece_sha256"]:
        raise TokenizerError(
            f"{spiece}: not the SentencePiece model this trimmed checkpoint was trimmed with "
            f"({where / TRIM_FILE} records sha256 {record['spiece_sha256'][:12]}..., this file "
            f"is {digest[:12]}...); restore the spiece.model albert-edge trim wrote"
        )
