"""The variable table of an original TF1 ALBERT: every variable modeling.py,
run_pretraining.py, classifier_utils.py and squad_utils.py create for a config and head,
where each goes in transformers, the one training-only skip rule, the head a
checkpoint's variables describe, and every way a checkpoint disagrees with the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import CheckpointError
from albert_edge.heads import HEADS, HeadSpec
from converters.tf1_config import group_sources

if TYPE_CHECKING:
    from transformers import AlbertConfig

# transformers builds these heads' AlbertModel with add_pooling_layer=False.
HEADS_WITHOUT_POOLER = frozenset({"masked-lm", "question-answering", "token-classification"})
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


def strip_module(names: list[str], where: Path) -> dict[str, str]:
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


def classifier_labels(
    head: HeadSpec, shapes: dict[str, list[int]], by_plain: dict[str, str]
) -> int:
    """The classifier's label count, from the first dimension of ``output_weights``
    ([num_labels, H]) or ``output_bias``; 2 for every other head (SOP and SQuAD have two
    outputs), which the config cannot say: run_classifier sets it per task."""
    if head.name == "sequence-classification":
        for name in ("output_weights", "output_bias"):
            shape = shapes.get(by_plain.get(name, ""), [])
            if shape:
                return int(shape[0])
    return 2


def variable_mismatches(
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


def _is_float(dtype: Any) -> bool:
    return bool(getattr(dtype, "is_floating", False))


def _shape_text(shape: tuple[int, ...] | list[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _join(items: list[str]) -> str:
    return ", ".join(items)
