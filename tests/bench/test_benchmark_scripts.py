"""The scripts in benchmarks/ time through bench() and write albert-edge-bench/1 reports.

One real tiny bench() run (one child, 2 timed runs) through ``benchmarks.script_report``
gives the rows; each script's own columns are added the way the script adds them, and
its ``--render`` must accept the report and render every row. A result file written by
an old script (its own schema) is left alone by ``--render``. Nothing asserts a time.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from albert_edge.bench import resolve_target, validate_report

# Frozen investigations (benchmarks/studies/) whose helpers are still tested here.
STUDIES = {"roofline", "skip_layernorm", "time_budget"}


def script(name: str) -> ModuleType:
    """A benchmarks module, imported as a package module (no sys.path patching)."""
    package = "benchmarks.studies" if name in STUDIES else "benchmarks"
    return importlib.import_module(f"{package}.{name}")


@pytest.fixture(scope="module")
def timed(tiny_onnx: Path) -> dict[str, Any]:
    """bench() of the tiny ONNX file as the scripts call it (one backend, one shape)."""
    sr = script("script_report")
    targets = [resolve_target(tiny_onnx).with_(name=n) for n in ("variant a", "variant b")]
    report: dict[str, Any] = sr.time_targets(
        targets, "ort-cpu", batch=1, seq=16, threads=1, runs=2, warmup=1, progress=False
    )
    assert [r["status"] for r in report["results"]] == ["ok", "ok"], report["results"]
    return report


def render_from(tmp_path: Path, stem: str, report: dict[str, Any]) -> str:
    """Write ``report`` as the script would, re-render it with --render, return the .md."""
    assert validate_report(report) == []
    assert script("script_report").write(report, tmp_path, stem, script(stem).markdown) == 0
    assert validate_report(json.loads((tmp_path / f"{stem}.json").read_text())) == []
    (tmp_path / f"{stem}.md").unlink()
    assert script(stem).main(["--render", "--out", str(tmp_path)]) == 0
    return (tmp_path / f"{stem}.md").read_text()


def test_onnx_vs_optimum_report(
    timed: dict[str, Any], tiny_onnx: Path, make_checkpoint: Any, tmp_path: Path
) -> None:
    mod = script("onnx_vs_optimum")
    report = copy.deepcopy(timed)
    facts = mod.checkpoint_facts(make_checkpoint("tiny"))
    for r in report["results"]:
        r.update(mod.graph_facts(tiny_onnx), model="tiny", max_abs_err_vs_pytorch=1e-6)
        r["ratio_to_checkpoint_floor"] = r["file_bytes"] / facts["checkpoint_floor_bytes"]
    report["models"] = {"tiny": facts}
    report["settings"].update(optimum_version="x", levels=["O1"])
    md = render_from(tmp_path, "onnx_vs_optimum", report)
    assert "## tiny (" in md
    assert md.count("| variant ") == 3  # header + the two rows


def test_onnx_quantization_report(timed: dict[str, Any], tiny_onnx: Path, tmp_path: Path) -> None:
    mod = script("onnx_quantization")
    report = copy.deepcopy(timed)
    names = (mod.OPTIMUM_INT8, mod.INT8, mod.FP32_FUSED)
    report["results"] = [copy.deepcopy(report["results"][0]) for _ in names]
    for r, name in zip(report["results"], names, strict=True):
        r.update(mod.describe(tiny_onnx), artifact=name, model="albert-base")
        r.update(logits_sqnr_db_vs_pytorch=40.0, accuracy=0.8)
        r["sst2_dev"] = {"accuracy": 80.0, "delta_points": 0.0, "pytorch": 80.0}
    report["models"] = {"albert-base": {"unique_params": 1, "pytorch_dev_accuracy": 80.0}}
    md = render_from(tmp_path, "onnx_quantization", report)
    assert "Speed bar:" in md  # the verdicts are re-derived from the rows' p50s
    assert "80.00 (+0.00)" in md
    assert "PyTorch fp32 dev accuracy: 80.00 %" in md


def test_tflite_routes_report(timed: dict[str, Any], tmp_path: Path) -> None:
    # The tiny ONNX rows stand in for .tflite rows: the Markdown reads the columns only.
    mod = script("tflite_routes")
    report = copy.deepcopy(timed)
    r = report["results"][0]
    r.update(
        route="litert-torch",
        duplicate_tensor_bytes=0,
        quantized_fully_connected={"quantized": 0, "total": 4, "by_dtype": {}},
        max_abs_error=1e-7,
        argmax_agreement=1.0,
        loads_on_tflite_runtime_2_14=False,
        offending_ops_2_14=["FULLY_CONNECTED v12 (2.14 has v10)"],
    )
    failed = mod.failed_row("int8-full", "tf-converter", "RuntimeError: no", threads=1)
    report["results"] = [r, failed]
    report["checkpoint"], report["config"] = "random tiny", {"hidden_size": 32}
    report["settings"].update(signatures=[16], sentences=4)
    md = render_from(tmp_path, "tflite_routes", report)
    assert "| litert-torch |" in md and "no: FULLY_CONNECTED v12" in md
    assert "| int8-full | tf-converter | failed: RuntimeError: no |" in md


def test_peers_render(timed: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    report = copy.deepcopy(timed)
    for r in report["results"]:
        r["model"] = "tiny"
    (tmp_path / "peers.json").write_text(json.dumps(report))
    assert script("peers").main(["--render", "--out", str(tmp_path)]) == 0
    assert "| tiny | variant a |" in (tmp_path / "peers.md").read_text()


@pytest.mark.parametrize("stem", ["onnx_quantization", "onnx_vs_optimum", "tflite_routes"])
def test_render_leaves_an_old_schema_result_alone(stem: str, tmp_path: Path) -> None:
    old = {"benchmark": stem, "models": {}}
    (tmp_path / f"{stem}.json").write_text(json.dumps(old))
    (tmp_path / f"{stem}.md").write_text("old\n")
    assert script(stem).main(["--render", "--out", str(tmp_path)]) == 0
    assert (tmp_path / f"{stem}.md").read_text() == "old\n"
    assert json.loads((tmp_path / f"{stem}.json").read_text()) == old


def test_write_refuses_a_report_that_does_not_validate(
    timed: dict[str, Any], tmp_path: Path
) -> None:
    report = copy.deepcopy(timed)
    del report["results"][0]["latency_ms"]
    assert script("script_report").write(report, tmp_path, "x", lambda _: "") == 1
    assert not (tmp_path / "x.json").exists()


def test_precisions_bars_text() -> None:
    """The bars say "slower ... at every length" when a precision never wins, and quote a
    peer's load failure up to the end of its first sentence, never cut mid-word."""
    mod = script("precisions")
    seqs = (8, 128)
    p50s = {
        "albert-edge onnx fp32": (4.0, 10.0),
        "albert-edge onnx int8-dynamic": (2.0, 5.0),
        "albert-edge onnx int4": (3.0, 11.0),  # loses to fp32 at 128 only, to int8 at both
        "albert-edge tflite int8-dynamic": (2.0, 4.0),
        "optimum int8": (4.0, 8.0),
    }
    rows: list[dict[str, Any]] = [
        {"artifact": art, "seq_len": s, "latency_ms": {"p50": ms}, "w2_median_ms": 1.0}
        for art, pair in p50s.items()
        for s, ms in zip(seqs, pair, strict=True)
    ]
    reason = (
        "load failed: UnsupportedError: m/model.tflite: ai_edge_litert cannot load this model "
        "(kernels/embedding_lookup.cc:73 zero_point == 0 was not true.Node number 1 "
        "(EMBEDDING_LOOKUP) failed to prepare.); run `albert-edge inspect` on it to"
    )
    rows += [
        {"artifact": mod.LITERT_PEER, "seq_len": s, "latency_ms": None, "reason": reason}
        for s in seqs
    ]
    text = "\n".join(mod.verdicts(rows, seqs))
    assert "onnx int8-dynamic faster than albert-edge onnx fp32 at every length (8, 128)" in text
    assert "onnx int4 faster than albert-edge onnx fp32 except at seq 128 (8, 128)" in text
    assert "onnx int4 slower than albert-edge onnx int8-dynamic at every length (8, 128)" in text
    assert "except at seq 8, 128" not in text
    assert (
        f"{mod.LITERT_PEER} not measured: ai_edge_litert cannot load this model "
        "(kernels/embedding_lookup.cc:73 zero_point == 0 was not true.Node number 1 "
        "(EMBEDDING_LOOKUP) failed to prepare.))"
    ) in text
    assert "inspe" not in text
    assert "tflite int8-dynamic ÷ optimum int8: W1 0.50×, W2 1.00×" in text


