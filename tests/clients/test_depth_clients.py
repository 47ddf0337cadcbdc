"""Clients load a depth-truncated artifact as written (issue 27): optimum's
ORTModelForSequenceClassification, transformers.js and onnxruntime-node (Node), and
LiteRT's interpreter through its signatures, each compared with the truncated PyTorch
model. The artifact is ``convert --depth 1`` of the embedded model (one of its 4 layers,
the exit head a small depth search fitted), so ``config.json`` says
``num_hidden_layers: 1``: a client that read the depth from anywhere else would fail here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .test_node_clients import _python_ort_logits, needs_node, run_node

# vs PyTorch: int8-dynamic within 0.05, int4 within 0.25 (test_python_clients.LOGIT_TOL)
TOL = 0.05
ONNX_TOL = {"onnx": TOL, "onnx-int4": 0.25}


@pytest.fixture(scope="module")
def depth_artifacts(tmp_path_factory: pytest.TempPathFactory, sst2_train: Path) -> dict[str, Any]:
    """A small depth search of the embedded model, its depth-1 truncated checkpoint, and
    ``convert --depth 1`` ONNX int8-dynamic, ONNX int4 and TFLite int8-dynamic artifacts of it."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.depth import SplitSettings, convert_at_depth, search_depths, write_truncated
    from albert_edge.depth.features import FitSettings
    from albert_edge.options import ConvertOptions

    root = tmp_path_factory.mktemp("depth-clients")
    data = root / "rows.tsv"
    data.write_text("\n".join(sst2_train.read_text().splitlines()[:401]) + "\n")
    ckpt = load_checkpoint(None)
    split = SplitSettings(fit_rows=300, held_out_rows=100, max_length=64, resamples=200)
    search = search_depths(ckpt, data, split=split, fit=FitSettings(epochs=2))
    trunc = write_truncated(ckpt, 1, root / "ckpt-depth1", search=search, how="client test")
    onnx = root / "sst2-depth1-int8"
    convert_at_depth(ckpt, onnx, ConvertOptions(precision="int8-dynamic"), search, 1)
    int4 = root / "sst2-depth1-int4"  # the form the rule picked in benchmarks/results/depth.md
    convert_at_depth(ckpt, int4, ConvertOptions(precision="int4"), search, 1)
    tfl = root / "sst2-depth1-tflite-int8"
    convert(trunc, tfl, ConvertOptions(target="tflite", precision="int8-dynamic"))
    return {"ckpt": trunc, "onnx": onnx, "onnx-int4": int4, "tflite": tfl}


@pytest.fixture(scope="module")
def depth_logits(depth_artifacts, sentences) -> list[list[float]]:
    """The truncated PyTorch model's logits, one sentence at a time."""
    import torch

    from albert_edge.checkpoint import load_checkpoint

    ckpt = load_checkpoint(depth_artifacts["ckpt"])
    assert ckpt.config.num_hidden_layers == 1
    tok = ckpt.tokenizer()
    out = []
    with torch.no_grad():
        for _, text in sentences:
            enc = tok.encode(text, padding="none")
            out.append(ckpt.model(**{k: torch.tensor(v) for k, v in vars(enc).items()}).logits[0])
    return [o.tolist() for o in out]


def test_depth_artifact_is_recorded_as_written(depth_artifacts) -> None:
    for kind in ("onnx", "onnx-int4", "tflite"):
        art = depth_artifacts[kind]
        m = json.loads((art / "manifest.json").read_text())
        assert m["depth"]["layers"] == 1 and m["depth"]["of_layers"] == 4
        assert m["depth"]["source"]["embedded"] is True
        assert m["verification"]["passed"] is True
        assert json.loads((art / "config.json").read_text())["num_hidden_layers"] == 1
        assert "runs **1 of 4** layers" in (art / "README.md").read_text()
        # the truncated checkpoint lived in a temp dir: no path of this machine is recorded
        needles = {"/tmp/", "/work/", str(Path.home()), str(depth_artifacts["ckpt"].parent)}
        for f in art.rglob("*"):
            if f.is_file():
                data = f.read_bytes()
                assert not [n for n in needles if n.encode() in data], f


