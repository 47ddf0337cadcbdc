"""TFLite/LiteRT target: conversion, flatbuffer promises, the multi-signature runner.

Conversions are slow (litert-torch lowers through torch.export and MLIR), so each
artifact is converted once per module and shared by the tests that read it.

``small`` is the tiny ALBERT with E = H = 64 instead of 16/32: the same graph (and
conversion time), but weights large enough next to the fixed per-op flatbuffer overhead
that the size bars (≤ 1.02× / 1.05× the floor) test the artifact rather than the
graph's table headers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from albert_edge.checkpoint import load_checkpoint
from albert_edge.configs import make_config, make_random_checkpoint
from albert_edge.convert import convert
from albert_edge.errors import UnsupportedError
from albert_edge.options import ConvertOptions

ROOT = Path(__file__).resolve().parents[2]


def _small_ckpt(tmp: Path, spiece: Path, head: str = "sequence-classification") -> Path:
    cfg = make_config("tiny", embedding_size=64, hidden_size=64, intermediate_size=128)
    return make_random_checkpoint(tmp, cfg, head=head, spiece_model=spiece)


def _convert(tmp_path_factory: Any, ckpt: Path, name: str, **kw: Any) -> tuple[Path, dict]:
    """fp32 conversions are verified (verify's grid is the one comparison with PyTorch and
    refuses fp32 beyond 1e-4, every signature bucket); quantized ones are not by default,
    their SQNR floors are test_verify's."""
    out = tmp_path_factory.mktemp("tfl") / name
    verify = kw.get("precision", "fp32") == "fp32"
    opts = ConvertOptions(target="tflite", **{"verify": verify, **kw})
    manifest = convert(ckpt, out, opts)
    return out, manifest


