"""Original google-research/albert TF1 checkpoints → transformers' PyTorch ALBERT.

Accepted inputs (``load_tf1_checkpoint(path)``):

- a directory with ``albert_config.json``, ``model.ckpt-N.index`` + ``.data-*`` and
  ``30k-clean.model`` (or ``spiece.model``): the checkpoint named by the ``checkpoint``
  file is used, else the highest step (a single non-numbered one such as the releases'
  ``model.ckpt-best`` is used as is);
- a checkpoint prefix (``.../model.ckpt-10000``) or one of its ``.index``/``.data-*``/
  ``.meta`` files; config and tokenizer are looked up beside it;
- a TF-Hub module directory (``variables/variables.index``; ``albert_config.json`` and
  the SentencePiece model at the top or under ``assets/``, where export_to_tfhub.py
  puts them). Variables may carry TF-Hub's ``module/`` prefix; it is stripped per
  variable, since a model fine-tuned on a hub module has ``module/bert/...`` beside an
  unprefixed classifier.

Why strict: a loader that tolerates unknown or missing variables silently exports a
model that is not the user's. Every variable is either mapped (one table,
:func:`expected_variables`, built from the names modeling.py, run_pretraining.py,
classifier_utils.py and squad_utils.py create), skipped by the single training-only
rule (:func:`is_training_only`), or reported; all problems are reported together in one
:class:`CheckpointError` line.

Facts of the original code this module depends on (google-research/albert):

- Dense kernels are stored ``[in, out]`` (``dense_layer_2d``, ``dense_layer_3d`` keeps a
  2-D ``[H, N*D]`` variable, ``dense_layer_3d_proj`` a 2-D ``[N*D, H]`` one, and
  ``tf.layers.dense``); torch's ``nn.Linear`` wants ``[out, in]``, so they are transposed.
  ``output_weights`` of the classifier/SOP/SQuAD heads are ``[labels, H]`` (used with
  ``transpose_b=True``) and are copied as is.
- ``transformer_model`` creates ``embedding_hidden_mapping_in`` only when
  ``embedding_size != hidden_size``. transformers always has that Linear, so for E == H
  it is set to the identity (weight ``I``, bias ``0``): the function the original computes.
- Layer ``i`` of ``L`` uses group ``int(i / L * G)`` in TF but ``int(i / (L / G))`` in
  transformers. They agree for every config where G divides L except some float-rounding
  cases (e.g. L = G = 22: TF puts layer 15 in group 14 and never creates group_15);
  :func:`group_sources` maps each transformers group to the TF group its layers use, and
  refuses configs transformers cannot express.
- ``gelu`` in modeling.py is the tanh approximation, which transformers calls
  ``gelu_new`` (NewGELUActivation, the same formula); see :data:`ACTIVATIONS`.
- ``contrib.layers.layer_norm`` uses epsilon 1e-12 (transformers' ``layer_norm_eps``).
- ``bert/pooler/dense`` exists in every original checkpoint, but transformers builds its
  masked-LM and QA models without a pooler (their outputs never read it): for those heads
  the pooler is checked (present, right shape, readable) and then dropped.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import CheckpointError, ConfigError, TokenizerError, UnsupportedError
from albert_edge.heads import HEADS, HeadSpec
from albert_edge.torch_model import (
    Checkpoint,
    build_model,
    load_state_dict_strict,
    validate_config,
)

if TYPE_CHECKING:
    import numpy as np
    import torch
    from transformers import AlbertConfig

CONFIG_NAME = "albert_config.json"
# transformers builds these heads' AlbertModel with add_pooling_layer=False.
HEADS_WITHOUT_POOLER = frozenset({"masked-lm", "question-answering", "token-classification"})
TOKENIZER_NAMES = ("30k-clean.model", "spiece.model")
MODULE_PREFIX = "module/"

# --- the training-only rule ------------------------------------------------------------
# Variables an optimizer or training loop adds; they never affect the model's outputs.
# Skipped: these exact top-level names, and ``X/<slot>`` for a slot name below when the
# variable ``X`` itself is in the checkpoint (an orphan slot is reported, not skipped).
TRAINING_ONLY_NAMES = frozenset(
    {
        "global_step",  # tf.train.get_or_create_global_step
        "beta1_power",  # tf.train.AdamOptimizer's accumulators
        "beta2_power",
        "current_loss_scale",  # mixed-precision loss scaling
        "good_steps",
    }
)
TRAINING_ONLY_SLOTS = frozenset(
    {
        "adam_m",  # ALBERT's AdamWeightDecayOptimizer and LAMBOptimizer
        "adam_v",
        "lamb_m",  # older LAMB exports (export_checkpoints.py filters these names)
        "lamb_v",
        "Adam",  # tf.train.AdamOptimizer slots
        "Adam_1",
        "Momentum",  # tf.train.MomentumOptimizer
        "Adagrad",
        "RMSProp",
        "RMSProp_1",
        "AdamWeightDecayOptimizer",  # slot-API variants of BERT's optimizer
        "AdamWeightDecayOptimizer_1",
    }
)

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


# --- locating the files -----------------------------------------------------------------


@dataclass(frozen=True)
class TF1Files:
    """Where the pieces of one TF1 ALBERT checkpoint are."""

    root: Path  # the directory the user meant (module dir for TF-Hub)
    prefix: Path  # checkpoint prefix: prefix.index, prefix.data-*
    config: Path
    spiece: Path | None


_DATA_RE = re.compile(r"^(?P<prefix>.+)\.data-(?P<shard>\d+)-of-(?P<count>\d+)$")
_STEP_RE = re.compile(r"-(\d+)$")
_CKPT_STATE_RE = re.compile(r'^\s*model_checkpoint_path:\s*"(?P<path>(?:[^"\\]|\\.)*)"', re.M)


def _prefix_from_file(path: Path) -> Path | None:
    name = path.name
    if name.endswith(".index"):
        return path.with_name(name[: -len(".index")])
    if name.endswith(".meta"):
        return path.with_name(name[: -len(".meta")])
    m = _DATA_RE.match(name)
    if m:
        return path.with_name(m.group("prefix"))
    return None


def _index(prefix: Path) -> Path:
    return prefix.with_name(prefix.name + ".index")


def _unescape(text: str) -> str:
    """Undo text-proto (C-style) escaping of a string field; keep it as is if odd."""
    try:
        return ast.literal_eval('b"' + text + '"').decode("utf-8")
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return text


def _prefix_from_state_file(directory: Path) -> Path | None:
    """The prefix the ``checkpoint`` state file names, or None without a state file."""
    state = directory / "checkpoint"
    if not state.is_file():
        return None
    try:
        text = state.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{state}: unreadable ({exc}); delete it or restore it") from None
    m = _CKPT_STATE_RE.search(text)
    if not m:
        raise CheckpointError(
            f"{state}: no model_checkpoint_path line; delete this file to use the highest "
            "step, or pass the checkpoint prefix (e.g. DIR/model.ckpt-10000)"
        )
    named = Path(_unescape(m.group("path")))
    # The user named this directory: a checkpoint here wins over the absolute path the
    # state file recorded (training dirs get copied; the old location may still exist).
    candidates = [directory / named.name]
    if not named.is_absolute():
        candidates.insert(0, directory / named)
    for cand in candidates:
        if _index(cand).is_file():
            return cand
    raise CheckpointError(
        f"{state}: names checkpoint {named} but {named.name}.index is not in {directory}; "
        "copy that checkpoint's .index and .data-* files here, or pass the prefix you want "
        "(e.g. DIR/model.ckpt-10000)"
    )


def _prefix_in_dir(directory: Path) -> Path:
    named = _prefix_from_state_file(directory)
    if named is not None:
        return named
    prefixes = sorted(p.with_suffix("") for p in directory.glob("*.index"))
    if not prefixes:
        raise CheckpointError(
            f"{directory}: no TF checkpoint here (expected model.ckpt-N.index and "
            "model.ckpt-N.data-* files, or a TF-Hub module with variables/variables.index)"
        )
    numbered = [(int(m.group(1)), p) for p in prefixes if (m := _STEP_RE.search(p.name))]
    if numbered:
        return max(numbered)[1]
    if len(prefixes) == 1:
        return prefixes[0]
    raise CheckpointError(
        f"{directory}: several checkpoints ({', '.join(p.name for p in prefixes)}) and no "
        "'checkpoint' file to choose; pass the prefix you want, e.g. "
        f"{prefixes[0]}"
    )


def _first_file(dirs: list[Path], names: tuple[str, ...]) -> Path | None:
    for d in dirs:
        for name in names:
            if (d / name).is_file():
                return d / name
    return None


def locate_tf1_files(path: Path) -> TF1Files:
    """Resolve ``path`` to checkpoint prefix, albert_config.json and SentencePiece model."""
    path = Path(path)
    if path.is_dir():
        hub_index = path / "variables" / "variables.index"
        if hub_index.is_file():
            root, prefix = path, path / "variables" / "variables"
        else:
            root, prefix = path, _prefix_in_dir(path)
    else:
        from_file = _prefix_from_file(path) if path.is_file() else None
        prefix = from_file if from_file is not None else path
        if not _index(prefix).is_file():
            if not path.exists():
                raise CheckpointError(
                    f"{path}: no such file or directory, and {path.name}.index does not exist "
                    "either; pass a TF checkpoint prefix (DIR/model.ckpt-N) or its directory"
                )
            raise CheckpointError(
                f"{path}: not a TF checkpoint ({prefix.name}.index is missing); pass the "
                "checkpoint directory or its prefix (DIR/model.ckpt-N)"
            )
        root = prefix.parent
    if prefix.name == "variables" and prefix.parent.name == "variables":
        root = prefix.parent.parent  # a TF-Hub module (named by its dir, variables/ or files)
    search = list(dict.fromkeys([prefix.parent, root, root / "assets"]))
    config = _first_file(search, (CONFIG_NAME,))
    if config is None:
        raise CheckpointError(
            f"{root}: no {CONFIG_NAME} beside the checkpoint {prefix.name}; copy the "
            f"{CONFIG_NAME} of the pretrained ALBERT this checkpoint comes from into {root}"
        )
    spiece = _first_file(search, TOKENIZER_NAMES)
    return TF1Files(root=root, prefix=prefix, config=config, spiece=spiece)


# --- albert_config.json -------------------------------------------------------------------


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


# --- the variable table -------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where one TF variable goes: transformers names, and whether to transpose."""

    hf_names: tuple[str, ...]
    tf_shape: tuple[int, ...]
    transpose: bool = False


