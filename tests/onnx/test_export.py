"""Export + passes on tiny / tiny-groups / tiny-unfactorized checkpoints across the heads,
for ``--optimize none`` and ``fuse``: size within 2% of the unique parameters, no
duplicate bytes, factorized embedding intact, outputs equal to PyTorch (ORT, 1e-4); the
CLI and the bad-input paths; the published configs' sizes (large ones as slow tests)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest

from albert_edge.errors import AlbertEdgeError, OutputExistsError, UnsupportedError
from albert_edge.facts import describe_onnx
from albert_edge.heads import HEADS
from albert_edge.onnx.passes import run_passes
from albert_edge.onnx.passes.base import duplicate_groups
from albert_edge.onnx.pipeline import build_passes
from albert_edge.options import ConvertOptions

ROOT = Path(__file__).resolve().parents[2]
MAX_RATIO = 1.02
MAX_ABS_ERR = 1e-4

# Every head on the default tiny config; on the grouped and the E == H configs the heads
# that stress something different (two outputs, tied decoder, rank-3 inputs); QA on
# tiny-groups and token classification on tiny-unfactorized run in the convert/CLI tests.
CASES = [("tiny", h) for h in HEADS] + [
    (cfg, h)
    for cfg in ("tiny-groups", "tiny-unfactorized")
    for h in ("base", "masked-lm", "multiple-choice")
]


@cache
def _exported(path: str) -> tuple[Any, bytes]:
    """(checkpoint, raw export) per checkpoint: both optimize levels start from it."""
    from albert_edge.checkpoint import load_checkpoint
    from converters.onnx_export import export_onnx

    ckpt = load_checkpoint(path)
    return ckpt, export_onnx(ckpt, 17).SerializeToString()


def _feeds(ckpt: Any, batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (batch, 3, seq) if ckpt.head.choices_axis else (batch, seq)
    ids = rng.integers(0, ckpt.config.vocab_size, shape).astype(np.int64)
    mask = np.ones(shape, dtype=np.int64)
    mask[0, ..., : seq // 4] = 0  # left padding
    mask[-1, ..., seq - seq // 3 :] = 0  # right padding
    types = np.zeros(shape, dtype=np.int64)
    types[..., seq // 2 :] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def _torch_outputs(ckpt: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        out = ckpt.model(**{k: torch.from_numpy(v) for k, v in feeds.items()}, return_dict=True)
    return [getattr(out, name).numpy() for name in ckpt.head.outputs]


def _session(data: bytes) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("optimize", ["none", "fuse"])
@pytest.mark.parametrize(("config", "head"), CASES)
def test_export_size_sharing_factorization_parity(
    make_checkpoint, config: str, head: str, optimize: str
) -> None:
    ckpt, raw = _exported(str(make_checkpoint(config, head)))
    options = ConvertOptions(optimize=optimize, verify=False)
    model, log = run_passes(ir.from_proto(onnx.load_from_string(raw)), build_passes(ckpt, options))
    data = ir.to_proto(model).SerializeToString()
    info = describe_onnx(
        model,
        None,
        len(data),
        precision="fp32",
        config=ckpt.config.to_dict(),
        head=ckpt.head.name,
    )

    c = ckpt.config
    assert log[0]["name"] == "canonicalize"
    assert ("fuse" in [e["name"] for e in log]) == (optimize == "fuse")
    assert info["ratio_to_floor"] <= MAX_RATIO, info
    assert info["floor_bytes"] == 4 * info["checkpoint_params"]
    # every parameter stored once (dedup may merge equal-valued tensors; fusion adds a few)
    assert (
        abs(info["unique_params"] - info["checkpoint_params"]) <= 0.01 * info["checkpoint_params"]
    )
    assert info["duplicate_tensor_bytes"] == 0 and duplicate_groups(model) == []
    assert info["factorized_embedding_intact"] is True
    assert [o["name"] for o in info["outputs"]] == list(ckpt.head.outputs)
    axes = ["batch", "choices", "sequence"] if ckpt.head.choices_axis else ["batch", "sequence"]
    assert all(i["shape"] == axes and i["dtype"] == "int64" for i in info["inputs"])
    ops = info["op_counts"]
    assert "Identity" not in ops
    layers = c.num_hidden_layers * c.inner_group_num
    if optimize == "fuse":
        assert ops.get("Attention") == layers
        qkv = {id(n.inputs[1]) for n in model.graph if n.op_type == "Attention"}
        assert len(qkv) == c.num_hidden_groups * c.inner_group_num
    # Every shared layer weight exactly once: the distinct FFN weights are G*K.
    ffn = [
        v
        for v in model.graph.initializers.values()
        if tuple(v.const_value.shape) == (c.hidden_size, c.intermediate_size)
    ]
    assert len(ffn) == c.num_hidden_groups * c.inner_group_num
    if head in ("masked-lm", "pretraining"):
        table = next(
            v
            for v in model.graph.initializers.values()
            if tuple(v.const_value.shape) == (c.vocab_size, c.embedding_size)
        )
        assert {u.node.op_type for u in table.uses()} >= {"Gemm"}  # tied decoder: same table

    sess = _session(data)
    for batch, seq, seed in ((2, 13, 0), (1, c.max_position_embeddings, 1)):
        feeds = _feeds(ckpt, batch, seq, seed)
        got = sess.run(None, feeds)
        for name, ref, out in zip(ckpt.head.outputs, _torch_outputs(ckpt, feeds), got):
            assert out.shape == ref.shape, name
            assert float(np.abs(out - ref).max()) <= MAX_ABS_ERR, (name, batch, seq)


# --- the pipeline, the API and bad input ----------------------------------------------


def test_convert_api_writes_artifact_and_manifest(make_checkpoint, tmp_path: Path) -> None:
    from albert_edge.convert import convert

    out = tmp_path / "art"
    manifest = convert(
        make_checkpoint("tiny-groups", "question-answering"), out, ConvertOptions(optimize="fuse")
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "config.json",
        "manifest.json",
        "onnx",
        "special_tokens_map.json",
        "spiece.model",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["model_file"] == "onnx/model.onnx" and on_disk["target"] == "onnx"
    assert on_disk["source"]["kind"] == "hf" and on_disk["head"] == "question-answering"
    assert on_disk["opset"] == 17 and on_disk["optimize"] == "fuse"
    assert [o["name"] for o in on_disk["outputs"]] == ["start_logits", "end_logits"]
    assert on_disk["outputs"][0]["shape"] == ["batch", "sequence"]
    sizes = on_disk["sizes"]
    assert sizes["file_bytes"] == (out / "onnx" / "model.onnx").stat().st_size
    assert sizes["ratio_to_floor"] <= MAX_RATIO
    assert [p["name"] for p in on_disk["passes"]] == [
        "canonicalize",
        "fuse",
        "split_skip_ln",
        "dedup",
        "compact",
        "factorization-guard",
    ]
    assert on_disk["verification"]["passed"] is True
    assert manifest["sizes"] == sizes
    assert not list(tmp_path.glob(".*"))  # no temp leftovers


def test_tf1_checkpoint_converts(make_checkpoint, spiece_path: Path, tmp_path: Path) -> None:
    """An original TF1 checkpoint (written by TensorFlow's Saver) → fused ONNX, verified."""
    from tf1_utils import write_tf1_checkpoint

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert

    src = load_checkpoint(make_checkpoint("tiny-groups", "masked-lm")).model
    written = write_tf1_checkpoint(
        tmp_path / "tf1", src, "masked-lm", spiece=spiece_path, optimizer=None
    )
    m = convert(written.root, tmp_path / "art", ConvertOptions(optimize="fuse"))
    assert m["source"]["kind"] == "tf1" and m["head"] == "masked-lm"
    assert m["verification"]["passed"] is True
    assert m["sizes"]["ratio_to_floor"] <= MAX_RATIO
    assert m["factorized_embedding_intact"] is True


def test_disk_full_mid_write_leaves_nothing(make_checkpoint, tmp_path: Path, monkeypatch) -> None:
    import albert_edge.onnx.pipeline as pipeline
    from albert_edge.convert import convert

    real_open = open

    class FullDisk:
        def __init__(self, path: str, mode: str) -> None:
            self.f = real_open(path, mode)

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

        def write(self, data: bytes) -> int:
            self.f.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pipeline, "open", FullDisk, raising=False)
    out = tmp_path / "art"
    with pytest.raises(
        AlbertEdgeError, match=r"model.onnx: cannot write the model \(no space left on device\)"
    ):
        convert(make_checkpoint("tiny"), out, ConvertOptions(optimize="none", verify=False))
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_opset_too_old_for_fuse_is_refused_before_export(make_checkpoint, tmp_path: Path) -> None:
    from albert_edge.convert import convert

    with pytest.raises(UnsupportedError, match="--opset 14 is too old for --optimize fuse"):
        convert(make_checkpoint("tiny"), tmp_path / "a", ConvertOptions(opset=14))
    with pytest.raises(UnsupportedError, match="--opset 9 is outside"):
        convert(make_checkpoint("tiny"), tmp_path / "b", ConvertOptions(opset=9, optimize="none"))
    assert list(tmp_path.iterdir()) == []