def test_work_artifacts_are_rebuilt_when_the_code_changes(tmp_path: Path, monkeypatch) -> None:
    """A kept artifact is reused only by the source that built it; a stale one goes."""
    sr = script("script_report")
    out = tmp_path / "albert-edge-onnx-int4"
    out.mkdir()
    (out / "manifest.json").write_text("{}")
    assert sr.reusable(out) is False and not out.exists()  # never stamped: rebuilt
    out.mkdir()
    assert sr.built(out) == out and sr.reusable(out) is True and out.exists()
    monkeypatch.setattr(sr, "code_stamp", lambda: "another-version")
    assert sr.reusable(out) is False and not out.exists()


@pytest.fixture
def shared_from_repo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spiece_path: Path, sst2_dev: Path
) -> Path:
    """A ``../shared`` layout of the data the repository ships, named by
    ``ALBERT_EDGE_SHARED`` for a benchmark's child processes (they read it at import)."""
    root = tmp_path / "shared"
    (root / "data" / "albert").mkdir(parents=True)
    (root / "data" / "sst2").mkdir()
    (root / "data" / "albert" / "30k-clean.model").symlink_to(spiece_path)
    (root / "data" / "sst2" / "dev.tsv").symlink_to(sst2_dev)
    monkeypatch.setenv("ALBERT_EDGE_SHARED", str(root))
    return root


