"""Kernel families, int8 recipes per --target, and running an artifact on another kernel.

What the default run asserts holds on any x86-64 CPU (AVX2-only or VNNI): the portable
recipe's *weights* cannot saturate the AVX2 u8s8 kernel (checked on the graph), and the
remote-runner protocol returns exactly what ONNX Runtime returns in-process. Running on
emulated kernels needs `albert-edge kernels setup NAME` and is marked slow.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from kernel_setup import ready

from albert_edge.errors import KernelSetupError, UnsupportedError


def test_host_kernel_from_cpu_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    import albert_edge.kernels as k

    monkeypatch.setattr(k.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(k, "host_cpu_flags", lambda: {"sse2", "avx2", "fma"})
    assert k.host_kernel() == "x86-avx2"
    monkeypatch.setattr(k, "host_cpu_flags", lambda: {"avx2", "avx512f", "avx512_vnni"})
    assert k.host_kernel() == "x86-vnni"
    monkeypatch.setattr(k, "host_cpu_flags", lambda: {"avx2", "avx_vnni"})
    assert k.host_kernel() == "x86-vnni"
    monkeypatch.setattr(k, "host_cpu_flags", lambda: {"sse2"})
    with pytest.raises(UnsupportedError, match="AVX2"):
        k.host_kernel()
    monkeypatch.setattr(k.platform, "machine", lambda: "aarch64")
    assert k.host_kernel() == "arm64"


def test_recipes_refuse_full_range_on_saturating_kernels() -> None:
    from albert_edge.onnx.quant.recipes import INT8_TARGETS as RECIPES
    from albert_edge.onnx.quant.recipes import Int8Recipe, int8_recipe

    assert set(int8_recipe("portable").accurate_on) == {"x86-avx2", "x86-vnni", "arm64", "wasm"}
    assert int8_recipe("portable").reduce_range
    for name, r in RECIPES.items():
        if name != "portable":
            assert "x86-avx2" not in r.accurate_on, name
    with pytest.raises(UnsupportedError, match="saturate"):
        Int8Recipe("bad", reduce_range=False, weight_type="s8", per_channel=True,
                    accurate_on=("x86-avx2",), why="")  # fmt: skip
    with pytest.raises(UnsupportedError, match="unknown --target"):
        int8_recipe("x86-avx9")


def test_convert_options_resolve_the_recipe() -> None:
    from albert_edge.options import ConvertOptions

    assert ConvertOptions(precision="int8-dynamic").weight_per_channel is False  # portable
    assert ConvertOptions(precision="int8-dynamic", runs_on="x86-vnni").weight_per_channel
    assert ConvertOptions(precision="int8-dynamic", per_channel=True).weight_per_channel
    assert ConvertOptions(target="tflite", precision="int8-dynamic").weight_per_channel
    with pytest.raises(UnsupportedError, match="--target"):
        ConvertOptions(precision="int8-dynamic", runs_on="riscv")


@pytest.fixture(scope="module")
def int8_pair(tmp_path_factory: pytest.TempPathFactory, make_checkpoint: Callable[..., Path]):
    """The same tiny checkpoint as int8-dynamic artifacts for --target portable and x86-vnni."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    ckpt = make_checkpoint("tiny")
    out = {}
    for target in ("portable", "x86-vnni"):
        path = tmp_path_factory.mktemp("k") / target
        convert(ckpt, path, ConvertOptions(precision="int8-dynamic", runs_on=target))
        out[target] = path
    return ckpt, out