def _layer_variables(cfg: AlbertConfig) -> list[tuple[str, str, tuple[int, ...], bool]]:
    """(TF suffix, transformers suffix, TF shape, transpose) of one inner-group layer."""
    h, i = cfg.hidden_size, cfg.intermediate_size
    rows: list[tuple[str, str, tuple[int, ...], bool]] = []
    for part in ("query", "key", "value"):
        rows.append((f"attention_1/self/{part}/kernel", f"attention.{part}.weight", (h, h), True))
        rows.append((f"attention_1/self/{part}/bias", f"attention.{part}.bias", (h,), False))
    rows += [
        ("attention_1/output/dense/kernel", "attention.dense.weight", (h, h), True),
        ("attention_1/output/dense/bias", "attention.dense.bias", (h,), False),
        ("LayerNorm/gamma", "attention.LayerNorm.weight", (h,), False),
        ("LayerNorm/beta", "attention.LayerNorm.bias", (h,), False),
        ("ffn_1/intermediate/dense/kernel", "ffn.weight", (h, i), True),
        ("ffn_1/intermediate/dense/bias", "ffn.bias", (i,), False),
        ("ffn_1/intermediate/output/dense/kernel", "ffn_output.weight", (i, h), True),
        ("ffn_1/intermediate/output/dense/bias", "ffn_output.bias", (h,), False),
        ("LayerNorm_1/gamma", "full_layer_layer_norm.weight", (h,), False),
        ("LayerNorm_1/beta", "full_layer_layer_norm.bias", (h,), False),
    ]
    return rows


