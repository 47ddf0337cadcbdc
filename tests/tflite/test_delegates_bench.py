"""``bench --backend litert-gpu``: LiteRT 2.x CompiledModel with GPU|CPU accelerators.

The CompiledModel path (buffers, signatures, the max |Δ| against the CPU interpreter) is
exercised for real with the CPU accelerator; the GPU run either skips with LiteRT's own
reason (no adapter: this CI) or, on a machine with a GPU, must agree with the CPU
interpreter and report its coverage.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from albert_edge.bench.worker import Skip, load_litert_gpu
from albert_edge.checkpoint import DEFAULT_MODEL
from albert_edge.tflite import flatbuffer as fb
from tests.tflite.tiny_tflite import classifier_like_graph

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_tflite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("litert") / "model.tflite"
    path.write_bytes(fb.write_model(classifier_like_graph()))
    # bench feeds tokenized text: the embedded model's SentencePiece file (vocab 30000).
    shutil.copy(DEFAULT_MODEL / "spiece.model", path.parent / "spiece.model")
    return path


def _feeds(batch: int, seq: int) -> dict[str, np.ndarray]:
    ids = np.arange(batch * seq, dtype=np.int32).reshape(batch, seq) + 5
    return {
        "input_ids": ids,
        "attention_mask": np.ones_like(ids),
        "token_type_ids": np.zeros_like(ids),
    }


def test_compiled_model_path_runs_and_matches_the_interpreter(tiny_tflite: Path) -> None:
    run, info = load_litert_gpu({"target_path": str(tiny_tflite), "litert_accelerators": "cpu"})
    prepare = info.pop("prepare")
    assert info["max_seq_len"] == 8
    assert info["max_abs_diff_vs_cpu"] == 0.0  # same CPU kernels: bit-identical
    assert info["gpu_coverage"] == {
        "ops": 3,
        "gpu_ops": 1,
        "cpu_ops": 2,
        "max_boundaries": 1,
        "expected_to_build": True,
    }
    out = run(prepare(_feeds(2, 5)))
    assert out["logits"].shape == (16, 2)  # 2 batch items × [8, 2] padded rows


def test_gpu_run_skips_with_a_reason_or_agrees_with_cpu(tiny_tflite: Path) -> None:
    try:
        _run, info = load_litert_gpu({"target_path": str(tiny_tflite)})
    except Skip as skip:
        assert "LiteRT GPU accelerator unavailable" in str(skip)
        return
    assert info["accelerators"] == "GPU|CPU"  # a GPU adapter exists here
    assert isinstance(info["fully_accelerated"], bool)
    assert info["max_abs_diff_vs_cpu"] < 1e-2  # fp16 GPU arithmetic vs fp32 CPU


def test_cli_bench_litert_gpu_row(tiny_tflite: Path, tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "bench",
            str(tiny_tflite),
            "--backend",
            "litert-gpu",
            "--seq-lens",
            "8",
            "--runs",
            "2",
            "--warmup",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    (row,) = json.loads(out.read_text())["results"]  # written even when nothing ran
    assert row["backend"] == "litert-gpu"
    if row["status"] == "skipped":
        # bench exits non-zero when nothing was measured, and says so in one line.
        assert r.returncode != 0 and "nothing was measured" in r.stderr
        assert row["reason"].startswith("LiteRT GPU accelerator unavailable")
    else:
        assert r.returncode == 0, r.stderr
        assert row["status"] == "ok", row["reason"]
        assert row["runtime_info"]["gpu_coverage"]["max_boundaries"] <= 1
        assert "fully_accelerated" in row["runtime_info"]
