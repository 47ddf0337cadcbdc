"""``--adb``: the benchmark_model command line and the parser of its output.

A device is needed to run the real thing; these tests cover what can be checked
without one: the output of TFLite's tool in its real formats (old and new versions,
with INFO: and logcat prefixes, e-notation), and the exact flags built for a real
multi-signature .tflite.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from albert_edge.bench.adb import (
    SignatureInputs,
    bench_adb,
    build_benchmark_args,
    parse_benchmark_output,
    read_signatures,
    result_from_output,
)
from albert_edge.bench.flops import floor_bytes
from albert_edge.bench.schema import validate_result
from albert_edge.bench.targets import Target
from albert_edge.errors import BenchmarkError

# benchmark_model 2.x on Android (stdout), with p5/median/p95 and periodic memory monitoring.
NEW_FORMAT = """\
INFO: STARTING!
INFO: Log parameter values verbosely: [0]
INFO: Min num runs: [50]
INFO: Num threads: [4]
INFO: Graph: [/data/local/tmp/albert-edge/model.tflite]
INFO: Signature to run: [seq_128]
INFO: Input layers: [input_ids,attention_mask,token_type_ids]
INFO: Use xnnpack: [1]
INFO: Loaded model /data/local/tmp/albert-edge/model.tflite
INFO: Created TensorFlow Lite XNNPACK delegate for CPU.
INFO: Using signature: seq_128
VERBOSE: Replacing 231 out of 240 node(s) with delegate (TfLiteXNNPackDelegate) node, yielding 5 partitions for subgraph 0.
INFO: The input model file size (MB): 47.3717
INFO: Initialized session in 91.427ms.
INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
INFO: count=7 first=98231 curr=71337 min=70012 max=98231 avg=75483.6 std=9412 p5=70012 median=71337 p95=98231

INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=50 first=70122 curr=69817 min=68870 max=81237 avg=70642.2 std=1883 p5=69015 median=70233 p95=74990

