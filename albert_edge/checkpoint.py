"""Loading ALBERT checkpoints (Hugging Face directories and original TF1 checkpoints).

Strict on purpose: a checkpoint that loads with missing or unexpected tensors would
export, quantize and benchmark a model that is not the user's. Every problem becomes a
:class:`CheckpointError` that names the file and what to do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import CheckpointError, ConfigError
from albert_edge.heads import HeadSpec, head_from_architectures

if TYPE_CHECKING:
    import torch
    from transformers import AlbertConfig

    from albert_edge.tokenizer import AlbertTokenizer

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_FILES = ("spiece.model",)
DEFAULT_MODEL = Path(__file__).parent / "models" / "sst2-albert-tiny"

# Tensors transformers ties to others; checkpoints saved with safetensors omit them.
_TIED_SUFFIXES = ("predictions.decoder.weight", "predictions.decoder.bias")


@dataclass
class Checkpoint:
    """An ALBERT loaded into transformers' PyTorch classes, in eval mode.

    ``model`` is the reference every artifact is verified against.
    """

    path: Path
    source: str  # "hf" or "tf1"
    config: AlbertConfig
    head: HeadSpec
    model: torch.nn.Module
    spiece_model: Path | None
    do_lower_case: bool = True
    extra_files: dict[str, Path] = field(default_factory=dict)

    def tokenizer(self) -> AlbertTokenizer:
        from albert_edge.tokenizer import AlbertTokenizer

        if self.spiece_model is None:
            raise CheckpointError(
                f"{self.path}: no spiece.model beside the checkpoint; copy the SentencePiece "
                "model the checkpoint was trained with into that directory"
            )
        return AlbertTokenizer(self.spiece_model, do_lower_case=self.do_lower_case)


def validate_config(config: AlbertConfig, where: Path) -> None:
    """Refuse configs transformers would build but that are not a valid ALBERT."""
    c = config
    problems = []
    positive = (
        "vocab_size",
        "embedding_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "num_hidden_groups",
        "inner_group_num",
        "max_position_embeddings",
        "type_vocab_size",
    )
    for name in positive:
        value = getattr(c, name, None)
        if not isinstance(value, int) or value <= 0:
            problems.append(f"{name}={value!r} must be a positive integer")
    if not problems:
        if c.hidden_size % c.num_attention_heads:
            problems.append(
                f"hidden_size={c.hidden_size} is not a multiple of "
                f"num_attention_heads={c.num_attention_heads}"
            )
        if c.num_hidden_groups > c.num_hidden_layers:
            problems.append(
                f"num_hidden_groups={c.num_hidden_groups} exceeds "
                f"num_hidden_layers={c.num_hidden_layers}"
            )
    if problems:
        raise ConfigError(f"{where}: invalid ALBERT config: " + "; ".join(problems))


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


def load_hf_config(path: Path) -> AlbertConfig:
    from transformers import AlbertConfig

    data = _read_json(path)
    model_type = data.get("model_type")
    if model_type != "albert":
        raise CheckpointError(
            f"{path}: model_type={model_type!r} is not an ALBERT checkpoint; albert-edge "
            "converts ALBERT only (model_type 'albert')"
        )
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
        raise CheckpointError(
            f"{path}: cannot read weights ({type(exc).__name__}: {str(exc).splitlines()[0][:160]}); "
            "the file is truncated or corrupt, re-save or re-download it"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path}: not a state dict of tensors")
    return state


def build_model(config: AlbertConfig, head: HeadSpec) -> torch.nn.Module:
    import transformers

    cls = getattr(transformers, head.hf_class)
    model = cls(config)
    model.eval()
    return model


def load_state_dict_strict(
    model: torch.nn.Module, state: dict[str, torch.Tensor], where: Path
) -> None:
    """Load ``state`` into ``model``; any missing, unexpected or mis-shaped tensor is an error.

    Tied tensors (the MLM decoder, tied to the word embeddings) may be absent.
    """
    expected = model.state_dict()
    prefix = getattr(model, "base_model_prefix", "albert") + "."
    has_base = any(k.startswith(prefix) for k in expected)
    if not has_base and state and all(k.startswith(prefix) for k in state):
        state = {k[len(prefix) :]: v for k, v in state.items()}
    missing = [
        k
        for k in expected
        if k not in state and not k.endswith(_TIED_SUFFIXES) and not k.endswith("position_ids")
    ]
    unexpected = [k for k in state if k not in expected]
    mismatched = [
        f"{k}: checkpoint {tuple(state[k].shape)} vs config {tuple(expected[k].shape)}"
        for k in state
        if k in expected and tuple(state[k].shape) != tuple(expected[k].shape)
    ]
    problems = []
    if mismatched:
        problems.append("shape mismatch: " + ", ".join(mismatched))
    if missing:
        problems.append("missing tensors: " + ", ".join(missing))
    if unexpected:
        problems.append("unexpected tensors: " + ", ".join(unexpected))
    if problems:
        raise CheckpointError(
            f"{where}: weights do not match the config ({'; '.join(problems)}); "
            "use the config.json saved with these weights"
        )
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    if hasattr(model, "tie_weights"):
        model.tie_weights()


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

        return load_tf1_checkpoint(p)
    if not p.exists():
        raise CheckpointError(
            f"{p}: no such file or directory; pass an ALBERT checkpoint directory"
        )
    if not p.is_dir():
        raise CheckpointError(
            f"{p}: expected a checkpoint directory (config.json + model.safetensors or "
            "pytorch_model.bin + spiece.model) or a TF1 checkpoint"
        )
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
    if ckpt.spiece_model is not None:
        ckpt.tokenizer().check_vocab_size(config.vocab_size, config_path)
    return ckpt