def test_portable_weights_cannot_saturate_avx2(int8_pair) -> None:
    """The portable guarantee, checked on the graph: every int8 weight |w| ≤ 64, so a pair
    of u8×s8 products (≤ 2·255·64 = 32,640) never leaves int16 on VPMADDUBSW kernels; the
    8-bit x86-vnni recipe does reach past it (why it is not the default)."""
    import json

    import onnx_ir as ir

    from albert_edge.onnx.quant.check import saturating_weights

    _, arts = int8_pair
    assert (
        saturating_weights(ir.load(str(arts["portable"] / "onnx" / "model_quantized.onnx"))) == []
    )
    assert saturating_weights(ir.load(str(arts["x86-vnni"] / "onnx" / "model_quantized.onnx")))
    q = json.loads((arts["portable"] / "manifest.json").read_text())["quantization"]
    assert q["target"] == "portable" and q["reduce_range"] is True
    assert "x86-avx2" in q["accurate_on"]
    q = json.loads((arts["x86-vnni"] / "manifest.json").read_text())["quantization"]
    assert q["reduce_range"] is False and "x86-avx2" not in q["accurate_on"]


def test_wire_round_trip(tmp_path: Path) -> None:
    from albert_edge.kernels import _wire

    arrays = {
        "input_ids": np.arange(12, dtype=np.int64).reshape(2, 6) - 3,
        "logits": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4),
    }
    back = _wire.read_arrays(tmp_path, _wire.write_arrays(tmp_path, arrays, "a"))
    for name, arr in arrays.items():
        assert back[name].dtype == arr.dtype and np.array_equal(back[name], arr)


