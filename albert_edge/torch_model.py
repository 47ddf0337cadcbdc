"""The in-memory reference model: :class:`Checkpoint` and how one is built and filled.

Why its own module: the loaders — Hugging Face directories (:mod:`albert_edge.checkpoint`)
and original TF1 checkpoints (:mod:`converters.tf1_checkpoint`) — both build on this,
and the TF1 converter must not import the loader that dispatches to it (that was an
import cycle). Everything here is core: it imports nothing above ``errors``/``heads``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import CheckpointError, ConfigError
from albert_edge.heads import HeadSpec

if TYPE_CHECKING:
    import torch
    from transformers import AlbertConfig

    from albert_edge.tokenizer import AlbertTokenizer

# The config keys that describe an ALBERT's shape, wherever a config is summarized: the
# ``config`` a TFLite artifact records in its metadata (tflite.pipeline.record), what
# ``inspect`` reads from a config.json beside an ONNX file (onnx.inspect.albert_config)
# and what benchmark reports print. One tuple so that they all name the same dimensions.
CONFIG_KEYS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "inner_group_num",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
)

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


def trained_length(ckpt: Checkpoint) -> int | None:
    """The length the checkpoint was fine-tuned at, where its ``tokenizer_config.json``
    says (``model_max_length`` below ``max_position_embeddings``), else None.

    A model fine-tuned at 256 tokens never saw a position past 256 in its task: scoring
    it on 512-token windows (a SQuAD paragraph) measures untrained position embeddings,
    not the model, so the task metric encodes at the length the checkpoint records, as
    transformers' pipelines truncate at ``model_max_length``.
    """
    import json

    cfg = Path(ckpt.path) / "tokenizer_config.json"
    try:
        value = json.loads(cfg.read_text(encoding="utf-8")).get("model_max_length")
    except (OSError, ValueError, AttributeError):
        return None
    limit = int(ckpt.config.max_position_embeddings)
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < limit:
        return value
    return None


def validate_config(config: AlbertConfig, where: Path) -> None:
    """Refuse configs transformers would build but that are not a valid ALBERT."""
    c = config
    problems = []
    for name in (*CONFIG_KEYS, "type_vocab_size"):
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
        problems += _run_problems(c)
        problems += pruned_heads_problems(c)
    if problems:
        raise ConfigError(f"{where}: invalid ALBERT config: " + "; ".join(problems))


# The fewest positions a sentence needs: [CLS], one piece, [SEP].
MIN_POSITIONS = 3


def _run_problems(c: AlbertConfig) -> list[str]:
    """What keeps a config with valid sizes from running one sentence: a number that is not
    finite (NaN in config.json parses), a norm epsilon <= 0, a dropout outside [0, 1), an
    activation transformers does not have, fewer than :data:`MIN_POSITIONS` position
    embeddings, no label, or a group layout transformers' loop indexes past (layer ``i``
    runs group ``int(i / (L / G))``, which must exist and be handed ``inner_group_num``
    head-mask entries)."""
    import math

    problems = []
    for key, value in sorted(c.to_dict().items()):
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{key}={value} is not a finite number")
    eps = getattr(c, "layer_norm_eps", 1e-12)
    if isinstance(eps, int | float) and math.isfinite(eps) and eps <= 0:
        problems.append(f"layer_norm_eps={eps} must be > 0")
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob"):
        p = getattr(c, key, None)
        if isinstance(p, int | float) and math.isfinite(p) and not 0 <= p < 1:
            problems.append(f"{key}={p} must be in [0, 1)")
    from transformers.activations import ACT2FN

    if isinstance(c.hidden_act, str) and c.hidden_act not in ACT2FN:
        problems.append(f"hidden_act={c.hidden_act!r} is not an activation transformers has")
    if c.max_position_embeddings < MIN_POSITIONS:
        problems.append(
            f"max_position_embeddings={c.max_position_embeddings} cannot hold one sentence "
            f"([CLS] word [SEP] needs {MIN_POSITIONS})"
        )
    if int(getattr(c, "num_labels", 2)) < 1:
        problems.append("num_labels must be >= 1")
    L, G, inner = c.num_hidden_layers, c.num_hidden_groups, c.inner_group_num
    used = {int(i / (L / G)) for i in range(L)}
    per = int(L / G)
    if max(used) >= G or any(min(L, (g + 1) * per) - g * per < inner for g in used):
        problems.append(
            f"num_hidden_layers={L} in num_hidden_groups={G} of inner_group_num={inner} "
            "cannot run in transformers (a layer's group or head-mask slice does not exist)"
        )
    return problems


def _config_get(config: Any, key: str, default: Any = None) -> Any:
    if isinstance(config, Mapping):
        return config.get(key, default)
    return getattr(config, key, default)


def pruned_heads_of(config: Any) -> dict[int, frozenset[int]]:
    """The config's ``pruned_heads`` as {flat layer: removed heads}, integer keys.

    A pruned checkpoint is a plain Hugging Face ALBERT directory:
    ``pruned_heads`` keys are transformers' flat layer index ``group * inner_group_num +
    inner`` (``AlbertModel._prune_heads``), strings once written to ``config.json``. Reads
    an ``AlbertConfig`` or the mapping of a ``config.json`` beside an artifact alike.
    Entries that are not integers are skipped here; :func:`validate_config` refuses them.
    """
    raw = _config_get(config, "pruned_heads") or {}
    out: dict[int, frozenset[int]] = {}
    if not isinstance(raw, Mapping):
        return out
    for key, heads in raw.items():
        try:
            layer = int(key)
            removed = frozenset(int(h) for h in heads)
        except (TypeError, ValueError):
            continue
        if removed:
            out[layer] = out.get(layer, frozenset()) | removed
    return out


def shared_layer_count(config: Any) -> int:
    """Distinct shared layers: ``num_hidden_groups * inner_group_num`` (transformers' flat
    layer indices run below it). Reads an ``AlbertConfig`` or a ``config.json`` mapping."""
    groups = int(_config_get(config, "num_hidden_groups", 1) or 1)
    return groups * int(_config_get(config, "inner_group_num", 1) or 1)


def kept_heads(config: Any) -> tuple[int, ...]:
    """Attention heads each distinct shared layer keeps, in flat order (group-major, then
    inner layer): ``num_attention_heads`` minus that layer's pruned heads.

    Why one function: the attention fusion (each fused node's ``num_heads``), the byte
    floor (Q/K/V/dense are ``kept * head_dim`` wide), the TFLite builder and ``inspect``
    all need the same per-layer count, and an unpruned config gives every layer all heads.
    """
    heads = int(_config_get(config, "num_attention_heads", 1))
    pruned = pruned_heads_of(config)
    return tuple(
        heads - len({h for h in pruned.get(i, frozenset()) if 0 <= h < heads})
        for i in range(shared_layer_count(config))
    )


def head_size(config: Any) -> int:
    """Width of one attention head: ``hidden_size // num_attention_heads`` (pruning removes
    heads, never narrows one)."""
    return int(_config_get(config, "hidden_size")) // int(
        _config_get(config, "num_attention_heads", 1)
    )


def is_pruned(config: Any) -> bool:
    """Whether any shared layer lost heads (the FFN width alone is just ``intermediate_size``)."""
    return bool(pruned_heads_of(config))


def pruning_record(config: Any) -> dict[str, Any]:
    """What an artifact records of a pruned checkpoint (ONNX metadata, TFLite record,
    ``inspect``): ``pruned_heads`` as ``config.json`` writes it (string keys, sorted
    heads) and the heads each distinct shared layer keeps. Empty when nothing was pruned,
    so an unpruned model's metadata is what it always was. The FFN width needs no entry:
    it is ``intermediate_size``."""
    pruned = pruned_heads_of(config)
    if not pruned:
        return {}
    return {
        "pruned_heads": {str(k): sorted(v) for k, v in sorted(pruned.items())},
        "kept_heads": list(kept_heads(config)),
    }


def pruned_heads_problems(c: Any) -> list[str]:
    """What makes ``pruned_heads`` impossible for this shape: a key that is not a flat
    layer index below ``num_hidden_groups * inner_group_num``, a head index outside
    ``[0, num_attention_heads)``, or a layer left with no head (its attention would be a
    zero-width product no runtime's attention kernel takes; drop the layer instead)."""
    raw = _config_get(c, "pruned_heads") or {}
    if not raw:
        return []
    if not isinstance(raw, Mapping):
        return [f"pruned_heads={raw!r} must map a layer index to a list of head indices"]
    heads = int(_config_get(c, "num_attention_heads"))
    distinct = int(_config_get(c, "num_hidden_groups", 1)) * int(
        _config_get(c, "inner_group_num", 1)
    )
    problems = []
    for key, removed in raw.items():
        try:
            layer = int(key)
        except (TypeError, ValueError):
            problems.append(f"pruned_heads key {key!r} is not a layer index")
            continue
        if not 0 <= layer < distinct:
            problems.append(
                f"pruned_heads layer {layer} does not exist (num_hidden_groups x "
                f"inner_group_num = {distinct} shared layers, indexed from 0)"
            )
            continue
        if not isinstance(removed, list | tuple | set | frozenset) or not all(
            isinstance(h, int) and not isinstance(h, bool) for h in removed
        ):
            problems.append(f"pruned_heads[{layer}]={removed!r} must be a list of head indices")
            continue
        bad = sorted(h for h in removed if not 0 <= h < heads)
        if bad:
            problems.append(
                f"pruned_heads[{layer}] names head(s) {bad} outside 0..{heads - 1} "
                f"(num_attention_heads={heads})"
            )
        elif len(set(removed)) >= heads:
            problems.append(
                f"pruned_heads[{layer}] removes all {heads} heads of shared layer {layer}; "
                "keep at least one"
            )
    return problems


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


def write_weights(
    out_dir: Path, config: AlbertConfig, head: HeadSpec, state: dict[str, torch.Tensor]
) -> None:
    """``config.json`` and ``model.safetensors`` of an ordinary HF ALBERT directory (what a
    truncated or trimmed checkpoint is), written only after ``state`` loads strictly into
    ``config``'s model: a tensor missing, extra or mis-shaped is refused, never saved."""
    import json

    from safetensors.torch import save_file

    load_state_dict_strict(build_model(config, head), state, out_dir)
    data = config.to_dict()
    data.pop("_name_or_path", None)  # a build-machine path, never in a checkpoint we write
    (out_dir / "config.json").write_text(
        json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"
    )
    save_file({k: v.contiguous() for k, v in state.items()}, str(out_dir / "model.safetensors"))