INFO: Inference timings in us: Init: 91427, First inference: 98231, Warmup (avg): 75483.6, Inference (avg): 70642.2
INFO: Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to the actual memory footprint of the model at runtime. Take the information at your discretion.
INFO: Memory footprint delta from the start of the tool (MB): init=52.1445 overall=88.9297
INFO: Overall peak memory footprint (MB) via periodic monitoring: 96.2617
INFO: Memory status at the end of exeution:
INFO: - VmRSS              : 91 MB
INFO: + RssAnnon           : 39 MB
INFO: + RssFile + RssShmem : 52 MB
"""

# An older build through logcat: e-notation averages, no percentiles, no periodic peak.
OLD_FORMAT = """\
11-22 06:12:01.123  4321  4321 I tflite  : count=1 curr=3512391
11-22 06:12:05.456  4321  4321 I tflite  : count=50 first=2990275 curr=2913402 min=2727568 max=3189954 avg=2.95034e+06 std=109798
11-22 06:12:05.457  4321  4321 I tflite  : Inference timings in us: Init: 17187, First inference: 3512391, Warmup (avg): 3.51239e+06, Inference (avg): 2.95034e+06
11-22 06:12:05.458  4321  4321 I tflite  : Memory footprint delta from the start of the tool (MB): init=4.21094 overall=46.0859
"""

GPU_FAILURE = """\
INFO: Loaded model /data/local/tmp/albert-edge/model.tflite
INFO: Created TensorFlow Lite delegate for GPU.
ERROR: Following operations are not supported by GPU delegate:
EMBEDDING_LOOKUP: Operation is not supported.
ERROR: Failed to apply GPU delegate.
ERROR: Benchmarking failed.
"""


def test_parse_new_format() -> None:
    p = parse_benchmark_output(NEW_FORMAT)
    assert p["init_ms"] == pytest.approx(91.427)
    assert p["first_inference_ms"] == pytest.approx(98.231)
    assert p["warmup_avg_ms"] == pytest.approx(75.4836)
    assert p["inference_avg_ms"] == pytest.approx(70.6422)
    assert p["runs"] == 50 and p["warmup_runs"] == 7
    assert p["stats_us"]["median"] == 70233 and p["stats_us"]["p95"] == 74990
    assert p["memory_delta_init_bytes"] == int(52.1445 * 2**20)
    assert p["memory_delta_overall_bytes"] == int(88.9297 * 2**20)
    assert p["peak_memory_bytes"] == int(96.2617 * 2**20)
    assert p["delegated_nodes"] == "231/240"
    assert "errors" not in p


def test_parse_old_format_with_e_notation() -> None:
    p = parse_benchmark_output(OLD_FORMAT)
    assert p["inference_avg_ms"] == pytest.approx(2950.34)
    assert p["warmup_avg_ms"] == pytest.approx(3512.39)
    assert p["first_inference_ms"] == pytest.approx(3512.391)
    assert p["runs"] == 50 and p["stats_us"]["avg"] == pytest.approx(2.95034e6)
    assert "median" not in p["stats_us"]
    assert p["memory_delta_overall_bytes"] == int(46.0859 * 2**20)
    assert "peak_memory_bytes" not in p


def _target(tmp_path: Path) -> Target:
    model = tmp_path / "model.tflite"
    model.write_bytes(b"\0" * 1000)
    return Target(
        path=model,
        format="tflite",
        name="sst2-int8",
        model_file=model,
        precision="int8-dynamic",
        config={
            "vocab_size": 30000,
            "embedding_size": 128,
            "hidden_size": 768,
            "intermediate_size": 3072,
            "num_hidden_layers": 12,
        },
        head="sequence-classification",
        floor_bytes=500,
    )


def test_result_from_new_format_follows_schema(tmp_path: Path) -> None:
    r = result_from_output(
        parse_benchmark_output(NEW_FORMAT),
        target=_target(tmp_path),
        delegate="android-xnnpack",
        batch=1,
        seq_len=128,
        threads=4,
        returncode=0,
    )
    assert validate_result(r) == []
    assert r["status"] == "ok" and r["threads"] == 4 and r["device"] == "android-cpu"
    assert r["latency_ms"]["p50"] == pytest.approx(70.233)
    assert r["latency_ms"]["p90"] is None and r["latency_ms"]["p99"] is None  # not measured
    assert r["latency_ms"]["mean"] == pytest.approx(70.6422)
    assert r["load_ms"] == pytest.approx(91.427)
    assert r["peak_rss_bytes"] == int(96.2617 * 2**20)
    floor = floor_bytes(_target(tmp_path).config or {}, "sequence-classification", "int8")
    assert floor is not None
    assert r["floor_bytes"] == floor  # the host harness's definition, not the manifest's 500
    assert r["file_bytes"] == 1000 and r["ratio_to_floor"] == pytest.approx(1000 / floor)
    assert r["throughput_seq_per_s"] == pytest.approx(1000 / 70.233)
    assert r["gops"] > 0


def test_old_format_without_median_uses_mean_and_says_so(tmp_path: Path) -> None:
    r = result_from_output(
        parse_benchmark_output(OLD_FORMAT),
        target=_target(tmp_path),
        delegate="android-xnnpack",
        batch=1,
        seq_len=128,
        threads=1,
        returncode=0,
    )
    assert validate_result(r) == []
    assert r["latency_ms"]["p50"] is None
    assert r["throughput_basis"] == "mean"
    assert r["peak_rss_bytes"] is None


def test_delegate_failure_is_skipped_with_reason(tmp_path: Path) -> None:
    r = result_from_output(
        parse_benchmark_output(GPU_FAILURE),
        target=_target(tmp_path),
        delegate="android-gpu",
        batch=1,
        seq_len=128,
        threads=1,
        returncode=1,
    )
    assert validate_result(r) == []
    assert r["status"] == "skipped" and "Failed to apply GPU delegate" in r["reason"]
    r = result_from_output(
        parse_benchmark_output(""),
        target=_target(tmp_path),
        delegate="android-xnnpack",
        batch=1,
        seq_len=128,
        threads=1,
        returncode=139,
    )
    assert r["status"] == "failed" and "status 139" in r["reason"]


def test_command_keeps_ids_in_vocabulary() -> None:
    sig = SignatureInputs(
        "seq_128", ("attention_mask", "input_ids", "token_type_ids"), ((1, 128), (1, 128), (1, 128))
    )
    args = build_benchmark_args(
        graph="/data/local/tmp/albert-edge/m.tflite",
        signature=sig,
        vocab_size=30000,
        delegate="android-xnnpack",
        threads=4,
        runs=50,
        warmup=5,
    )
    assert args[0] == "/data/local/tmp/albert-edge/benchmark_model"
    assert "--graph=/data/local/tmp/albert-edge/m.tflite" in args
    assert "--signature_to_run_for=seq_128" in args
    # positional matching: flags follow the subgraph's input order
    assert "--input_layer=attention_mask,input_ids,token_type_ids" in args
    assert "--input_layer_shape=1,128:1,128:1,128" in args
    assert (
        "--input_layer_value_range=attention_mask,1,1:input_ids,5,29999:token_type_ids,0,0"
    ) in args
    assert "--num_threads=4" in args and "--use_xnnpack=true" in args
    assert "--num_runs=50" in args and "--warmup_runs=5" in args
    assert "--report_peak_memory_footprint=true" in args

    gpu = build_benchmark_args(
        graph="g", signature=sig, vocab_size=30000, batch=2, delegate="android-gpu", threads=4
    )
    assert "--use_gpu=true" in gpu and "--num_threads=1" in gpu
    assert "--input_layer_shape=2,128:2,128:2,128" in gpu
    nnapi = build_benchmark_args(
        graph="g", signature=sig, vocab_size=30000, delegate="android-nnapi"
    )
    assert "--use_nnapi=true" in nnapi
    with pytest.raises(BenchmarkError, match="unknown Android delegate"):
        build_benchmark_args(graph="g", signature=sig, vocab_size=30000, delegate="hexagon")


def _signature_tflite(path: Path) -> Path:
    """A real two-signature .tflite whose inputs are not in alphabetical order."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    class Tiny(tf.Module):
        def __init__(self) -> None:
            self.table = tf.Variable(tf.random.normal([50, 4]))

        def _run(
            self, input_ids: tf.Tensor, attention_mask: tf.Tensor, token_type_ids: tf.Tensor
        ) -> dict[str, tf.Tensor]:
            x = tf.gather(self.table, input_ids) * tf.cast(attention_mask, tf.float32)[..., None]
            x = x + tf.cast(token_type_ids, tf.float32)[..., None]
            return {"logits": tf.reduce_sum(x, axis=1)}

    m = Tiny()
    signatures = {}
    for seq in (16, 32):
        spec = [
            tf.TensorSpec([1, seq], tf.int32, name=n)
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ]
        signatures[f"seq_{seq}"] = tf.function(m._run, input_signature=spec).get_concrete_function()
    saved = path.parent / "saved"
    tf.saved_model.save(m, str(saved), signatures=signatures)
    conv = tf.lite.TFLiteConverter.from_saved_model(str(saved), signature_keys=list(signatures))
    tflite = conv.convert()
    path.write_bytes(tflite)
    return path


def test_read_signatures_of_a_real_tflite(tmp_path: Path) -> None:
    model = _signature_tflite(tmp_path / "m.tflite")
    sigs = read_signatures(model)
    assert sorted(s.seq_len for s in sigs) == [16, 32]
    for s in sigs:
        assert sorted(s.names) == ["attention_mask", "input_ids", "token_type_ids"]
        args = build_benchmark_args(graph="g", signature=s, vocab_size=50)
        names = next(a for a in args if a.startswith("--input_layer="))
        assert names == "--input_layer=" + ",".join(s.names)
        assert "input_ids,5,49" in next(a for a in args if "value_range" in a)


def test_without_adb_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = _target(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # a real PATH with no adb on it
    with pytest.raises(BenchmarkError, match="adb not found on PATH"):
        bench_adb([target])
    with pytest.raises(BenchmarkError, match=r"--adb benchmarks \.tflite"):
        bench_adb([Target(path=tmp_path, format="onnx", name="x", model_file=tmp_path)])
