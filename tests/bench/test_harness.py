"""A real tiny benchmark run, checked against the schema and for honesty (no timings)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from albert_edge.bench import validate_report
from albert_edge.bench.flops import floor_bytes, model_flops


def _rows(report: dict[str, Any], backend: str) -> list[dict[str, Any]]:
    return [r for r in report["results"] if r["backend"] == backend]


def test_report_follows_the_schema(tiny_report: dict[str, Any]) -> None:
    assert validate_report(tiny_report) == []
    assert json.loads(json.dumps(tiny_report)) == tiny_report  # plain JSON all the way
    # artifact x backend x shape: 3 checkpoint backends and 2 ONNX backends, 2 shapes each
    assert len(tiny_report["results"]) == 5 * 2


def test_cpu_backends_measured_in_child_processes(tiny_report: dict[str, Any]) -> None:
    for backend in ("torch-fp32", "torch-int8-dynamic", "ort-cpu"):
        rows = _rows(tiny_report, backend)
        assert rows and all(r["status"] == "ok" for r in rows), rows
        for r in rows:
            assert r["peak_rss_bytes"] > 0
            assert r["peak_rss_bytes"] >= r["rss_before_load_bytes"] > 0
            assert r["latency_ms"]["runs"] == 3
            lat = r["latency_ms"]
            assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
            assert r["throughput_seq_per_s"] == pytest.approx(r["batch"] / (lat["p50"] / 1e3))
            assert r["gops"] == pytest.approx(r["flops"] / (lat["p50"] / 1e3) / 1e9)
            assert 0 < r["roofline_fraction"] == pytest.approx(r["roofline_bound_ms"] / lat["p50"])
            assert r["load_ms"] > 0 and r["first_inference_ms"] > 0


def test_peak_rss_is_per_process(tiny_report: dict[str, Any]) -> None:
    """ONNX Runtime children never import torch: their peak is far below PyTorch's."""
    ort = max(r["peak_rss_bytes"] for r in _rows(tiny_report, "ort-cpu"))
    torch_ = min(r["peak_rss_bytes"] for r in _rows(tiny_report, "torch-fp32"))
    assert ort < torch_


def test_gpu_backends_skip_with_reason_or_run(tiny_report: dict[str, Any]) -> None:
    import onnxruntime as ort

    for r in _rows(tiny_report, "ort-cuda"):
        if "CUDAExecutionProvider" in ort.get_available_providers():
            assert r["status"] in ("ok", "skipped")
        else:
            assert r["status"] == "skipped"
            assert "CUDAExecutionProvider" in r["reason"]
            assert r["latency_ms"] is None and r["peak_rss_bytes"] is None
    for r in _rows(tiny_report, "torch-cuda-fp16"):
        assert r["status"] in ("ok", "skipped")
        if r["status"] == "skipped":
            assert (r["reason"] and "CUDA" in r["reason"]) or "cuda" in r["reason"]
            assert r["latency_ms"] is None and r["gops"] is None


def test_sizes_are_files_on_disk(
    tiny_report: dict[str, Any], make_checkpoint: Callable[..., Path], tiny_onnx: Path
) -> None:
    ckpt = make_checkpoint("tiny")
    config = json.loads((ckpt / "config.json").read_text())
    for r in _rows(tiny_report, "torch-fp32"):
        assert r["file_bytes"] == (ckpt / "model.safetensors").stat().st_size
        assert r["floor_bytes"] == floor_bytes(config, "sequence-classification", "fp32")
        assert 1.0 <= r["ratio_to_floor"] < 1.05  # safetensors stores each tensor once
    for r in _rows(tiny_report, "torch-int8-dynamic"):
        assert r["precision"] == "int8-dynamic"
        assert r["floor_bytes"] == floor_bytes(config, "sequence-classification", "int8")
    for r in _rows(tiny_report, "ort-cpu"):
        assert r["file_bytes"] == tiny_onnx.stat().st_size
        assert r["precision"] == "fp32"  # read from the graph: no manifest beside it
        assert r["flops"] == model_flops(config, "sequence-classification", r["batch"], 16)