@pytest.mark.parametrize("kind", ["onnx", "onnx-int4"])
def test_optimum_loads_depth_artifact(depth_artifacts, sentences, depth_logits, kind) -> None:
    import torch
    from optimum.onnxruntime import ORTModelForSequenceClassification
    from transformers import AutoTokenizer, pipeline

    art, tol = depth_artifacts[kind], ONNX_TOL[kind]
    model = ORTModelForSequenceClassification.from_pretrained(art)
    assert model.config.num_hidden_layers == 1
    tok = AutoTokenizer.from_pretrained(art)
    for (_, text), ref in zip(sentences, depth_logits, strict=True):
        with torch.no_grad():
            got = model(**tok(text, return_tensors="pt")).logits[0].numpy()
        np.testing.assert_allclose(got, ref, atol=tol)
    clf = pipeline("text-classification", model=model, tokenizer=tok)
    for (_, text), ref in zip(sentences, depth_logits, strict=True):
        if abs(ref[0] - ref[1]) > 2 * tol:
            assert clf(text)[0]["label"] == model.config.id2label[int(np.argmax(ref))]


@needs_node
@pytest.mark.parametrize("kind", ["onnx", "onnx-int4"])
def test_node_clients_load_depth_artifact(depth_artifacts, sentences, depth_logits, tmp_path, kind):
    from albert_edge.tokenizer import AlbertTokenizer

    art = depth_artifacts[kind]
    manifest = json.loads((art / "manifest.json").read_text())
    config = json.loads((art / "config.json").read_text())
    tok = AlbertTokenizer(art / "spiece.model")
    feeds = [
        {k: v[0] for k, v in vars(tok.encode(t, padding="none")).items()} for _, t in sentences
    ]
    out = run_node(
        {
            "artifact_dir": str(art),
            "model_file": manifest["model_file"],
            "sentences": [t for _, t in sentences],
            "feeds": feeds,
            "clients": ["transformers.js", "onnxruntime-node"],
        },
        tmp_path,
    )
    got = np.asarray(out["onnxruntime-node"]["logits"])
    np.testing.assert_allclose(got, np.asarray(depth_logits), atol=ONNX_TOL[kind])
    py = _python_ort_logits(art / manifest["model_file"], feeds)
    np.testing.assert_allclose(got, py, rtol=0, atol=1e-4)
    tjs = out["transformers.js"]
    for i, ref in enumerate(py.tolist()):
        if abs(ref[0] - ref[1]) > 2e-4:
            assert tjs["labels"][i] == config["id2label"][str(int(np.argmax(ref)))], i


def test_litert_loads_depth_artifact(depth_artifacts, sentences, depth_logits) -> None:
    """LiteRT's own interpreter and signature runner, no albert-edge code in between."""
    from ai_edge_litert.interpreter import Interpreter

    art = depth_artifacts["tflite"]
    model_file = art / json.loads((art / "manifest.json").read_text())["model_file"]
    interp = Interpreter(model_path=str(model_file))

    def width_of(name: str) -> int:
        return int(interp.get_signature_runner(name).get_input_details()["input_ids"]["shape"][-1])

    name = max(interp.get_signature_list(), key=width_of)  # the longest bucket: seq 128
    run = interp.get_signature_runner(name)
    width = int(run.get_input_details()["input_ids"]["shape"][-1])
    from albert_edge.tokenizer import AlbertTokenizer

    tok = AlbertTokenizer(art / "spiece.model")
    for (_, text), ref in zip(sentences, depth_logits, strict=True):
        enc = tok.encode(text, max_length=width, padding="max_length").as_numpy()
        want = run.get_input_details()
        feeds = {k: v.astype(want[k]["dtype"]) for k, v in enc.items() if k in want}
        got = run(**feeds)["logits"][0]
        np.testing.assert_allclose(got, ref, atol=TOL)