def expected_variables(
    cfg: AlbertConfig, head: HeadSpec, num_labels: int = 2, where: Path | None = None
) -> dict[str, Target]:
    """Every variable the original code creates for ``cfg`` and ``head`` (prefix-free)."""
    v, e, h = cfg.vocab_size, cfg.embedding_size, cfg.hidden_size
    base = "" if head.name == "base" else "albert."
    table: dict[str, Target] = {}

    def add(tf_name: str, hf: str | tuple[str, ...], shape: tuple[int, ...], t: bool = False):
        names = (hf,) if isinstance(hf, str) else hf
        table[tf_name] = Target(names, shape, t)

    add("bert/embeddings/word_embeddings", f"{base}embeddings.word_embeddings.weight", (v, e))
    add(
        "bert/embeddings/token_type_embeddings",
        f"{base}embeddings.token_type_embeddings.weight",
        (cfg.type_vocab_size, e),
    )
    add(
        "bert/embeddings/position_embeddings",
        f"{base}embeddings.position_embeddings.weight",
        (cfg.max_position_embeddings, e),
    )
    add("bert/embeddings/LayerNorm/gamma", f"{base}embeddings.LayerNorm.weight", (e,))
    add("bert/embeddings/LayerNorm/beta", f"{base}embeddings.LayerNorm.bias", (e,))
    if e != h:  # modeling.transformer_model creates it only then (see module docstring)
        mapping = f"{base}encoder.embedding_hidden_mapping_in"
        add("bert/encoder/embedding_hidden_mapping_in/kernel", f"{mapping}.weight", (e, h), True)
        add("bert/encoder/embedding_hidden_mapping_in/bias", f"{mapping}.bias", (h,))

    sources = group_sources(cfg.num_hidden_layers, cfg.num_hidden_groups, where)
    for tf_group in sorted(set(sources)):
        hf_groups = [g for g, src in enumerate(sources) if src == tf_group]
        for k in range(cfg.inner_group_num):
            tf_prefix = f"bert/encoder/transformer/group_{tf_group}/inner_group_{k}/"
            for tf_suffix, hf_suffix, shape, t in _layer_variables(cfg):
                hf_names = tuple(
                    f"{base}encoder.albert_layer_groups.{g}.albert_layers.{k}.{hf_suffix}"
                    for g in hf_groups
                )
                add(tf_prefix + tf_suffix, hf_names, shape, t)

    # The original always creates the pooler. transformers' MLM and QA models are built
    # without one (AlbertModel(add_pooling_layer=False)) because their outputs never read
    # it: the pooler is then checked (name, shape, readable) and dropped: the one mapped
    # variable with no destination (hf_names == ()).
    pooler = head.name not in HEADS_WITHOUT_POOLER
    add("bert/pooler/dense/kernel", f"{base}pooler.weight" if pooler else (), (h, h), True)
    add("bert/pooler/dense/bias", f"{base}pooler.bias" if pooler else (), (h,))

    if head.name in ("masked-lm", "pretraining"):  # run_pretraining.get_masked_lm_output
        add("cls/predictions/transform/dense/kernel", "predictions.dense.weight", (h, e), True)
        add("cls/predictions/transform/dense/bias", "predictions.dense.bias", (e,))
        add("cls/predictions/transform/LayerNorm/gamma", "predictions.LayerNorm.weight", (e,))
        add("cls/predictions/transform/LayerNorm/beta", "predictions.LayerNorm.bias", (e,))
        add("cls/predictions/output_bias", "predictions.bias", (v,))
    if head.name == "pretraining":  # run_pretraining.get_sentence_order_output
        add("cls/seq_relationship/output_weights", "sop_classifier.classifier.weight", (2, h))
        add("cls/seq_relationship/output_bias", "sop_classifier.classifier.bias", (2,))
    if head.name == "sequence-classification":  # classifier_utils.create_model
        add("output_weights", "classifier.weight", (num_labels, h))
        add("output_bias", "classifier.bias", (num_labels,))
    if head.name == "question-answering":  # squad_utils.create_v1_model
        add("cls/squad/output_weights", "qa_outputs.weight", (2, h))
        add("cls/squad/output_bias", "qa_outputs.bias", (2,))
    return table