def _torch_ref(ckpt_dir: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    ck = load_checkpoint(ckpt_dir)
    with torch.no_grad():
        out = ck.model(**{k: torch.from_numpy(v) for k, v in feeds.items()}, return_dict=True)
    return {k: getattr(out, k).numpy() for k in ck.head.outputs}


def _feeds(
    batch: int, seq: int, seed: int = 0, choices: int | None = None
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (batch, choices, seq) if choices else (batch, seq)
    ids = rng.integers(5, 30000, shape)
    mask = np.ones(shape, dtype=np.int64)
    mask[0, ..., seq // 2 :] = 0
    tt = np.zeros(shape, dtype=np.int64)
    tt[..., seq // 3 :] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt}


def _model(path: Path) -> Any:
    from albert_edge.tflite import flatbuffer as fb

    return fb.read_model(path.read_bytes())


def _max_err(got: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> float:
    assert set(got) == set(ref)
    for k in ref:
        assert got[k].shape == ref[k].shape, (k, got[k].shape, ref[k].shape)
    return max(float(np.abs(got[k] - ref[k]).max()) for k in ref)


def _assert_only_named_floats_stay_wide(path: Path, precision: str) -> None:
    """Issue 17: no float32 constant is left under a narrower precision except the named
    exceptions (operands of the quantizer's ops, i.e. FC biases; constants under
    ``MIN_NARROW_BYTES``; under int8, vectors such as LayerNorm γ/β)."""
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.inspect import byte_accounting
    from albert_edge.tflite.passes.narrow import MIN_NARROW_BYTES, QUANTIZER_OPS, is_vector

    data = path.read_bytes()
    rows = byte_accounting(fb.read_model(data), len(data), precision)["buffers"]
    wide = [
        (r["name"], r["bytes"], r["readers"])
        for r in rows
        if r["dtype"] == "float32"
        and r["bytes"] >= MIN_NARROW_BYTES
        and not set(r["readers"]) <= QUANTIZER_OPS
        and not (precision.startswith("int8") and is_vector(r["shape"]))
    ]
    assert wide == [], wide


def _assert_one_input_scale_per_shared_weight(path: Path) -> None:
    """int8-full: every application of a shared FC weight (each layer, each signature) reads
    its input at one scale, so its int32 bias (input scale x weight scale) and the bias's
    scale table come out the same everywhere and are stored once."""
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.passes.base import op_name

    model = fb.read_model(path.read_bytes())
    scales: dict[int, set[tuple[float, ...]]] = {}
    for sg in model.subgraphs:
        for op in sg.operators:
            if op_name(model, op) == "FULLY_CONNECTED":
                x, w = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
                q = tuple(float(v) for v in x.quantization.scale)
                scales.setdefault(int(w.buffer), set()).add(q)
    assert scales and all(len(v) == 1 for v in scales.values()), scales


# --- fixtures: one conversion each ------------------------------------------------------


@pytest.fixture(scope="module")
def small_ckpt(tmp_path_factory: Any, spiece_path: Path) -> Path:
    return _small_ckpt(tmp_path_factory.mktemp("small"), spiece_path)


@pytest.fixture(scope="module")
def small_fp32(tmp_path_factory: Any, small_ckpt: Path) -> tuple[Path, dict]:
    return _convert(tmp_path_factory, small_ckpt, "fp32", seq_lens=(16, 32))


@pytest.fixture(scope="module")
def small_int8(tmp_path_factory: Any, small_ckpt: Path) -> tuple[Path, dict]:
    return _convert(
        tmp_path_factory,
        small_ckpt,
        "int8",
        precision="int8-dynamic",
        seq_lens=(16,),
        quantize_embeddings=True,
    )


@pytest.fixture(scope="module")
def groups_mlm(tmp_path_factory: Any, make_checkpoint: Any) -> tuple[Path, dict, Path]:
    ck = make_checkpoint("tiny-groups", "masked-lm")
    out, man = _convert(tmp_path_factory, ck, "mlm", seq_lens=(16,))
    return out, man, ck


@pytest.fixture(scope="module")
def unfact_qa(tmp_path_factory: Any, make_checkpoint: Any) -> tuple[Path, dict, Path]:
    ck = make_checkpoint("tiny-unfactorized", "question-answering")
    out, man = _convert(tmp_path_factory, ck, "qa", seq_lens=(16,))
    return out, man, ck


# --- fp32, two signatures ---------------------------------------------------------------


def test_artifact_files_and_manifest(small_fp32: tuple[Path, dict]) -> None:
    out, man = small_fp32
    for f in (
        "model.tflite",
        "manifest.json",
        "spiece.model",
        "config.json",
        "tokenizer_config.json",
    ):
        assert (out / f).is_file(), f
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["target"] == "tflite" and on_disk["model_file"] == "model.tflite"
    assert man["precision"] == "fp32" and man["head"] == "sequence-classification"
    assert man["route"]["converter"] and man["route"]["why"]
    assert [s["name"] for s in man["signatures"]] == ["seq_16", "seq_32"]
    assert [s["seq_len"] for s in man["signatures"]] == [16, 32]
    assert {i["name"] for i in man["signatures"][0]["inputs"]} == {
        "input_ids",
        "attention_mask",
        "token_type_ids",
    }
    assert man["batch"]["signature_batch"] == 1
    # verify is the one comparison: batch 1 and 2, every bucket (13 and 29 run seq_16 and
    # seq_32 padded, as the LiteRT parity check did), 1, 16 and the maximum
    ver = man["verification"]
    assert "parity" not in man and ver["passed"] and "LiteRTRunner" in ver["runtime"]
    assert ver["batch_sizes"] == [1, 2] and ver["seq_lens"] == [1, 13, 16, 29, 32]
    assert ver["outputs"]["logits"]["max_abs_err"] <= 1e-4
    # like ONNX's, files names every file but the manifest, the model first
    assert man["files"][0] == "model.tflite"
    assert set(man["files"]) == {p.name for p in out.iterdir()} - {"manifest.json"}
    assert man["postconditions"] == {
        "no_orphan_tensors": True,
        "no_duplicate_buffers": True,
        "factorized_embedding_intact": True,
        "weights_stored_once": True,
    }


def test_fp32_beyond_tolerance_is_refused_with_nothing_written(
    tmp_path: Path, small_ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One extra pass nudges the classifier bias by 1e-3 in the flatbuffer: a real LiteRT
    file whose logits differ from PyTorch beyond fp32's 1e-4. Nothing else is stubbed:
    LiteRT runs the file and verify's grid compares it, inside convert, which refuses in
    one line and leaves no directory behind (the refusal LiteRT parity used to make)."""
    from albert_edge.errors import VerificationError
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite import pipeline
    from albert_edge.tflite.passes import TflitePass

    class NudgeClassifierBias(TflitePass):
        name = "nudge_classifier_bias"

        def run(self, model: Any) -> dict[str, Any]:
            for t in model.subgraphs[0].tensors:
                name = (t.name or b"").decode()
                if name.endswith("classifier.bias"):
                    arr = fb.tensor_array(model, t)
                    assert arr is not None and arr.dtype == np.float32
                    nudged = (arr + np.float32(1e-3)).astype(np.float32).tobytes()
                    model.buffers[t.buffer].data = np.frombuffer(nudged, dtype=np.uint8).copy()
                    return {"nudged": name}
            raise AssertionError("no classifier.bias tensor to nudge")

        def postcondition(self, model: Any) -> None:
            return None

    real = pipeline.tflite_passes
    monkeypatch.setattr(
        pipeline, "tflite_passes", lambda *a, **kw: [*real(*a, **kw), NudgeClassifierBias()]
    )
    out = tmp_path / "fp32"
    with pytest.raises(VerificationError) as info:
        convert(small_ckpt, out, ConvertOptions(target="tflite", seq_lens=(16, 32)))
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{out / 'model.tflite'}: fp32 artifact disagrees")
    assert "logits: max abs err" in msg and "> 1e-04" in msg
    assert msg.endswith("nothing was written")
    assert list(tmp_path.iterdir()) == []  # no output, no temp sibling, no lock


def test_no_verify_says_no_comparison_ran(small_int8: tuple[Path, dict]) -> None:
    out, man = small_int8
    assert man["verification"] == {"skipped": "--no-verify"} and "parity" not in man
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["verification"] == {"skipped": "--no-verify"}
    assert "not verified at conversion (`--no-verify`)" in (out / "README.md").read_text()


def test_fp32_matches_pytorch(small_fp32: tuple[Path, dict], small_ckpt: Path) -> None:
    from albert_edge.tflite.runtime import LiteRTRunner

    runner = LiteRTRunner(small_fp32[0] / "model.tflite", threads=2)
    for seq in (5, 16, 23, 32):  # below, at and between buckets
        feeds = _feeds(3, seq, seed=seq)
        assert _max_err(runner.run(feeds), _torch_ref(small_ckpt, feeds)) <= 1e-4


def test_runner_picks_the_smallest_bucket(small_fp32: tuple[Path, dict], small_ckpt: Path) -> None:
    from albert_edge.runtime import open_runner

    runner = open_runner(small_fp32[0], threads=2)
    assert runner.max_seq_len == 32
    assert runner.input_names == ("input_ids", "attention_mask", "token_type_ids")
    assert runner.output_names == ("logits",)
    assert [runner.bucket_for(n) for n in (1, 16, 17, 32)] == [16, 16, 32, 32]  # type: ignore[attr-defined]
    with pytest.raises(UnsupportedError, match="longer than the largest signature"):
        runner.run(_feeds(1, 33))


def test_batch_policy_batch_1_signatures(small_fp32: tuple[Path, dict], small_ckpt: Path) -> None:
    """The documented batch policy (README, manifest, metadata description): signatures are
    batch 1 and the batch axis does not resize (shapes are baked into RESHAPE constants),
    in the interpreter and in CompiledModel; a batch runs as a loop, each row as alone."""
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.interpreter import Interpreter

    from albert_edge.tflite import litert_metadata as lm
    from albert_edge.tflite.passes.metadata import BATCH_POLICY
    from albert_edge.tflite.runtime import LiteRTRunner

    out, man = small_fp32
    path = out / "model.tflite"
    assert man["batch"]["policy"] == BATCH_POLICY
    meta = lm.model_metadata(_model(path))
    assert meta is not None and BATCH_POLICY in meta["description"]
    assert BATCH_POLICY in (out / "README.md").read_text()  # the model card

    it = Interpreter(model_path=str(path))
    for d in it.get_input_details():  # subgraph 0: seq_32, the longest bucket
        assert list(d["shape"]) == [1, 32]
        it.resize_tensor_input(d["index"], [2, 32])
    with pytest.raises(RuntimeError, match="RESHAPE"):
        it.allocate_tensors()
    cm = CompiledModel.from_file(str(path), hardware_accel=HardwareAccelerator.CPU)
    with pytest.raises(RuntimeError, match="not compatible"):
        cm.resize_input_tensor_by_name("seq_16", "input_ids", [2, 16])

    feeds = _feeds(3, 16, seed=7)
    batch = LiteRTRunner(path).run(feeds)["logits"]
    rows = [LiteRTRunner(path).run({k: v[i : i + 1] for k, v in feeds.items()}) for i in range(3)]
    assert np.array_equal(batch, np.concatenate([r["logits"] for r in rows]))


def test_truncation_only_when_asked(small_fp32: tuple[Path, dict], small_ckpt: Path) -> None:
    from albert_edge.tflite.runtime import LiteRTRunner

    runner = LiteRTRunner(small_fp32[0] / "model.tflite", truncate=True)
    feeds = _feeds(2, 40, seed=3)
    cut = {k: v[:, :32] for k, v in feeds.items()}
    assert _max_err(runner.run(feeds), _torch_ref(small_ckpt, cut)) <= 1e-4


def test_size_bar_and_no_duplicate_buffers(small_fp32: tuple[Path, dict]) -> None:
    from albert_edge.inspect import inspect_path
    from albert_edge.tflite import flatbuffer as fb

    info = inspect_path(small_fp32[0] / "model.tflite")
    assert info["duplicate_tensor_bytes"] == 0
    assert fb.duplicate_groups(_model(small_fp32[0] / "model.tflite")) == []
    assert info["ratio_to_floor"] <= 1.02, info["ratio_to_floor"]
    # The zip tail (spiece.model, labels.txt) is the tokenizer, not weights (facts.py).
    assert info["associated_files_bytes"] > (small_fp32[0] / "spiece.model").stat().st_size
    assert info["file_bytes"] - info["associated_files_bytes"] <= 1.02 * info["floor_bytes"]
    assert small_fp32[1]["sizes"]["ratio_to_floor"] == info["ratio_to_floor"]


def test_signatures_share_every_weight(small_fp32: tuple[Path, dict]) -> None:
    """Each weight buffer is read by every signature: a signature adds no weight bytes."""
    from albert_edge.tflite import flatbuffer as fb

    model = _model(small_fp32[0] / "model.tflite")
    per_sg = []
    for sg in model.subgraphs:
        per_sg.append(
            {
                int(t.buffer)
                for t in sg.tensors
                if t.buffer and len(fb.buffer_bytes(model, t.buffer)) >= 1024
            }
        )
    assert len(per_sg) == 2 and per_sg[0] == per_sg[1]
    # The position table is stored once at the largest bucket; seq_16 slices it.
    shapes = [
        tuple(t.shape)
        for sg in model.subgraphs
        for t in sg.tensors
        if t.buffer and len(fb.buffer_bytes(model, t.buffer)) >= 1024
    ]
    assert (1, 16, 64) not in shapes


def test_drop_orphan_tensors_remaps_and_keeps_outputs(
    small_fp32: tuple[Path, dict], small_ckpt: Path, tmp_path: Path
) -> None:
    """An unreferenced tensor (what a rewrite leaves behind) is removed, indices remapped."""
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.runtime import LiteRTRunner

    src = small_fp32[0] / "model.tflite"
    model = _model(src)
    assert fb.orphan_tensor_count(model) == 0
    sizes = [len(sg.tensors) for sg in model.subgraphs]
    orphan = fb.schema().TensorT()
    orphan.name, orphan.shape, orphan.type, orphan.buffer = b"orphan", [64, 64], 0, 0
    model.subgraphs[0].tensors.insert(0, orphan)  # index 0: every other index shifts
    for op in model.subgraphs[0].operators:
        op.inputs = [int(i) + 1 if int(i) >= 0 else int(i) for i in op.inputs]
        op.outputs = [int(i) + 1 for i in op.outputs]
    sg0 = model.subgraphs[0]
    sg0.inputs = [int(i) + 1 for i in sg0.inputs]
    sg0.outputs = [int(i) + 1 for i in sg0.outputs]
    for sd in model.signatureDefs:
        if int(sd.subgraphIndex) == 0:
            for tm in [*sd.inputs, *sd.outputs]:
                tm.tensorIndex = int(tm.tensorIndex) + 1
    assert fb.orphan_tensor_count(model) == 1

    assert fb.drop_orphan_tensors(model) == 1
    assert [len(sg.tensors) for sg in model.subgraphs] == sizes
    assert fb.orphan_tensor_count(model) == 0
    out = tmp_path / "model.tflite"
    out.write_bytes(fb.write_model(model))
    feeds = _feeds(1, 12)
    got = LiteRTRunner(out, threads=1).run(feeds)
    ref = LiteRTRunner(src, threads=1).run(feeds)
    assert _max_err(got, ref) == 0.0


def test_bound_mask_fill_keeps_float_outputs(small_fp32: tuple[Path, dict], tmp_path: Path) -> None:
    """The finfo.min mask becomes a moderate constant; padded inputs give the same outputs."""
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.runtime import LiteRTRunner

    src = small_fp32[0] / "model.tflite"
    model = _model(src)
    assert fb.bound_mask_fill(model, value=-64.0) >= 1
    assert fb.bound_mask_fill(model, value=-64.0) == 0  # nothing at finfo.min is left
    out = tmp_path / "model.tflite"
    out.write_bytes(fb.write_model(model))
    feeds = _feeds(2, 20)  # row 0 is half padding
    got = LiteRTRunner(out, threads=1).run(feeds)
    ref = LiteRTRunner(src, threads=1).run(feeds)
    assert _max_err(got, ref) <= 1e-5


def test_factorized_embedding_intact(small_fp32: tuple[Path, dict]) -> None:
    from albert_edge.tflite import flatbuffer as fb

    model = _model(small_fp32[0] / "model.tflite")
    shapes = {
        tuple(int(d) for d in t.shape)
        for sg in model.subgraphs
        for t in sg.tensors
        if t.buffer and len(fb.buffer_bytes(model, t.buffer))
    }
    assert (30000, 64) in shapes  # V×E
    assert (64, 64) in shapes  # E×H projection (E = H = 64 here, still its own tensor)
    assert small_fp32[1]["factorized_embedding_intact"] is True
    names = {t.name.decode() for sg in model.subgraphs for t in sg.tensors if t.name}
    assert "albert.embeddings.word_embeddings.weight" in names
    assert "albert.encoder.embedding_hidden_mapping_in.weight" in names


def test_inspect_json_via_cli(small_fp32: tuple[Path, dict]) -> None:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "inspect",
            str(small_fp32[0] / "model.tflite"),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    info = json.loads(res.stdout)
    for key in (
        "file_bytes",
        "unique_tensor_bytes",
        "duplicate_tensor_bytes",
        "floor_bytes",
        "ratio_to_floor",
        "factorized_embedding_intact",
        "quantized_fully_connected",
        "quantized_batch_matmul",
        "signatures",
        "op_versions",
        "loads_on_tflite_runtime_2_14",
    ):
        assert key in info, key
    assert info["quantized_fully_connected"] == 0
    assert [s["name"] for s in info["signatures"]] == ["seq_16", "seq_32"]
    assert isinstance(info["op_versions"]["FULLY_CONNECTED"], int)
    meta = info["litert_metadata"]  # the TFLITE_METADATA reader
    assert meta["subgraph_metadata"][0]["name"] == "seq_32"  # the longest bucket is subgraph 0
    assert meta["packed_files"]["spiece.model"] == (small_fp32[0] / "spiece.model").stat().st_size
    assert meta["missing_files"] == [] and meta["min_parser_version"] == "1.1.0"


def test_runtime_2_14_table_flags_newer_ops() -> None:
    from albert_edge.tflite.op_versions import TFLITE_RUNTIME_2_14, check_runtime

    fc = TFLITE_RUNTIME_2_14["FULLY_CONNECTED"]
    assert check_runtime({"FULLY_CONNECTED": fc}) == []
    assert check_runtime({"FULLY_CONNECTED": fc + 1})[0].startswith("FULLY_CONNECTED")
    assert check_runtime({"STABLEHLO_COMPOSITE": 1})  # unknown to 2.14


# --- int8-dynamic -------------------------------------------------------------------------


def test_int8_dynamic_quantizes_every_matmul_once(
    small_int8: tuple[Path, dict], small_ckpt: Path
) -> None:
    from albert_edge.inspect import inspect_path
    from albert_edge.tflite.runtime import LiteRTRunner

    out, man = small_int8
    info = inspect_path(out / "model.tflite")
    fc = info["matmul_ops"]["FULLY_CONNECTED"]
    assert fc["total"] > 0 and fc["quantized"] == fc["total"]
    assert info["duplicate_tensor_bytes"] == 0
    assert info["ratio_to_floor"] <= 1.05, info["ratio_to_floor"]
    assert info["factorized_embedding_intact"] is True
    model = _model(out / "model.tflite")
    from albert_edge.tflite import flatbuffer as fb

    types = fb.tensor_type_names()
    word = [
        t
        for sg in model.subgraphs
        for t in sg.tensors
        if t.name and t.name.decode().startswith("albert.embeddings.word_embeddings")
    ]
    assert word and all(types[t.type] == "INT8" for t in word)
    _assert_only_named_floats_stay_wide(out / "model.tflite", "int8-dynamic")
    # Shared layer weights: int8 bytes ≈ the model's parameter count, not L copies.
    assert info["unique_tensor_bytes"] < 0.3 * 4 * man["sizes"]["model_unique_params"]
    feeds = _feeds(2, 12)
    ref = _torch_ref(small_ckpt, feeds)["logits"]
    got = LiteRTRunner(out / "model.tflite").run(feeds)["logits"]
    sqnr = 10 * np.log10((ref**2).sum() / max(((ref - got) ** 2).sum(), 1e-30))
    assert sqnr > 20, sqnr


def test_every_stage_after_export_is_a_pass(small_int8: tuple[Path, dict]) -> None:
    """Issue 15: the TFLite stages run under the pass contract (a postcondition each)."""
    from albert_edge.tflite.passes import TflitePass

    def names(cls: type) -> set[str]:
        return {str(getattr(c, "name", "")) for c in cls.__subclasses__()} | {
            n for c in cls.__subclasses__() for n in names(c)
        }

    stages = list(small_int8[1]["stages"])
    assert stages[0] == "export"
    assert "quantize" in stages and "narrow_constants" in stages
    assert set(stages[1:]) <= names(TflitePass), set(stages[1:]) - names(TflitePass)


# --- heads and configs --------------------------------------------------------------------


def test_groups_masked_lm(groups_mlm: tuple[Path, dict, Path]) -> None:
    from albert_edge.tflite.runtime import LiteRTRunner

    out, man, ck = groups_mlm
    feeds = _feeds(2, 11)
    got = LiteRTRunner(out / "model.tflite").run(feeds)
    assert got["logits"].shape == (2, 11, 30000)
    assert _max_err(got, _torch_ref(ck, feeds)) <= 1e-4
    # G=2 groups × K=2 inner layers: 4 distinct layer weight sets, stored once each; the
    # decoder is tied to the word table: the converter's LayerNorm-folded copy is undone.
    assert man["stages"]["unfold_scaled_copies"]["bytes_removed"] == 30000 * 16 * 4
    assert man["sizes"]["duplicate_tensor_bytes"] == 0
    assert man["sizes"]["unique_params"] <= man["sizes"]["model_unique_params"] * 1.02 + 4096
    assert man["factorized_embedding_intact"] is True


def test_masked_lm_int8_dynamic_stores_the_tied_table_once(
    tmp_path_factory: Any, make_checkpoint: Any
) -> None:
    """The decoder tied to the word table: quantized once (it failed weights_stored_once)."""
    from albert_edge.inspect import inspect_path

    ck = make_checkpoint("tiny", "masked-lm")
    out, man = _convert(tmp_path_factory, ck, "mlm8", precision="int8-dynamic", seq_lens=(16,))
    assert man["postconditions"]["weights_stored_once"] is True
    info = inspect_path(out / "model.tflite")
    cfg = json.loads((ck / "config.json").read_text())
    word = cfg.get("vocab_size", 30000) * cfg["embedding_size"]  # V×E int8, once
    assert word <= info["unique_tensor_bytes"] < 2 * word, info["unique_tensor_bytes"]


def test_unfactorized_question_answering(unfact_qa: tuple[Path, dict, Path]) -> None:
    from albert_edge.tflite.runtime import LiteRTRunner

    out, man, ck = unfact_qa
    feeds = _feeds(3, 9)
    got = LiteRTRunner(out / "model.tflite").run(feeds)
    assert got["start_logits"].shape == (3, 9) and got["end_logits"].shape == (3, 9)
    assert _max_err(got, _torch_ref(ck, feeds)) <= 1e-4
    assert man["factorized_embedding_intact"] is True
    assert man["sizes"]["duplicate_tensor_bytes"] == 0


# --- bad input: one line, non-zero exit, nothing written ----------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--precision", "int3"], "int3"),
        (["--seq-lens", "64,256"], "max_position_embeddings"),
    ],
    ids=["unknown-precision", "seq-longer-than-positions"],
)
def test_bad_input_cli(tmp_path: Path, make_checkpoint: Any, extra: list[str], needle: str) -> None:
    out = tmp_path / "out"
    res = _cli("convert", str(make_checkpoint()), "--to", "tflite", "-o", str(out), *extra)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("albert-edge")]
    assert len(lines) == 1 and needle in lines[0], res.stderr[-1500:]
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_runner_rejects_a_missing_file(tmp_path: Path) -> None:
    from albert_edge.tflite.runtime import LiteRTRunner

    with pytest.raises(UnsupportedError, match="no such"):
        LiteRTRunner(tmp_path / "nope.tflite")


# --- every precision's size bar, more heads, TF1 source, the trained model ------------


@pytest.mark.parametrize(("precision", "bar"), [("fp16", 1.02), ("int8-full", 1.05)])
def test_precision_size_bars(
    tmp_path_factory: Any, small_ckpt: Path, sst2_train: Path, precision: str, bar: float
) -> None:
    from albert_edge.inspect import inspect_path

    kw: dict[str, Any] = {"quantize_embeddings": True}
    if precision == "int8-full":
        kw.update(calibration=sst2_train, num_calibration=32)
    out, _man = _convert(
        tmp_path_factory, small_ckpt, precision, precision=precision, seq_lens=(16, 32), **kw
    )
    info = inspect_path(out / "model.tflite")
    assert info["ratio_to_floor"] <= bar, info["ratio_to_floor"]
    _assert_only_named_floats_stay_wide(out / "model.tflite", precision)
    if precision == "int8-full":
        _assert_one_input_scale_per_shared_weight(out / "model.tflite")
    assert info["duplicate_tensor_bytes"] == 0
    assert info["factorized_embedding_intact"] is True
    if precision == "int8-full":
        assert info["float_compute_ops"] == {}  # every compute op integer: NPU/DSP-ready
        assert info["quantized_batch_matmul"] == info["matmul_ops"]["BATCH_MATMUL"]["total"] > 0
    feeds = _feeds(2, 20)
    from albert_edge.tflite.runtime import LiteRTRunner

    got = LiteRTRunner(out / "model.tflite").run(feeds)["logits"]
    ref = _torch_ref(small_ckpt, feeds)["logits"]
    assert got.dtype == np.float32 and got.shape == ref.shape
    sqnr = 10 * np.log10((ref**2).sum() / max(((ref - got) ** 2).sum(), 1e-30))
    assert sqnr > (40 if precision == "fp16" else 10), sqnr


def test_int8_io_keeps_int8_outputs(
    tmp_path_factory: Any, make_checkpoint: Any, sst2_train: Path
) -> None:
    from albert_edge.tflite.inspect import inspect_tflite
    from albert_edge.tflite.runtime import LiteRTRunner

    ck = make_checkpoint()
    out, _man = _convert(
        tmp_path_factory,
        ck,
        "int8io",
        precision="int8-full",
        int8_io=True,
        calibration=sst2_train,
        num_calibration=16,
        seq_lens=(16,),
    )
    sig = inspect_tflite(out / "model.tflite")["signatures"][0]
    assert [o["dtype"] for o in sig["outputs"]] == ["int8"]
    feeds = _feeds(1, 10)
    got = LiteRTRunner(out / "model.tflite").run(feeds)["logits"]  # dequantized by the runner
    assert got.dtype == np.float32
    assert np.abs(got - _torch_ref(ck, feeds)["logits"]).max() < 0.05


def test_default_buckets_include_short_lengths() -> None:
    from albert_edge.tflite.pipeline import default_buckets

    assert default_buckets(512) == (16, 32, 64, 128)
    assert default_buckets(128) == (16, 32, 64, 128)
    assert default_buckets(40) == (16, 32, 40)
    assert default_buckets(16) == (16,)


def test_signatures_add_no_weight_bytes(tmp_path_factory: Any, small_ckpt: Path) -> None:
    """The default buckets (16, 32, 64, 128) share every weight with a one-signature file;
    what each extra signature costs is in the manifest, and the longest is subgraph 0."""
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.inspect import inspect_tflite

    one, _ = _convert(tmp_path_factory, small_ckpt, "one", seq_lens=(128,))
    four, man = _convert(tmp_path_factory, small_ckpt, "four")
    a, b = inspect_tflite(one / "model.tflite"), inspect_tflite(four / "model.tflite")
    assert [s["seq_len"] for s in b["signatures"]] == [16, 32, 64, 128]
    model = fb.read_model((four / "model.tflite").read_bytes())
    sd0 = next(sd for sd in model.signatureDefs if sd.subgraphIndex == 0)
    assert sd0.signatureKey == b"seq_128"
    # Only tiny constants (slice begin/size vectors, shape vectors) may differ.
    assert b["unique_tensor_bytes"] - a["unique_tensor_bytes"] < 1024
    sizes = man["sizes"]
    costs = sizes["signature_bytes"]
    assert set(costs) == {"seq_16", "seq_32", "seq_64", "seq_128"}
    assert all(v > 0 for v in costs.values())
    assert sizes["extra_signature_bytes"] == sum(v for k, v in costs.items() if k != "seq_128")
    # The recorded cost is what the extra signatures add over the one-signature file
    # (the two files were written by the same passes; the metadata text differs a little).
    extra = b["file_bytes"] - a["file_bytes"]
    assert abs(extra - sizes["extra_signature_bytes"]) < 0.05 * extra + 512
    assert sizes["ratio_to_floor_without_extra_signatures"] <= 1.02


@pytest.mark.parametrize("head", ["base", "multiple-choice", "token-classification", "pretraining"])
def test_more_heads(tmp_path_factory: Any, make_checkpoint: Any, head: str) -> None:
    from albert_edge.tflite.runtime import LiteRTRunner

    ck = make_checkpoint("tiny", head)
    out, man = _convert(tmp_path_factory, ck, head.replace("-", "_"), seq_lens=(8, 16))
    choices = 3 if head == "multiple-choice" else None
    feeds = _feeds(2, 12, choices=choices)
    assert _max_err(LiteRTRunner(out / "model.tflite").run(feeds), _torch_ref(ck, feeds)) <= 1e-4
    assert man["sizes"]["duplicate_tensor_bytes"] == 0


def test_from_an_original_tf1_checkpoint(
    tmp_path_factory: Any, make_checkpoint: Any, spiece_path: Path
) -> None:
    from tf1_utils import write_tf1_checkpoint

    from albert_edge.tflite.runtime import LiteRTRunner

    src = load_checkpoint(make_checkpoint("tiny-groups", "sequence-classification"))
    written = write_tf1_checkpoint(
        tmp_path_factory.mktemp("tf1"), src.model, "sequence-classification", spiece=spiece_path
    )
    out, man = _convert(tmp_path_factory, written.root, "tf1", seq_lens=(16,))
    assert man["source"]["kind"] == "tf1"
    ck = load_checkpoint(written.root)
    feeds = _feeds(2, 10)
    got = LiteRTRunner(out / "model.tflite").run(feeds)
    with torch.no_grad():
        ref = ck.model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).logits.numpy()
    assert np.abs(got["logits"] - ref).max() <= 1e-4


def _sst2_accuracy(model_file: Path, tok: Any, rows: list[tuple[int, str]]) -> float:
    from albert_edge.tflite.runtime import LiteRTRunner

    runner = LiteRTRunner(model_file, threads=2)
    hits = 0
    for label, sentence in rows:
        enc = tok.encode(
            [sentence], max_length=runner.max_seq_len, truncation=True, padding="longest"
        )
        hits += int(runner.run(enc.as_numpy())["logits"].argmax(-1)[0] == label)
    return 100.0 * hits / len(rows)


def test_trained_sst2_accuracy_per_precision(
    tmp_path_factory: Any, sst2_dev: Path, sst2_train: Path
) -> None:
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.data import read_sst2

    assert (DEFAULT_MODEL / "config.json").is_file(), "the trained SST-2 model ships in the package"
    tok = load_checkpoint(DEFAULT_MODEL).tokenizer()
    rows = read_sst2(sst2_dev)
    acc = {}
    for precision in ("fp32", "fp16", "int8-dynamic", "int8-full"):
        kw: dict[str, Any] = {"calibration": sst2_train} if precision == "int8-full" else {}
        out, _ = _convert(
            tmp_path_factory,
            DEFAULT_MODEL,
            precision,
            precision=precision,
            seq_lens=(32, 64, 128),
            **kw,
        )
        acc[precision] = _sst2_accuracy(out / "model.tflite", tok, rows)
    assert abs(acc["fp16"] - acc["fp32"]) <= 0.5, acc
    assert abs(acc["int8-dynamic"] - acc["fp32"]) <= 0.5, acc
    assert abs(acc["int8-full"] - acc["fp32"]) <= 1.0, acc


def test_loads_on_tflite_runtime_2_14_when_available(small_fp32: tuple[Path, dict]) -> None:
    """Set TFLITE_RUNTIME_214_PYTHON to a python with tflite-runtime 2.14 (numpy<2) installed."""
    import os

    py = os.environ.get("TFLITE_RUNTIME_214_PYTHON")
    if not py:
        pytest.skip("TFLITE_RUNTIME_214_PYTHON not set")
    from albert_edge.tflite.inspect import inspect_tflite

    path = small_fp32[0] / "model.tflite"
    code = (
        "import sys, tflite_runtime.interpreter as t; i = t.Interpreter(sys.argv[1]); "
        "i.allocate_tensors(); print('ok')"
    )
    res = subprocess.run([py, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert (res.returncode == 0) == inspect_tflite(path)["loads_on_tflite_runtime_2_14"], (
        res.stderr[-500:]
    )