def test_roofline_measured_on_model_shapes(tiny_report: dict[str, Any]) -> None:
    roof = tiny_report["roofline"]
    best = roof["cpu"]["1"]
    assert best["fp32"]["gops"] > 0 and best["int8"]["gops"] > 0
    shapes = {(g["m"], g["k"], g["n"]) for g in roof["gemms"]}
    assert (16, 16, 32) in shapes  # batch 1 x seq 16 tokens through the E->H projection
    assert (32, 32, 64) in shapes  # batch 2 x seq 16 through the FFN


def test_roofline_bound_is_the_weight_gemms_at_their_own_rates(
    tiny_report: dict[str, Any], tiny_onnx: Path
) -> None:
    """Recomputed by hand from the report's per-shape measurements: every weight GEMM of
    the row's own length, as often as it runs, at the best rate measured on that shape."""
    from albert_edge.bench.flops import weight_gemms

    config = json.loads((tiny_onnx.parent / "config.json").read_text())
    rows = [r for r in tiny_report["results"] if r["backend"] == "ort-cpu" and r["status"] == "ok"]
    assert rows
    gemms = tiny_report["roofline"]["gemms"]
    for r in rows:
        key = "int8" if r["precision"].startswith("int") else "fp32"
        rates: dict[tuple[int, int, int], float] = {}
        for g in gemms:
            if g["threads"] == r["threads"] and g["precision"] == key and g["device"] == "cpu":
                shape = (g["m"], g["k"], g["n"])
                rates[shape] = max(rates.get(shape, 0.0), g["gops"])
        m = r["batch"] * r["seq_len"]
        own = [shape for shape in rates if shape[0] == m]
        assert len(own) == 4, own  # E->H, HxH, HxI, IxH at this row's own M
        ms = sum(
            n * 2 * a * b * c / (rates[(a, b, c)] * 1e9) * 1e3
            for (a, b, c), n in weight_gemms(config, m)
        )
        assert r["roofline_bound_ms"] == pytest.approx(ms)


def test_failed_load_is_reported_not_raised(tmp_path: Path, tiny_onnx: Path) -> None:
    from albert_edge.bench import bench

    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"this is not an onnx model")
    for name in ("config.json", "spiece.model"):
        (tmp_path / name).write_bytes((tiny_onnx.parent / name).read_bytes())
    report = bench(
        [bad],
        backends=["ort-cpu"],
        seq_lens=(16,),
        threads=(1,),
        runs=2,
        warmup=0,
        roofline=False,
        progress=False,
    )
    assert validate_report(report) == []
    [r] = report["results"]
    assert r["status"] == "failed"
    assert "load failed" in r["reason"]
    assert r["latency_ms"] is None and r["gops"] is None


def test_rounds_pool_every_round_s_samples(tiny_onnx: Path, tmp_path: Path) -> None:
    """rounds=3, runs=6, two artifacts timed interleaved: one row per artifact and shape
    whose statistics are those of the 6 pooled samples, sizes and load time filled as in
    a sequential run, and a shape past the model's positions skipped."""
    import shutil

    from albert_edge.bench import bench
    from albert_edge.bench.worker import summarize

    other = tmp_path / "copy"
    shutil.copytree(tiny_onnx.parent, other)
    report = bench(
        [tiny_onnx, other / "model.onnx"],
        backends=["ort-cpu"],
        seq_lens=(8, 16, 100000),
        threads=(1,),
        runs=6,
        warmup=0,
        roofline=False,
        progress=False,
        keep_samples=True,
        rounds=3,
    )
    assert validate_report(report) == []
    assert report["settings"]["rounds"] == 3 and report["settings"]["policy"]["runs"] == 6
    timed = [r for r in report["results"] if r["seq_len"] != 100000]
    assert len(timed) == 4
    for r in timed:
        assert r["status"] == "ok" and len(r["samples_ms"]) == 6
        assert r["latency_ms"] == summarize(r["samples_ms"])
        assert r["load_ms"] > 0 and r["file_bytes"] > 0
        assert r["warmup_runs"] == 0  # --warmup holds for every visit
    long = [r["status"] for r in report["results"] if r["seq_len"] == 100000]
    assert long == ["skipped", "skipped"]


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"runs": None}, "fixed --runs"), ({"runs": 4, "rows_path": "x.jsonl"}, "row log")],
)
def test_rounds_refuse_what_they_cannot_pool(tiny_onnx: Path, kwargs: dict, needle: str) -> None:
    from albert_edge.bench import bench
    from albert_edge.errors import BenchmarkError

    with pytest.raises(BenchmarkError, match=needle):
        bench([tiny_onnx], backends=["ort-cpu"], rounds=2, progress=False, **kwargs)