def is_training_only(name: str, names: set[str]) -> bool:
    """The one skip rule: optimizer state and step counters (see TRAINING_ONLY_*)."""
    if name in TRAINING_ONLY_NAMES:
        return True
    base, _, slot = name.rpartition("/")
    return slot in TRAINING_ONLY_SLOTS and base in names


def detect_head(names: set[str], where: Path) -> HeadSpec:
    """The transformers head the checkpoint's variables describe."""
    has_mlm = any(n.startswith("cls/predictions/") for n in names)
    has_sop = any(n.startswith("cls/seq_relationship/") for n in names)
    families = {
        "classifier (output_weights/output_bias)": bool(names & {"output_weights", "output_bias"}),
        "SQuAD (cls/squad)": any(n.startswith("cls/squad/") for n in names),
        "pretraining (cls/predictions, cls/seq_relationship)": has_mlm or has_sop,
    }
    found = [label for label, present in families.items() if present]
    if len(found) > 1:
        raise CheckpointError(
            f"{where}: variables of several heads ({', '.join(found)}); one transformers "
            "model holds one head: export the checkpoint with only the head you want"
        )
    if not found:
        return HEADS["base"]
    if found[0].startswith("classifier"):
        return HEADS["sequence-classification"]
    if found[0].startswith("SQuAD"):
        return HEADS["question-answering"]
    if not has_mlm:
        raise CheckpointError(
            f"{where}: a sentence-order head (cls/seq_relationship) without the masked-LM "
            "head (cls/predictions); transformers has no such model, export both or neither"
        )
    return HEADS["pretraining" if has_sop else "masked-lm"]


