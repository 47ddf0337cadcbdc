"""Original TF1 ALBERT checkpoints in: converters/tf1_checkpoint.py (and tf1_files, tf1_config,
tf1_variables).

Checkpoints are written by TensorFlow (tf.compat.v1 graph + Saver, see tf1_utils.py) with
the original variable names and [in, out] kernels, from random transformers models. Each
is checked three ways: the loaded state dict equals the source model's exactly; the
loaded model's outputs match both the source model and the TF graph of the original
computation (tanh GELU etc.); and, where transformers' own load_tf_weights_in_albert can
read the checkpoint, its tensors are identical to ours.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tf1_utils import Written, rewrite_checkpoint, write_tf1_checkpoint

from albert_edge.checkpoint import is_tf1_checkpoint, load_checkpoint
from albert_edge.errors import (
    CheckpointError,
    ConfigError,
    TokenizerError,
    UnsupportedError,
)
from converters.tf1_checkpoint import load_tf1_checkpoint
from converters.tf1_config import config_from_albert_json, group_sources, hf_activation

ROOT = Path(__file__).resolve().parents[1]

FEEDS = {
    "input_ids": np.array(
        [[2, 31, 1034, 7, 29999, 3, 98, 412, 3], [2, 17, 250, 3, 5005, 3, 0, 0, 0]], np.int64
    ),
    "attention_mask": np.array([[1] * 9, [1] * 6 + [0] * 3], np.int64),
    "token_type_ids": np.array([[0] * 6 + [1] * 3, [0] * 4 + [1] * 2 + [0] * 3], np.int64),
}


@dataclass(frozen=True)
class Case:
    config: str
    head: str
    optimizer: str | None = "albert"
    module_prefix: bool = False
    hub_layout: bool = False
    # transformers' load_tf_weights_in_albert reads this checkpoint (see test docstring)
    hf_loader: bool = True


CASES = {
    "tiny-seqcls": Case("tiny", "sequence-classification"),
    "groups-pretraining": Case("tiny-groups", "pretraining"),
    "unfactorized-pretraining": Case("tiny-unfactorized", "pretraining"),
    "tiny-base-module": Case("tiny", "base", optimizer=None, module_prefix=True),
    "hub-pretraining": Case(
        "tiny", "pretraining", optimizer=None, module_prefix=True, hub_layout=True
    ),
    "unfactorized-mlm-momentum": Case(
        "tiny-unfactorized", "masked-lm", optimizer="momentum", hf_loader=False
    ),
    "tiny-seqcls-module-adam": Case(
        "tiny",
        "sequence-classification",
        optimizer="adam",
        module_prefix=True,
        hf_loader=False,
    ),
    "tiny-squad": Case("tiny", "question-answering", hf_loader=False),
}


def _identity_projection(model: Any) -> None:
    """E == H: the original has no embedding_hidden_mapping_in; transformers' is I, 0."""
    base = getattr(model, "albert", model)
    if model.config.embedding_size == model.config.hidden_size:
        with torch.no_grad():
            base.encoder.embedding_hidden_mapping_in.weight.copy_(
                torch.eye(model.config.hidden_size)
            )
            base.encoder.embedding_hidden_mapping_in.bias.zero_()


@pytest.fixture(scope="module")
def tf1(tmp_path_factory, make_checkpoint, spiece_path):
    """``tf1(case_id) -> (source transformers model, Written)``, each written once."""
    cache: dict[str, tuple[Any, Written]] = {}

    def get(case_id: str) -> tuple[Any, Written]:
        if case_id not in cache:
            case = CASES[case_id]
            kw = {"num_labels": 3} if case.head == "sequence-classification" else {}
            src = load_checkpoint(make_checkpoint(case.config, case.head, **kw)).model
            _identity_projection(src)
            written = write_tf1_checkpoint(
                tmp_path_factory.mktemp(f"tf1-{case_id}"),
                src,
                case.head,
                spiece=spiece_path,
                feeds=FEEDS,
                optimizer=case.optimizer,
                module_prefix=case.module_prefix,
                hub_layout=case.hub_layout,
            )
            cache[case_id] = (src, written)
        return cache[case_id]

    return get


def _state_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], skip: tuple = ()):
    assert sorted(a) == sorted(b)
    differ = [k for k in a if not k.endswith(skip) and not torch.equal(a[k], b[k])]
    assert not differ, differ