def test_too_long_sequence_is_skipped(tiny_onnx: Path) -> None:
    from albert_edge.bench import bench

    report = bench(
        [tiny_onnx],
        backends=["ort-cpu"],
        seq_lens=(16, 256),
        threads=(1,),
        runs=2,
        warmup=0,
        roofline=False,
        progress=False,
    )
    assert validate_report(report) == []
    by_seq = {r["seq_len"]: r for r in report["results"]}
    assert by_seq[16]["status"] == "ok"
    assert by_seq[256]["status"] == "skipped" and "128 positions" in by_seq[256]["reason"]


def test_cli_writes_json_markdown_and_plot(tmp_path: Path, tiny_onnx: Path) -> None:
    out = tmp_path / "r.json"
    md = tmp_path / "r.md"
    png = tmp_path / "r.png"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "bench",
            str(tiny_onnx),
            "--backend",
            "ort-cpu",
            "--seq-lens",
            "8,16",
            "--threads",
            "1",
            "--runs",
            "3",
            "--warmup",
            "1",
            "--json",
            str(out),
            "--markdown",
            str(md),
            "--plot",
            str(png),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert validate_report(report) == []
    assert [r["seq_len"] for r in report["results"]] == [8, 16]
    assert "| artifact | backend |" in md.read_text()
    assert "ort-cpu" in md.read_text()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ort-cpu" in proc.stdout  # the console table


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["/nonexistent/model.onnx"], "no such file"),
        (["{onnx}", "--backend", "torch-fp32"], "none of --backend"),
        (["{onnx}", "--backend", "nope"], "unknown backend"),
        (["{onnx}", "--json", "/nonexistent/dir/r.json"], "does not exist"),
        (["{onnx}", "--runs", "0"], "--runs: expected an integer >= 1"),
    ],
)
def test_cli_bad_input_is_one_line(args: list[str], needle: str, tiny_onnx: Path) -> None:
    argv = [a.replace("{onnx}", str(tiny_onnx)) for a in args]
    proc = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", "bench", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr


def test_memory_bound_is_verify_s_for_the_artifact_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bench`` refuses a batch × length no memory holds with verify's bound for one
    model (a benchmark child holds the artifact, verify the reference beside it), at the
    largest batch and the longest length the model has positions for; lengths past them
    are skipped rows and are not bounded. The default shapes of an xxlarge config fit."""
    import psutil

    from albert_edge.bench.plan import check_memory
    from albert_edge.bench.targets import Target
    from albert_edge.errors import BenchmarkError
    from albert_edge.grid import grid_memory_bytes

    tiny = {
        "hidden_size": 128,
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "max_position_embeddings": 512,
    }
    xxlarge = dict(tiny, hidden_size=4096, intermediate_size=16384, num_attention_heads=64)
    t = Target(path=tmp_path / "tiny", format="onnx", name="tiny", config=tiny)
    big = Target(path=tmp_path / "xxl", format="onnx", name="xxl", config=xxlarge)
    check_memory([t, big], (1,), (128,))  # the default shapes
    with pytest.raises(BenchmarkError, match=r"tiny: batch 1000000000 at sequence length 64 "):
        check_memory([t], (1, 10**9), (8, 64, 100_000))  # 100000: past the 512 positions
    check_memory([t], (10**9,), (100_000,))  # only a skipped row: nothing to bound
    check_memory([Target(path=tmp_path, format="onnx", name="x")], (10**9,), (128,))  # no config

    # the threshold: one model's share of verify's estimate against what is available
    one = grid_memory_bytes(SimpleNamespace(**tiny), 1000, 128, models=1)
    available = 3 * one  # batch 3000 fits exactly; verify's two-model bound would refuse it
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=available))
    check_memory([t], (3000,), (128,))
    with pytest.raises(BenchmarkError, match=r"batch 3001 at sequence length 128 .* GiB"):
        check_memory([t], (3001,), (128,))