# --- reading ------------------------------------------------------------------------------


@contextmanager
def _native_stderr_captured() -> Iterator[None]:
    """Hide what TensorFlow's C++ runtime prints to fd 2 while it is imported.

    Importing TensorFlow writes absl/oneDNN banners straight to file descriptor 2, which
    no environment variable silences without changing TF's kernels (TF_ENABLE_ONEDNN_OPTS).
    The CLI promises one error line, so the banners are captured and only replayed if the
    import itself fails.
    """
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # no real stderr (e.g. captured by a host)
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), fd)
        ok = False
        try:
            yield
            ok = True
        finally:
            os.dup2(saved, fd)
            os.close(saved)
            if not ok:
                sink.seek(0)
                sys.stderr.write(sink.read().decode(errors="replace"))


def _tensorflow() -> Any:
    from albert_edge.extras import require

    require("tflite", "reading a TF1 checkpoint", ("tensorflow",))
    try:
        if "tensorflow" not in sys.modules:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            with _native_stderr_captured():
                import tensorflow  # noqa: F401
        import tensorflow as tf
    except ImportError as exc:
        raise UnsupportedError(
            f"reading TF1 checkpoints needs TensorFlow ({exc}); pip install tensorflow-cpu"
        ) from None
    return tf


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def _check_data_shards(prefix: Path) -> None:
    shards = sorted(prefix.parent.glob(prefix.name + ".data-*-of-*"))
    if not shards:
        raise CheckpointError(
            f"{_index(prefix)}: no {prefix.name}.data-* file beside it; copy the checkpoint's "
            ".data-00000-of-0000N files into the same directory"
        )
    counts = {int(m.group("count")) for s in shards if (m := _DATA_RE.match(s.name))}
    expected = {
        f"{prefix.name}.data-{i:05d}-of-{count:05d}" for count in counts for i in range(count)
    }
    missing = sorted(expected - {s.name for s in shards})
    if missing or len(counts) != 1:
        raise CheckpointError(
            f"{prefix.parent}: checkpoint data shards missing or inconsistent "
            f"({', '.join(missing) or 'mixed shard counts'}); copy all .data-* files of "
            f"{prefix.name}"
        )


def _open_reader(prefix: Path) -> Any:
    index = _index(prefix)
    if index.stat().st_size == 0:
        raise CheckpointError(f"{index}: empty file; re-download or re-export the checkpoint")
    tf = _tensorflow()
    try:
        return tf.train.load_checkpoint(str(prefix))
    except Exception as exc:  # tf.errors.DataLossError, NotFoundError, ...
        raise CheckpointError(
            f"{index}: cannot read the checkpoint index ({_first_line(exc)}); the file is "
            "truncated or corrupt, re-download or re-export the checkpoint"
        ) from None


