"""An original ``albert_config.json`` read into transformers' ``AlbertConfig``, and the
layer-group schedule both codes run (original ALBERT and transformers round differently).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import ConfigError, UnsupportedError
from albert_edge.torch_model import validate_config
from converters.tf1_files import CONFIG_NAME

if TYPE_CHECKING:
    from transformers import AlbertConfig

# modeling.get_activation() name → the transformers ACT2FN key computing the same
# function. modeling.gelu is 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), which is
# transformers' NewGELUActivation ("gelu_new"), not the erf GELU transformers calls "gelu".
# get_activation() returns None (identity) for "linear" and the empty string.
ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu", "tanh": "tanh", "linear": "linear", "": "linear"}

# Defaults of modeling.AlbertConfig.__init__ (vocab_size has none: it is required).
ORIGINAL_DEFAULTS: dict[str, Any] = {
    "embedding_size": 128,
    "hidden_size": 4096,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "num_attention_heads": 64,
    "intermediate_size": 16384,
    "inner_group_num": 1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}
# Dimensions: must be integers (JSON written by Python may say 768.0).
_INT_KEYS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "num_attention_heads",
    "intermediate_size",
    "inner_group_num",
    "max_position_embeddings",
    "type_vocab_size",
)
# contrib.layers.layer_norm's fixed variance epsilon (float32).
LAYER_NORM_EPS = 1e-12


def hf_activation(name: Any, where: Path) -> str:
    """The transformers activation computing what modeling.get_activation(name) computes."""
    if name is None:
        return "linear"
    if not isinstance(name, str) or name.lower() not in ACTIVATIONS:
        raise ConfigError(
            f"{where}: hidden_act={name!r} is not an activation original ALBERT knows; use "
            "one of gelu, relu, tanh, linear"
        )
    return ACTIVATIONS[name.lower()]


def config_from_albert_json(path: Path) -> AlbertConfig:
    """Read an original ``albert_config.json`` into transformers' AlbertConfig.

    Only the keys of :data:`ORIGINAL_DEFAULTS` and ``vocab_size`` shape the model; missing
    ones take modeling.AlbertConfig's defaults. Other keys (the releases'
    ``down_scale_factor``, ``net_structure_type``, ``gap_size``, ``num_memory_blocks``)
    are stored but never read by modeling.py, so they are ignored, as the original does.
    """
    from transformers import AlbertConfig

    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{path}: not valid JSON ({exc}); restore the albert_config.json of the release"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object; restore the release's {CONFIG_NAME}")
    if data.get("vocab_size") is None:
        raise ConfigError(f"{path}: vocab_size is missing; restore the release's {CONFIG_NAME}")
    values = {**ORIGINAL_DEFAULTS, **{k: data[k] for k in ORIGINAL_DEFAULTS if k in data}}
    values["vocab_size"] = data["vocab_size"]
    for key in _INT_KEYS:
        v = values[key]
        if isinstance(v, float) and v.is_integer():
            values[key] = int(v)
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range"):
        if not isinstance(values[key], int | float) or isinstance(values[key], bool):
            raise ConfigError(f"{path}: {key}={values[key]!r} must be a number")
    try:
        config = AlbertConfig(
            vocab_size=values["vocab_size"],
            embedding_size=values["embedding_size"],
            hidden_size=values["hidden_size"],
            num_hidden_layers=values["num_hidden_layers"],
            num_hidden_groups=values["num_hidden_groups"],
            num_attention_heads=values["num_attention_heads"],
            intermediate_size=values["intermediate_size"],
            inner_group_num=values["inner_group_num"],
            hidden_act=hf_activation(values["hidden_act"], path),
            hidden_dropout_prob=float(values["hidden_dropout_prob"]),
            attention_probs_dropout_prob=float(values["attention_probs_dropout_prob"]),
            max_position_embeddings=values["max_position_embeddings"],
            type_vocab_size=values["type_vocab_size"],
            initializer_range=float(values["initializer_range"]),
            layer_norm_eps=LAYER_NORM_EPS,
            position_embedding_type="absolute",
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: invalid ALBERT config ({exc})") from None
    validate_config(config, path)
    return config


# --- the group schedule -------------------------------------------------------------------


def group_sources(num_layers: int, num_groups: int, where: Path | None = None) -> list[int]:
    """For each transformers layer group, the original TF group whose weights it must hold.

    Layer ``i`` runs TF group ``int(i / L * G)`` (modeling.transformer_model) and
    transformers group ``int(i / (L / G))`` (AlbertTransformer). Usually the identity;
    where float rounding makes them differ, transformers group ``h`` gets a copy of the TF
    group every layer using ``h`` runs in TF. If those layers run different TF groups,
    transformers cannot express the original model.
    """
    tf_groups = [int(i / num_layers * num_groups) for i in range(num_layers)]
    source: dict[int, int] = {}
    for i, tf_group in enumerate(tf_groups):
        hf_group = int(i / (num_layers / num_groups))
        if source.setdefault(hf_group, tf_group) != tf_group:
            raise UnsupportedError(
                f"{where or 'config'}: num_hidden_layers={num_layers}, "
                f"num_hidden_groups={num_groups}: original ALBERT runs layer {i} with group "
                f"{tf_group} but transformers shares group {hf_group} between layers that "
                f"original ALBERT runs with groups {source[hf_group]} and {tf_group}; "
                "transformers cannot express this model (choose G dividing L without rounding)"
            )
    used = set(tf_groups)
    result = []
    for h in range(num_groups):
        if h in source:
            result.append(source[h])
        elif h in used:  # a transformers group no layer runs: any valid weights will do
            result.append(h)
        else:
            raise UnsupportedError(
                f"{where or 'config'}: num_hidden_layers={num_layers}, "
                f"num_hidden_groups={num_groups}: transformers group {h} is never run and the "
                "original model has no weights for it"
            )
    return result