def _run(model: Any) -> Any:
    with torch.no_grad():
        return model(**{k: torch.from_numpy(v) for k, v in FEEDS.items()})


# --- loading real checkpoints -----------------------------------------------------------


@pytest.mark.parametrize("case_id", list(CASES))
def test_loads_exactly_and_computes_the_original(tf1, case_id):
    src, written = tf1(case_id)
    case = CASES[case_id]
    ckpt = load_checkpoint(written.root)  # the public entry point dispatches to TF1
    assert ckpt.source == "tf1"
    assert ckpt.head.name == case.head
    assert ckpt.config.hidden_act == "gelu_new"  # albert_config.json says "gelu"
    assert ckpt.config.architectures == [ckpt.head.hf_class]
    assert ckpt.spiece_model is not None and ckpt.spiece_model.name == "30k-clean.model"
    assert not ckpt.model.training
    _state_equal(src.state_dict(), ckpt.model.state_dict())

    ours, theirs = _run(ckpt.model), _run(src)
    for name in ckpt.head.outputs:
        torch.testing.assert_close(getattr(ours, name), getattr(theirs, name), rtol=0, atol=1e-6)
        # the TF graph of the original computation (modeling.gelu, -10000 mask adder, ...)
        np.testing.assert_allclose(
            getattr(ours, name).numpy(), written.outputs[name], rtol=1e-4, atol=2e-5
        )


@pytest.mark.parametrize("case_id", [c for c, case in CASES.items() if case.hf_loader])
def test_identical_to_transformers_loader(tf1, case_id):
    """transformers' load_tf_weights_in_albert on the same checkpoint, tensor for tensor.

    Cases it cannot read are excluded: it crashes on bert/pooler for AlbertForMaskedLM
    (built without a pooler), maps cls/squad to a ``classifier`` AlbertForQuestionAnswering
    lacks, and does not skip Momentum/Adam slots (it writes a square slot over its weight).
    For E == H it leaves embedding_hidden_mapping_in at random init; ours is the identity.
    """
    import transformers
    from transformers.models.albert.modeling_albert import load_tf_weights_in_albert

    _, written = tf1(case_id)
    ours = load_tf1_checkpoint(written.root)
    hf_model = getattr(transformers, ours.head.hf_class)(ours.config).eval()
    with contextlib.redirect_stdout(io.StringIO()):  # it prints every variable name
        load_tf_weights_in_albert(hf_model, ours.config, str(written.prefix))
    skip: tuple[str, ...] = ()
    if ours.config.embedding_size == ours.config.hidden_size:
        skip = ("embedding_hidden_mapping_in.weight", "embedding_hidden_mapping_in.bias")
        mapping = getattr(ours.model, "albert", ours.model).encoder.embedding_hidden_mapping_in
        assert torch.equal(mapping.weight, torch.eye(ours.config.hidden_size))
        assert not mapping.bias.any()
    _state_equal(ours.model.state_dict(), hf_model.state_dict(), skip)


def test_every_path_form(tf1):
    src, written = tf1("tiny-seqcls")
    prefix = written.prefix
    forms = [
        written.root,
        prefix,
        prefix.with_name(prefix.name + ".index"),
        prefix.with_name(prefix.name + ".data-00000-of-00001"),
    ]
    for form in forms:
        assert is_tf1_checkpoint(form), form
        _state_equal(src.state_dict(), load_tf1_checkpoint(form).model.state_dict())
    assert load_tf1_checkpoint(prefix).config.num_labels == 3  # from output_weights' shape


def test_hub_module_prefixed_variables(tf1):
    src, written = tf1("hub-pretraining")
    assert written.prefix == written.root / "variables" / "variables"
    from tensorflow.train import list_variables

    names = [n for n, _ in list_variables(str(written.prefix))]
    assert names and all(n.startswith("module/") for n in names)
    for form in (written.root, written.root / "variables", written.prefix):
        assert is_tf1_checkpoint(form), form
        ckpt = load_tf1_checkpoint(form)
        assert ckpt.extra_files["albert_config"] == written.root / "assets" / "albert_config.json"
        assert ckpt.spiece_model == written.root / "assets" / "30k-clean.model"
        _state_equal(src.state_dict(), ckpt.model.state_dict())


def test_load_checkpoint_accepts_a_prefix(tf1):
    src, written = tf1("tiny-seqcls")
    _state_equal(src.state_dict(), load_checkpoint(written.prefix).model.state_dict())