def _read_tensor(reader: Any, name: str, prefix: Path) -> np.ndarray:
    import numpy as np

    try:
        value = reader.get_tensor(name)
    except Exception as exc:  # DataLossError (checksum), IndexError (short read), ...
        raise CheckpointError(
            f"{prefix}.data-*: cannot read variable {name} ({_first_line(exc)}); the data "
            "file is truncated or corrupt, re-download or re-export the checkpoint"
        ) from None
    return np.asarray(value)


def _is_float(dtype: Any) -> bool:
    return bool(getattr(dtype, "is_floating", False))


def _shape_text(shape: tuple[int, ...] | list[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _join(items: list[str]) -> str:
    return ", ".join(items)


def _strip_module(names: list[str], where: Path) -> dict[str, str]:
    """Prefix-free name → name in the checkpoint (TF-Hub's ``module/`` removed)."""
    result: dict[str, str] = {}
    clashes = []
    for name in names:
        plain = name[len(MODULE_PREFIX) :] if name.startswith(MODULE_PREFIX) else name
        if plain in result:
            clashes.append(f"{result[plain]} and {name}")
        result[plain] = name
    if clashes:
        raise CheckpointError(
            f"{where}: variables present both with and without TF-Hub's module/ prefix "
            f"({_join(clashes)}); export one model per checkpoint"
        )
    return result


# --- the loader ---------------------------------------------------------------------------


def load_tf1_checkpoint(path: Path, *, require_tokenizer: bool = True) -> Checkpoint:
    """Load an original google-research/albert TF1 checkpoint into transformers' classes.

    ``path``: a checkpoint directory, a checkpoint prefix, or a TF-Hub module directory
    (see the module docstring). The head follows the variables: ``bert/`` only → base;
    ``cls/predictions`` → masked-lm; plus ``cls/seq_relationship`` → pretraining;
    classifier_utils' top-level ``output_weights``/``output_bias`` →
    sequence-classification (num_labels from their shape); ``cls/squad`` →
    question-answering (run_squad_v1).

    Raises CheckpointError/ConfigError/TokenizerError/UnsupportedError with one line.
    """
    # torch before TensorFlow (_open_reader imports it), the order this loader was always
    # tested in: both bring native libraries, and the state dict needs torch anyway
    import torch  # noqa: F401

    path = Path(path)
    files = locate_tf1_files(path)
    if files.spiece is None and require_tokenizer:
        raise TokenizerError(
            f"{files.root}: no {' or '.join(TOKENIZER_NAMES)} beside the checkpoint; copy the "
            "SentencePiece model of the pretrained ALBERT release into that directory"
        )
    config = config_from_albert_json(files.config)
    _check_data_shards(files.prefix)
    reader = _open_reader(files.prefix)
    shapes, dtypes = _variable_maps(reader, files.prefix)

    by_plain = _strip_module(sorted(shapes), files.prefix)
    plain_names = set(by_plain)
    model_names = {n for n in plain_names if not is_training_only(n, plain_names)}
    head = detect_head(model_names, files.prefix)
    num_labels = _num_labels(head, shapes, by_plain)
    table = expected_variables(config, head, num_labels, files.config)
    problems = _mismatches(table, model_names, plain_names, by_plain, shapes, dtypes)
    if problems:
        raise CheckpointError(
            f"{files.prefix}: checkpoint does not match {files.config.name} as a "
            f"{head.name} ALBERT ({'; '.join(problems)}); use the {CONFIG_NAME} this "
            "checkpoint was trained with and an unmodified checkpoint"
        )

    config.architectures = [head.hf_class]
    config.num_labels = num_labels
    if files.spiece is not None:
        from albert_edge.tokenizer import AlbertTokenizer

        AlbertTokenizer(files.spiece).check_vocab_size(config.vocab_size, files.config)

    state = _state_dict(reader, table, by_plain, files.prefix, config, head)
    model = build_model(config, head)
    load_state_dict_strict(model, state, files.prefix)
    return Checkpoint(
        path=path,
        source="tf1",
        config=config,
        head=head,
        model=model,
        spiece_model=files.spiece,
        do_lower_case=True,  # the releases' and run_classifier's default (do_lower_case=True)
        extra_files={"albert_config": files.config, "tf1_index": _index(files.prefix)},
    )


def _variable_maps(reader: Any, prefix: Path) -> tuple[dict[str, list[int]], dict[str, Any]]:
    """Every variable's shape and dtype, read from the index alone (no tensor data): a
    corrupt index is named here, in one line, before anything large is read."""
    try:
        shapes: dict[str, list[int]] = reader.get_variable_to_shape_map()
        dtypes: dict[str, Any] = reader.get_variable_to_dtype_map()
    except Exception as exc:
        raise CheckpointError(
            f"{_index(prefix)}: cannot list variables ({_first_line(exc)}); the "
            "checkpoint is corrupt, re-download or re-export it"
        ) from None
    return shapes, dtypes


def _num_labels(head: HeadSpec, shapes: dict[str, list[int]], by_plain: dict[str, str]) -> int:
    """The classifier's label count, from the first dimension of ``output_weights``
    ([num_labels, H]) or ``output_bias``; 2 for every other head (SOP and SQuAD have two
    outputs), which the config cannot say: run_classifier sets it per task."""
    if head.name == "sequence-classification":
        for name in ("output_weights", "output_bias"):
            shape = shapes.get(by_plain.get(name, ""), [])
            if shape:
                return int(shape[0])
    return 2


def _mismatches(
    table: dict[str, Target],
    model_names: set[str],
    plain_names: set[str],
    by_plain: dict[str, str],
    shapes: dict[str, list[int]],
    dtypes: dict[str, Any],
) -> list[str]:
    """Every way the checkpoint's variables disagree with what the config and head
    create: wrong shapes, non-float dtypes, missing and unmapped variables, all named in
    one message (one re-export fixes them all; one at a time would take as many runs)."""
    mismatched, bad_dtype = [], []
    for name, target in table.items():
        if name not in model_names:
            continue
        actual = tuple(int(d) for d in shapes[by_plain[name]])
        if actual != target.tf_shape:
            mismatched.append(
                f"{by_plain[name]} {_shape_text(actual)} vs config {_shape_text(target.tf_shape)}"
            )
        if not _is_float(dtypes[by_plain[name]]):
            bad_dtype.append(f"{by_plain[name]} ({dtypes[by_plain[name]].name})")
    missing = sorted(n for n in table if n not in model_names)
    unmapped = sorted(by_plain[n] for n in model_names if n not in table)
    problems = []
    if mismatched:
        problems.append("shape mismatch: " + _join(mismatched))
    if bad_dtype:
        problems.append("not floating point: " + _join(bad_dtype))
    if missing:
        problems.append("missing variables: " + _join(missing))
    if unmapped:
        hint = ""
        if "_CHECKPOINTABLE_OBJECT_GRAPH" in plain_names:
            hint = " (this is a TF2 object-based checkpoint, not an original TF1 one)"
        problems.append(f"unmapped variables{hint}: " + _join(unmapped))
    return problems


def _state_dict(
    reader: Any,
    table: dict[str, Target],
    by_plain: dict[str, str],
    prefix: Path,
    config: AlbertConfig,
    head: HeadSpec,
) -> dict[str, torch.Tensor]:
    """The transformers state dict: each TF variable read once, transposed where TF's
    kernels are [in, out], and one tensor object under every name it feeds (a shared
    weight stays shared). E == H releases have no projection: an identity stands in."""
    import torch

    state: dict[str, torch.Tensor] = {}
    for name, target in table.items():
        array = _read_tensor(reader, by_plain[name], prefix).astype("float32", copy=False)
        if target.transpose:
            array = array.T
        tensor = torch.from_numpy(array.copy())  # contiguous, owned: the reader's buffer is not
        for hf_name in target.hf_names:
            state[hf_name] = tensor
    if config.embedding_size == config.hidden_size:
        mapping = ("" if head.name == "base" else "albert.") + "encoder.embedding_hidden_mapping_in"
        state[f"{mapping}.weight"] = torch.eye(config.hidden_size)
        state[f"{mapping}.bias"] = torch.zeros(config.hidden_size)
    return state
