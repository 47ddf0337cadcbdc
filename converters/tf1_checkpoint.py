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
:func:`converters.tf1_variables.expected_variables`, built from the names modeling.py, run_pretraining.py,
classifier_utils.py and squad_utils.py create), skipped by the single training-only
rule (:func:`converters.tf1_variables.is_training_only`), or reported; all problems are reported together in one
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
  :func:`converters.tf1_config.group_sources` maps each transformers group to the TF group its layers use, and
  refuses configs transformers cannot express.
- ``gelu`` in modeling.py is the tanh approximation, which transformers calls
  ``gelu_new`` (NewGELUActivation, the same formula); see :data:`converters.tf1_config.ACTIVATIONS`.
- ``contrib.layers.layer_norm`` uses epsilon 1e-12 (transformers' ``layer_norm_eps``).
- ``bert/pooler/dense`` exists in every original checkpoint, but transformers builds its
  masked-LM and QA models without a pooler (their outputs never read it): for those heads
  the pooler is checked (present, right shape, readable) and then dropped.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import CheckpointError, TokenizerError, UnsupportedError
from albert_edge.heads import HeadSpec
from albert_edge.torch_model import Checkpoint, build_model, load_state_dict_strict
from converters.tf1_config import config_from_albert_json
from converters.tf1_files import (
    CONFIG_NAME,
    TOKENIZER_NAMES,
    check_data_shards,
    index_file,
    locate_tf1_files,
)
from converters.tf1_variables import (
    Target,
    classifier_labels,
    detect_head,
    expected_variables,
    is_training_only,
    strip_module,
    variable_mismatches,
)

if TYPE_CHECKING:
    import numpy as np
    import torch
    from transformers import AlbertConfig

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


def _open_reader(prefix: Path) -> Any:
    index = index_file(prefix)
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
    check_data_shards(files.prefix)
    reader = _open_reader(files.prefix)
    shapes, dtypes = _variable_maps(reader, files.prefix)

    by_plain = strip_module(sorted(shapes), files.prefix)
    plain_names = set(by_plain)
    model_names = {n for n in plain_names if not is_training_only(n, plain_names)}
    head = detect_head(model_names, files.prefix)
    num_labels = classifier_labels(head, shapes, by_plain)
    table = expected_variables(config, head, num_labels, files.config)
    problems = variable_mismatches(table, model_names, plain_names, by_plain, shapes, dtypes)
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
        extra_files={"albert_config": files.config, "tf1_index": index_file(files.prefix)},
    )


def _variable_maps(reader: Any, prefix: Path) -> tuple[dict[str, list[int]], dict[str, Any]]:
    """Every variable's shape and dtype, read from the index alone (no tensor data): a
    corrupt index is named here, in one line, before anything large is read."""
    try:
        shapes: dict[str, list[int]] = reader.get_variable_to_shape_map()
        dtypes: dict[str, Any] = reader.get_variable_to_dtype_map()
    except Exception as exc:
        raise CheckpointError(
            f"{index_file(prefix)}: cannot list variables ({_first_line(exc)}); the "
            "checkpoint is corrupt, re-download or re-export it"
        ) from None
    return shapes, dtypes


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