def test_precisions_w2_interleaved_block_by_block(
    tiny_onnx: Path, tmp_path: Path, shared_from_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """W2's resident children answer every block with one time per sentence; a file that
    cannot load is skipped with its reason, and the others are still timed."""
    mod = script("precisions")
    monkeypatch.setattr(mod, "SPIECE", shared_from_repo / "data" / "albert" / "30k-clean.model")
    monkeypatch.setattr(mod, "DEV", shared_from_repo / "data" / "sst2" / "dev.tsv")
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not an onnx model")
    got = mod.w2_latencies(
        [("a", tiny_onnx), ("broken", bad), ("b", tiny_onnx)],
        12,
        1,
        rounds=2,
        gap_s=0.0,
        block=5,
    )
    assert set(got) == {"a", "b"} and all(v > 0 for v in got.values()), got


def _budget_graph() -> Any:
    """x → quantize → QAttention → FastGelu → residual Sum → LayerNormalization: one node
    of every kind time_budget.py takes out, with ORT's own input conventions."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    h, rng = 16, np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.integers(-127, 127, (h, 3 * h), dtype=np.int8), "W"),
        numpy_helper.from_array(rng.standard_normal(3 * h).astype(np.float32), "B"),
        numpy_helper.from_array(np.array(0.01, np.float32), "WS"),
        numpy_helper.from_array(np.array(0, np.int8), "WZ"),
        numpy_helper.from_array(rng.standard_normal(h).astype(np.float32), "GB"),
        numpy_helper.from_array(np.ones(h, np.float32), "G"),
        numpy_helper.from_array(np.zeros(h, np.float32), "BETA"),
    ]
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node(
            "QAttention",
            ["xq", "W", "B", "xs", "WS", "mask", "xz", "WZ"],
            ["att"],
            domain="com.microsoft",
            num_heads=2,
        ),
        helper.make_node("FastGelu", ["att", "GB"], ["gelu"], domain="com.microsoft"),
        helper.make_node("Sum", ["gelu", "x"], ["res"]),
        helper.make_node("LayerNormalization", ["res", "G", "BETA"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "budget",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, h]),
            helper.make_tensor_value_info("mask", TensorProto.INT32, [1, 4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, h])],
        inits,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


@pytest.mark.parametrize(
    "variant", ["-attention core", "-GELU", "-LayerNorm", "-residual", "GEMMs only"]
)
def test_time_budget_variants_take_out_one_kind_and_still_run(variant: str) -> None:
    import numpy as np
    import onnx
    import onnxruntime as ort

    mod = script("time_budget")
    full = _budget_graph()
    stripped = mod.strip(full, mod.REMOVES[variant])
    onnx.checker.check_model(stripped)
    before = [n.op_type for n in full.graph.node]
    after = [n.op_type for n in stripped.graph.node]
    gone = {
        "attention": "QAttention",
        "gelu": "FastGelu",
        "ln": "LayerNormalization",
        "residual": "Sum",
    }
    for kind, op in gone.items():
        assert (op in after) == (kind not in mod.REMOVES[variant]), (variant, after)
    assert before.count("DynamicQuantizeLinear") == after.count("DynamicQuantizeLinear")
    if "attention" in mod.REMOVES[variant]:
        assert "MatMulInteger" in after  # the QKV product stays: only the core is taken out
    sess = ort.InferenceSession(stripped.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {
        "x": np.random.default_rng(1).standard_normal((1, 4, 16)).astype(np.float32),
        "mask": np.ones((1, 4), np.int32),
    }
    assert sess.run(None, feeds)[0].shape == (1, 4, 16)


def test_skip_layernorm_variants_change_only_the_residual(tmp_path: Path) -> None:
    """skip_layernorm.py's two copies of a split graph: ``sum3`` moves the constant bias
    into the residual Sum, ``fused`` writes SkipLayerNormalization back; both compute the
    same output as the split in ONNX Runtime."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    mod = script("skip_layernorm")
    rng = np.random.default_rng(0)
    h = 8
    inits = [
        numpy_helper.from_array(rng.standard_normal(h).astype(np.float32), "bias"),
        numpy_helper.from_array(np.ones(h, np.float32), "g"),
        numpy_helper.from_array(np.zeros(h, np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["xb"]),
        helper.make_node("Sum", ["xb", "s"], ["r"]),
        helper.make_node("LayerNormalization", ["r", "g", "b"], ["y"], axis=-1, epsilon=1e-5),
    ]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, h]) for n in ("x", "s", "y")]
    graph = helper.make_graph(nodes, "g", io[:2], io[2:], inits)
    split = tmp_path / "split.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), split)

    assert mod.bias_into_sum(split, tmp_path / "sum3.onnx") == 1
    assert mod.fuse_back(split, tmp_path / "fused.onnx") == 1
    sum3 = onnx.load(tmp_path / "sum3.onnx").graph.node
    assert [n.op_type for n in sum3] == ["Sum", "LayerNormalization"]
    assert list(sum3[0].input) == ["x", "s", "bias"]
    fused = onnx.load(tmp_path / "fused.onnx").graph.node
    assert [n.op_type for n in fused] == ["SkipLayerNormalization"]

    feeds = {k: rng.standard_normal((2, h)).astype(np.float32) for k in ("x", "s")}

    def run(name: str) -> Any:
        sess = ort.InferenceSession(str(tmp_path / name), providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)[0]

    for name in ("sum3.onnx", "fused.onnx"):
        np.testing.assert_allclose(run(name), run("split.onnx"), rtol=1e-5, atol=1e-5)