def test_old_opset_without_fusion_converts(make_checkpoint, tmp_path: Path) -> None:
    from albert_edge.convert import convert

    m = convert(
        make_checkpoint("tiny"),
        tmp_path / "a",
        ConvertOptions(opset=13, optimize="none", verify=False),
    )
    assert m["opset"] == 13 and m["sizes"]["ratio_to_floor"] <= MAX_RATIO


def test_unsupported_head_is_refused(make_checkpoint, tmp_path: Path) -> None:
    import dataclasses

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.heads import HeadSpec
    from albert_edge.onnx.pipeline import convert_onnx

    ckpt = load_checkpoint(make_checkpoint("tiny"))
    odd = dataclasses.replace(ckpt, head=HeadSpec("causal-lm", "AlbertForCausalLM", ("logits",)))
    with pytest.raises(UnsupportedError, match="unsupported head 'causal-lm'"):
        convert_onnx(odd, tmp_path, ConvertOptions())
    assert list(tmp_path.iterdir()) == []


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "2", "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=900,
    )


def test_cli_convert_and_overwrite_refusal(make_checkpoint, tmp_path: Path) -> None:
    ckpt = str(make_checkpoint("tiny-unfactorized", "token-classification"))
    out = tmp_path / "art"
    r = _cli("convert", ckpt, "--to", "onnx", "-o", str(out), "--optimize", "none", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    manifest = json.loads(r.stdout[r.stdout.index("{") :])
    assert manifest["optimize"] == "none" and manifest["verification"]["passed"] is True
    assert (out / "onnx" / "model.onnx").stat().st_size == manifest["sizes"]["file_bytes"]

    before = (out / "onnx" / "model.onnx").read_bytes()
    r = _cli("convert", ckpt, "--to", "onnx", "-o", str(out))
    assert r.returncode == OutputExistsError.exit_code
    assert "output exists" in r.stderr and "--overwrite" in r.stderr
    assert len(r.stderr.strip().splitlines()[-1]) < 300
    assert (out / "onnx" / "model.onnx").read_bytes() == before


def test_cli_unsupported_opset_one_line(make_checkpoint, tmp_path: Path, capsys) -> None:
    """In-process (the subprocess path is covered above): exit code and the one line."""
    from albert_edge.cli import main

    ckpt = str(make_checkpoint("tiny"))
    code = main(["convert", ckpt, "--to", "onnx", "-o", str(tmp_path / "x"), "--opset", "15"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == UnsupportedError.exit_code
    assert len(err) == 1 and "--opset 15 is too old for --optimize fuse" in err[0]
    assert "--optimize none" in err[0]
    assert not (tmp_path / "x").exists()


# --- the published shapes (albert-base ~10 s; large..xxlarge slow: up to ~3 min, ~10 GB) -


def _size_check(
    tmp_path: Path, spiece: Path, config: str, optimize: str, **overrides: Any
) -> dict[str, Any]:
    from albert_edge.configs import make_config, make_random_checkpoint
    from albert_edge.convert import convert

    ckpt_dir = make_random_checkpoint(
        tmp_path / "ckpt",
        make_config(config, **overrides),
        head="sequence-classification",
        spiece_model=spiece,
    )
    m = convert(ckpt_dir, tmp_path / "out", ConvertOptions(optimize=optimize, verify=False))
    sizes = m["sizes"]
    assert sizes["ratio_to_floor"] <= MAX_RATIO, sizes
    assert sizes["duplicate_tensor_bytes"] == 0
    assert m["factorized_embedding_intact"] is True
    return m


@pytest.mark.parametrize("optimize", ["none", "fuse"])
@pytest.mark.parametrize(
    "config",
    [
        "albert-base",
        # large configs take 15 s to 3 min each and up to ~10 GB: run with -m slow
        pytest.param("albert-large", marks=pytest.mark.slow),
        pytest.param("albert-xlarge", marks=pytest.mark.slow),
        pytest.param("albert-xxlarge", marks=pytest.mark.slow),
    ],
)
def test_published_configs_size(
    tmp_path: Path, spiece_path: Path, config: str, optimize: str
) -> None:
    _size_check(tmp_path, spiece_path, config, optimize)


@pytest.mark.parametrize("optimize", ["none", "fuse"])
def test_grouped_base_config_size(tmp_path: Path, spiece_path: Path, optimize: str) -> None:
    m = _size_check(
        tmp_path, spiece_path, "albert-base", optimize, num_hidden_groups=3, inner_group_num=2
    )
    if optimize == "fuse":
        fuse = next(p for p in m["passes"] if p["name"] == "fuse")
        assert fuse["attention_fused"] == 24 and fuse["distinct_qkv_weights"] == 6