def test_checkpoint_selection(tf1, tmp_path):
    """The ``checkpoint`` file's choice (resolved in the given dir), else the highest step."""
    _, written = tf1("tiny-seqcls")
    d = tmp_path / "run"
    shutil.copytree(written.root, d)  # its 'checkpoint' file names the original location
    rewrite_checkpoint(
        written.prefix, d / "model.ckpt-500", replace={"output_bias": np.full(3, 9.0, np.float32)}
    )

    def bias(path: Path) -> float:
        return load_tf1_checkpoint(path).model.classifier.bias[0].item()

    assert bias(d) != 9.0  # state file names model.ckpt-1000 (by an absolute path elsewhere)
    (d / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-500"\n')
    assert bias(d) == 9.0
    (d / "checkpoint").unlink()
    assert bias(d) != 9.0  # highest step
    (d / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-77"\n')
    with pytest.raises(CheckpointError, match=r"model\.ckpt-77"):
        load_tf1_checkpoint(d)
    (d / "checkpoint").unlink()
    for f in d.glob("model.ckpt-500.*"):
        f.rename(d / f.name.replace("-500", "-best"))
    for f in d.glob("model.ckpt-1000.*"):
        f.unlink()
    assert bias(d) == 9.0  # the releases' single model.ckpt-best
    for f in d.glob("model.ckpt-best.*"):
        shutil.copyfile(f, d / f.name.replace("-best", "-final"))
    with pytest.raises(CheckpointError, match="several checkpoints"):
        load_tf1_checkpoint(d)


# --- group schedule, activation, config -------------------------------------------------


def test_group_sources_follow_the_original_schedule():
    assert group_sources(12, 1) == [0]
    assert group_sources(4, 2) == [0, 1]
    assert group_sources(24, 8) == list(range(8))
    # float rounding: TF runs layer 15 of 22 with group int(15 / 22 * 22) = 14
    assert group_sources(22, 22)[15] == 14
    with pytest.raises(UnsupportedError, match="num_hidden_groups=22"):
        group_sources(44, 22)
    for layers in range(1, 49):
        for groups in range(1, layers + 1):
            try:
                sources = group_sources(layers, groups)
            except UnsupportedError:
                continue
            for i in range(layers):  # every layer runs the weights the original runs
                hf_group = int(i / (layers / groups))
                assert sources[hf_group] == int(i / layers * groups)


@pytest.mark.slow  # a 22-layer TF graph: ~10-20 s here; group_sources is tested above
def test_float_rounding_schedule_end_to_end(tmp_path, spiece_path):
    """L = G = 22: the TF checkpoint has no group_15; transformers' group 15 gets group 14."""
    from albert_edge.checkpoint import build_model
    from albert_edge.configs import make_config
    from albert_edge.heads import HEADS

    config = make_config(
        "tiny",
        num_hidden_layers=22,
        num_hidden_groups=22,
        hidden_size=8,
        embedding_size=4,
        intermediate_size=8,
        num_attention_heads=2,
    )
    torch.manual_seed(1)
    src = build_model(config, HEADS["base"])
    written = write_tf1_checkpoint(
        tmp_path / "ck", src, "base", spiece=spiece_path, feeds=FEEDS, optimizer=None
    )
    from tensorflow.train import list_variables

    names = {n for n, _ in list_variables(str(written.prefix))}
    assert not any("/group_15/" in n for n in names)
    ckpt = load_tf1_checkpoint(written.root)
    groups = ckpt.model.encoder.albert_layer_groups
    assert torch.equal(
        groups[15].albert_layers[0].ffn.weight, groups[14].albert_layers[0].ffn.weight
    )
    out = _run(ckpt.model)
    np.testing.assert_allclose(
        out.last_hidden_state.numpy(), written.outputs["last_hidden_state"], rtol=1e-4, atol=2e-5
    )


def test_gelu_maps_to_the_tanh_approximation():
    from transformers.activations import ACT2FN

    x = torch.linspace(-6, 6, 1001, dtype=torch.float64)
    original = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    ours = ACT2FN[hf_activation("gelu", Path("c"))](x)
    torch.testing.assert_close(ours, original, rtol=0, atol=1e-12)
    assert (ACT2FN["gelu"](x) - original).abs().max() > 1e-4  # the erf GELU would be wrong
    assert hf_activation("GELU", Path("c")) == "gelu_new"
    assert hf_activation("relu", Path("c")) == "relu"
    assert hf_activation("tanh", Path("c")) == "tanh"
    assert hf_activation("linear", Path("c")) == hf_activation("", Path("c")) == "linear"
    assert hf_activation(None, Path("c")) == "linear"
    with pytest.raises(ConfigError, match="hidden_act='swish'"):
        hf_activation("swish", Path("c"))


def test_config_defaults_are_the_originals(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({"vocab_size": 30000, "down_scale_factor": 1, "gap_size": 0}))
    cfg = config_from_albert_json(path)
    assert (cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size) == (4096, 64, 16384)
    assert (cfg.embedding_size, cfg.num_hidden_layers, cfg.layer_norm_eps) == (128, 12, 1e-12)
    assert cfg.hidden_act == "gelu_new"


# --- bad input -------------------------------------------------------------------------


def _copy(written: Written, tmp_path: Path) -> tuple[Path, Path]:
    d = tmp_path / "ck"
    shutil.copytree(written.root, d)
    return d, d / written.prefix.name


def _one_line(exc_info: pytest.ExceptionInfo, *needles: str) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg and msg.strip() == msg
    for needle in needles:
        assert needle in msg, (needle, msg)
    return msg


@pytest.fixture
def good(tf1, tmp_path) -> tuple[Path, Path]:
    """A fresh copy of the tiny sequence-classification checkpoint: (dir, prefix)."""
    return _copy(tf1("tiny-seqcls")[1], tmp_path)


def test_missing_variables_are_all_listed(good):
    d, prefix = good
    ln = "bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/gamma"
    rewrite_checkpoint(prefix, prefix, drop=("bert/pooler/dense/bias", ln))
    with pytest.raises(CheckpointError) as exc:
        load_tf1_checkpoint(d)
    _one_line(exc, str(prefix), "missing variables", "bert/pooler/dense/bias", ln)


def test_unmapped_variables_are_all_listed(good):
    d, prefix = good
    extra = {
        "bert/encoder/transformer/group_1/inner_group_0/LayerNorm/gamma": np.ones(32, np.float32),
        "loss/temperature": np.ones((), np.float32),
        "bert/not_a_variable/adam_m": np.ones(2, np.float32),  # an orphan slot is reported
    }
    rewrite_checkpoint(prefix, prefix, add=extra)
    with pytest.raises(CheckpointError) as exc:
        load_tf1_checkpoint(d)
    msg = _one_line(exc, "unmapped variables", *extra)
    assert "adam_v" not in msg and "global_step" not in msg  # the real slots are skipped


def test_shape_mismatch_with_config(good):
    d, _ = good
    cfg = json.loads((d / "albert_config.json").read_text())
    (d / "albert_config.json").write_text(json.dumps({**cfg, "intermediate_size": 48}))
    with pytest.raises(CheckpointError) as exc:
        load_tf1_checkpoint(d)
    _one_line(
        exc,
        "shape mismatch",
        "ffn_1/intermediate/dense/kernel [32, 64] vs config [32, 48]",
        "ffn_1/intermediate/output/dense/kernel [64, 32] vs config [48, 32]",
        "albert_config.json",
    )


def test_truncated_data_file(good):
    d, prefix = good
    data = prefix.with_name(prefix.name + ".data-00000-of-00001")
    with open(data, "r+b") as f:
        f.truncate(data.stat().st_size // 2)
    with pytest.raises(CheckpointError) as exc:
        load_tf1_checkpoint(d)
    _one_line(exc, "truncated or corrupt", str(prefix))


def test_corrupt_data_bytes_fail_the_checksum(good):
    d, prefix = good
    data = prefix.with_name(prefix.name + ".data-00000-of-00001")
    raw = bytearray(data.read_bytes())
    raw[::997] = b"\xa5" * len(raw[::997])  # hits every tensor larger than 997 bytes
    data.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError) as exc:
        load_tf1_checkpoint(d)
    _one_line(exc, "truncated or corrupt")


def test_corrupt_index(good):
    d, prefix = good
    index = prefix.with_name(prefix.name + ".index")
    index.write_bytes(b"\x00" * index.stat().st_size)
    with pytest.raises(CheckpointError) as exc:
        load_tf1_checkpoint(d)
    _one_line(exc, str(index), "corrupt")


def test_missing_data_file(good):
    d, prefix = good
    prefix.with_name(prefix.name + ".data-00000-of-00001").unlink()
    with pytest.raises(CheckpointError) as exc:
        load_tf1_checkpoint(d)
    _one_line(exc, ".data-")


def test_missing_albert_config(good):
    d, _ = good
    (d / "albert_config.json").unlink()
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(d)
    _one_line(exc, "albert_config.json", str(d))


def test_hub_module_without_config(tf1, tmp_path):
    d, _ = _copy(tf1("hub-pretraining")[1], tmp_path)
    (d / "assets" / "albert_config.json").unlink()
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(d)
    _one_line(exc, "albert_config.json", "copy")


def test_missing_tokenizer(good):
    d, _ = good
    (d / "30k-clean.model").unlink()
    with pytest.raises(TokenizerError) as exc:
        load_checkpoint(d)
    _one_line(exc, "30k-clean.model", str(d))
    assert load_tf1_checkpoint(d, require_tokenizer=False).spiece_model is None


def test_vocab_size_mismatch_with_tokenizer(good):
    d, prefix = good
    from tensorflow.train import load_variable

    table = load_variable(str(prefix), "bert/embeddings/word_embeddings")[:1000]
    rewrite_checkpoint(prefix, prefix, replace={"bert/embeddings/word_embeddings": table})
    cfg = json.loads((d / "albert_config.json").read_text())
    (d / "albert_config.json").write_text(json.dumps({**cfg, "vocab_size": 1000}))
    with pytest.raises(TokenizerError) as exc:
        load_tf1_checkpoint(d)
    _one_line(exc, "30000 pieces", "vocab_size=1000")


@pytest.mark.parametrize(
    "edit, needle",
    [
        ({"num_attention_heads": 3}, "not a multiple"),
        ({"hidden_act": "swish"}, "hidden_act"),
        ({"vocab_size": None}, "vocab_size"),
        ({"num_hidden_groups": 0}, "num_hidden_groups"),
    ],
)
def test_invalid_config(good, edit, needle):
    d, _ = good
    cfg = json.loads((d / "albert_config.json").read_text())
    (d / "albert_config.json").write_text(json.dumps({**cfg, **edit}))
    with pytest.raises(ConfigError) as exc:
        load_tf1_checkpoint(d)
    _one_line(exc, needle, "albert_config.json")


def test_config_not_json(good):
    d, _ = good
    (d / "albert_config.json").write_text("{not json")
    with pytest.raises(ConfigError) as exc:
        load_tf1_checkpoint(d)
    _one_line(exc, "not valid JSON")


def test_two_heads_are_refused(good):
    d, prefix = good
    rewrite_checkpoint(
        prefix, prefix, add={"cls/predictions/output_bias": np.zeros(30000, np.float32)}
    )
    with pytest.raises(CheckpointError) as exc:
        load_tf1_checkpoint(d)
    _one_line(exc, "several heads")


def test_not_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError) as exc:
        load_tf1_checkpoint(tmp_path / "model.ckpt-5")
    _one_line(exc, "model.ckpt-5")
    (tmp_path / "albert_config.json").write_text("{}")
    with pytest.raises(CheckpointError) as exc:
        load_tf1_checkpoint(tmp_path)
    _one_line(exc, "no TF checkpoint")


def _listing(d: Path) -> list[tuple[str, int, int]]:
    return sorted(
        (str(p.relative_to(d)), p.stat().st_size, p.stat().st_mtime_ns) for p in d.rglob("*")
    )


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "2", "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _break(kind: str, d: Path, prefix: Path) -> None:
    if kind == "missing-config":
        (d / "albert_config.json").unlink()
    elif kind == "truncated-data":
        data = prefix.with_name(prefix.name + ".data-00000-of-00001")
        with open(data, "r+b") as f:
            f.truncate(100)
    elif kind == "shape-mismatch":
        cfg = json.loads((d / "albert_config.json").read_text())
        (d / "albert_config.json").write_text(json.dumps({**cfg, "hidden_size": 64}))


@pytest.mark.parametrize(
    "command, kind",
    [
        ("convert", "missing-config"),
        ("convert", "truncated-data"),
        ("inspect", "shape-mismatch"),
    ],
)
def test_cli_bad_input_one_line_nonzero_nothing_written(good, tmp_path, command, kind):
    d, prefix = good
    _break(kind, d, prefix)
    before = _listing(d)
    out = tmp_path / "artifact"
    args = [command, str(d)] + (["-o", str(out)] if command == "convert" else [])
    result = _cli(*args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"albert-edge {command}: error: "), lines[0]
    assert str(d) in lines[0]
    assert not out.exists()
    assert _listing(d) == before