def test_roofline_script_bounds_every_m_at_every_thread_count(tmp_path: Path) -> None:
    """roofline.py on the tiny config: every weight-GEMM shape measured at both thread
    counts in int8 and fp32, and the Markdown's bound is flops.weight_gemms at those rates."""
    import json

    from albert_edge.bench.flops import weight_gemms
    from albert_edge.bench.roofline import bound_ms

    mod = script("roofline")
    args = ["--config", "tiny", "--m", "8,16", "--threads", "1,2", "--min-time", "0.01"]
    assert mod.main([*args, "--no-xnnpack", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "roofline.json").read_text())
    roof, config = report["roofline"], report["settings"]["config"]
    for th in (1, 2):
        for m in (8, 16):
            for prec in ("int8", "fp32"):
                got = bound_ms(
                    roof, weight_gemms(config, m), device="cpu", threads=th, precision=prec
                )
                assert got is not None and got > 0, (th, m, prec)
            b8 = bound_ms(roof, weight_gemms(config, m), device="cpu", threads=th, precision="int8")
            assert f"| {th} | {m} | {b8:.2f} |" in (tmp_path / "roofline.md").read_text()
    assert mod.main(["--render", "--out", str(tmp_path)]) == 0


def test_codebase_metrics_counts_what_it_says(tmp_path: Path) -> None:
    """tools/codebase_metrics.py on a small tree it can be checked against by hand: one
    long function, one short one, a fact defined twice, a private import, a sys.path patch."""
    spec = importlib.util.spec_from_file_location(
        "codebase_metrics", Path(__file__).resolve().parents[2] / "tools" / "codebase_metrics.py"
    )
    assert spec is not None and spec.loader is not None
    cm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cm)
    pkg = tmp_path / "albert_edge"
    (tmp_path / "converters").mkdir()
    (pkg / "onnx").mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(101))
    (pkg / "__init__.py").write_text(f"def long():\n{body}\n\n\ndef floor_bytes():\n    pass\n")
    (pkg / "onnx" / "a.py").write_text(
        'OPS = {"MatMul", "Gemm"}\nRECIPES = {}\n\n\ndef floor_bytes():\n'
        "    def inner():\n        pass\n"
    )
    (tmp_path / "benchmarks" / "studies").mkdir(parents=True)
    (tmp_path / "benchmarks" / "x.py").write_text(
        "import sys\nfrom albert_edge.verify import _private, public\nsys.path.insert(0, '.')\n"
        "from benchmarks._setup import ROOT\n"  # the package's own module: not a private import
    )
    (tmp_path / "benchmarks" / "studies" / "y.py").write_text("from a._b import c\n")
    got = cm.code_metrics(tmp_path)
    assert got["modules"] == 2
    assert got["functions_over_100_lines"] == [
        {"function": "albert_edge/__init__.py:long", "lines": 102}
    ]
    facts = got["graph_facts"]
    assert [p.split(" ")[0] for p in facts["floor bytes"]] == [
        "albert_edge/__init__.py:105",
        "albert_edge/onnx/a.py:5",
    ]
    assert len(facts["weight-op table (ops whose inputs are weights)"]) == 1
    assert len(facts["RECIPES (quantization recipes)"]) == 1
    b = cm.benchmark_metrics(tmp_path)
    assert b["benchmarks"]["scripts"] == 1 and b["studies"]["scripts"] == 1
    assert b["benchmarks"]["private_imports"] == [
        "benchmarks/x.py:2 from albert_edge.verify import _private"
    ]
    assert b["benchmarks"]["sys_path_patches"] == ["benchmarks/x.py:3"]
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_z.py").write_text("x = 1\n" * 50)  # tests are not counted
    lines = cm.python_lines(tmp_path)
    # albert_edge: 106 + 7 lines, benchmarks: 4 + 1
    assert lines == {"outside_tests": 118, "benchmarks": 5, "benchmark_share": round(5 / 118, 4)}
    assert b["studies"]["private_imports"] == ["benchmarks/studies/y.py:1 from a._b import c"]