def test_remote_runner_protocol_matches_in_process(int8_pair) -> None:
    """The child-process runner (here on this machine's own kernels) returns bit-for-bit
    what an in-process ONNX Runtime session returns."""
    from albert_edge.kernels import host_kernel
    from albert_edge.kernels.remote import RemoteRunner
    from albert_edge.onnx.runtime import OrtRunner

    _, arts = int8_pair
    model = arts["portable"] / "onnx" / "model_quantized.onnx"
    rng = np.random.default_rng(0)
    feeds = {
        "input_ids": rng.integers(5, 1000, size=(2, 9), dtype=np.int64),
        "attention_mask": np.ones((2, 9), dtype=np.int64),
        "token_type_ids": np.zeros((2, 9), dtype=np.int64),
    }
    remote = RemoteRunner(model, host_kernel(), threads=1)
    try:
        got = remote.run(feeds)
    finally:
        remote.close()
    want = OrtRunner(model, threads=1).run(feeds)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_verify_on_without_setup_is_one_line(int8_pair, tmp_path: Path) -> None:
    ckpt, arts = int8_pair
    # An empty cache: qemu on PATH is too old (Debian 12's 7.2) or absent, and there is no
    # arm64 sysroot; either way the message names the set-up command.
    env = {**os.environ, "ALBERT_EDGE_CACHE": str(tmp_path / "empty-cache")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "verify",
            str(arts["portable"]),
            "--reference",
            str(ckpt),
            "--on",
            "arm64",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "albert-edge kernels setup arm64" in lines[0]
    assert "Traceback" not in proc.stderr


def test_setup_status_names_the_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from albert_edge.kernels import setup

    monkeypatch.setenv("ALBERT_EDGE_CACHE", str(tmp_path))
    with pytest.raises(KernelSetupError, match="kernels setup wasm"):
        setup.require_wasm()
    with pytest.raises(KernelSetupError, match="kernels setup arm64"):
        setup.require_arm64_sysroot()


def test_two_set_ups_take_turns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A second process setting up kernels waits for the first (which holds the cache's
    set-up lock) instead of rebuilding the same sysroot beside it."""
    from albert_edge.kernels.setup import _one_at_a_time

    monkeypatch.setenv("ALBERT_EDGE_CACHE", str(tmp_path))
    code = (
        "from albert_edge.kernels.setup import _one_at_a_time\n"
        "with _one_at_a_time():\n    print('got it', flush=True)\n"
    )
    env = {**os.environ, "ALBERT_EDGE_CACHE": str(tmp_path)}
    with _one_at_a_time():
        child = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
        )
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=3)  # blocked on the lock this process holds
    out, _ = child.communicate(timeout=60)
    assert out.strip() == "got it"


# --- on emulated kernels (needs `albert-edge kernels setup NAME`) ----------------------


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["x86-avx2", "arm64", "wasm"])
def test_portable_int8_is_the_same_on_every_kernel(int8_pair, kernel: str) -> None:
    """The portable artifact computes the same logits on the emulated kernel as here; the
    8-bit recipe does not on AVX2 (the saturation this recipe exists for)."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.grid import run_grid
    from albert_edge.kernels.remote import RemoteRunner

    ready(kernel)
    ckpt_path, arts = int8_pair
    ckpt = load_checkpoint(ckpt_path)
    remote = RemoteRunner(arts["portable"] / "onnx" / "model_quantized.onnx", kernel, threads=2)
    try:
        _, summary = run_grid(remote, ckpt)
    finally:
        remote.close()
    assert summary["logits"]["sqnr_db"] >= 25.0


# --- TFLite artifacts on other kernels (LiteRT/XNNPACK in the child) -------------------


@pytest.fixture(scope="module")
def tflite_int8(tmp_path_factory: pytest.TempPathFactory, make_checkpoint: Callable[..., Path]):
    """A tiny int8-dynamic TFLite artifact (buckets 8 and 16 to keep conversion short)."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    ckpt = make_checkpoint("tiny")
    path = tmp_path_factory.mktemp("kt") / "int8"
    convert(
        ckpt,
        path,
        ConvertOptions(target="tflite", precision="int8-dynamic", seq_lens=(8, 16), verify=False),
    )
    return ckpt, path


def _tflite_feeds(batch: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    mask = np.ones((batch, seq), dtype=np.int64)
    mask[-1, seq // 2 :] = 0  # a padded row: the bucket padding path runs too
    return {
        "input_ids": rng.integers(5, 1000, size=(batch, seq), dtype=np.int64),
        "attention_mask": mask,
        "token_type_ids": np.zeros((batch, seq), dtype=np.int64),
    }


def test_remote_litert_runner_matches_in_process(tflite_int8) -> None:
    """A .tflite runs in the LiteRT child (here on this machine's own kernels) with the same
    bucket choice and outputs as the in-process LiteRTRunner, bit for bit."""
    from albert_edge.kernels import host_kernel
    from albert_edge.kernels.remote import RemoteRunner
    from albert_edge.runtime import model_file
    from albert_edge.tflite.runtime import LiteRTRunner

    _, art = tflite_int8
    model = model_file(art)
    assert model.suffix == ".tflite"
    feeds = _tflite_feeds(2, 11)
    remote = RemoteRunner(model, host_kernel(), threads=1)
    try:
        assert remote.max_seq_len == 16
        assert "ai_edge_litert" in remote.runtime
        got = remote.run(feeds)
    finally:
        remote.close()
    want = LiteRTRunner(model, threads=1).run(feeds)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_tflite_on_wasm_is_one_line(tflite_int8) -> None:
    from albert_edge.kernels.remote import RemoteRunner
    from albert_edge.runtime import model_file

    _, art = tflite_int8
    with pytest.raises(KernelSetupError, match=r"LiteRT\.js") as info:
        RemoteRunner(model_file(art), "wasm")
    assert "\n" not in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["x86-avx2", "arm64"])
def test_tflite_int8_is_the_same_on_every_kernel(tflite_int8, kernel: str) -> None:
    """XNNPACK's int8 kernels of another CPU (picked by cpuinfo under qemu) give logits that
    agree with the PyTorch reference as well as this machine's do."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.grid import run_grid
    from albert_edge.kernels.remote import RemoteRunner
    from albert_edge.runtime import model_file

    ready(kernel, litert=True)
    ckpt_path, art = tflite_int8
    remote = RemoteRunner(model_file(art), kernel, threads=2)
    try:
        _, summary = run_grid(remote, load_checkpoint(ckpt_path))
    finally:
        remote.close()
    assert summary["logits"]["sqnr_db"] >= 25.0
