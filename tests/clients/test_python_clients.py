"""Python clients load the artifact as written: optimum's ORTModelForSequenceClassification +
transformers pipeline (truncation on a 2,000-token text) and the Triton config parsed by
tritonclient's model_config protobuf, compared with the graph."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
# int8-dynamic vs PyTorch on this model: logits differ by < 0.05 (manifest: ~7e-3);
# fp32 by ORT's kernel rounding only.
# int4 (4-bit weights and tables): within 0.11 of PyTorch on these sentences.
# pruned-int8: the embedded model with 2 of 4 heads and half its FFN pruned (issue 54),
# int8-dynamic, against its own pruned PyTorch model.
LOGIT_TOL = {"fp32": 1e-4, "int8": 0.05, "int4": 0.25, "mixed": 0.25, "pruned-int8": 0.05}


@pytest.mark.parametrize("kind", ["fp32", "int8", "int4", "mixed", "pruned-int8"])
def test_optimum_pipeline(request, client_artifacts, sentences, torch_logits, kind: str) -> None:
    import torch
    from optimum.onnxruntime import ORTModelForSequenceClassification
    from transformers import AutoTokenizer, pipeline

    if kind == "pruned-int8":  # built only when asked: pruning + convert take a while
        pruned = request.getfixturevalue("pruned_client")
        art, torch_logits = pruned["int8"], pruned["logits"]
    else:
        art = client_artifacts[kind]
    model = ORTModelForSequenceClassification.from_pretrained(art)  # finds onnx/model*.onnx
    tok = AutoTokenizer.from_pretrained(art)
    assert tok.model_max_length == 64  # the length the embedded model was trained at
    for (_, text), ref in zip(sentences, torch_logits):
        with torch.no_grad():
            got = model(**tok(text, return_tensors="pt")).logits[0].numpy()
        np.testing.assert_allclose(got, ref, atol=LOGIT_TOL[kind])
    clf = pipeline("text-classification", model=model, tokenizer=tok)
    labels = model.config.id2label
    for (_, text), ref in zip(sentences, torch_logits):
        # the pruned (unhealed) model has near-ties: its label where rounding cannot flip it
        if kind != "pruned-int8" or abs(ref[0] - ref[1]) > 2 * LOGIT_TOL[kind]:
            assert clf(text)[0]["label"] == labels[int(np.argmax(ref))]
    long_text = " ".join(["a gripping , moving and thoroughly enjoyable film"] * 250)
    assert len(tok(long_text)["input_ids"]) > 2000
    out = clf(long_text, truncation=True)
    assert out[0]["label"] in labels.values() and 0.0 <= out[0]["score"] <= 1.0


def test_triton_config_parses_and_matches_graph(client_artifacts, tmp_path) -> None:
    import onnx
    from google.protobuf import text_format

    model_config_pb2 = pytest.importorskip(
        "tritonclient.grpc.model_config_pb2", reason="pip install tritonclient (dev extra)"
    )
    art = client_artifacts["int8"]
    repo = tmp_path / "repo"
    (repo / "other").mkdir(parents=True)  # a repository is shared: other models stay
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "export-triton",
            str(art),
            "-o",
            str(repo),
            "--name",
            "albert_sst2",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert (repo / "other").is_dir()
    model_dir = repo / "albert_sst2"
    assert (model_dir / "1" / "model.onnx").read_bytes() == (
        art / json.loads((art / "manifest.json").read_text())["model_file"]
    ).read_bytes()
    cfg = text_format.Parse(
        (model_dir / "config.pbtxt").read_text(), model_config_pb2.ModelConfig()
    )  # strict: an unknown field or enum value raises
    graph = onnx.load(str(model_dir / "1" / "model.onnx")).graph
    assert cfg.name == "albert_sst2" and cfg.backend == "onnxruntime"
    assert cfg.max_batch_size == 8 and cfg.HasField("dynamic_batching")
    dt = model_config_pb2.DataType
    onnx_to_triton = {onnx.TensorProto.INT64: dt.TYPE_INT64, onnx.TensorProto.FLOAT: dt.TYPE_FP32}
    for cfg_values, graph_values in ((cfg.input, graph.input), (cfg.output, graph.output)):
        assert [v.name for v in cfg_values] == [v.name for v in graph_values]
        for c, g in zip(cfg_values, graph_values):
            assert c.data_type == onnx_to_triton[g.type.tensor_type.elem_type]
            gdims = [
                d.dim_value if d.HasField("dim_value") else -1 for d in g.type.tensor_type.shape.dim
            ]
            assert gdims[0] == -1 and list(c.dims) == gdims[1:]  # batch axis is Triton's
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "export-triton",
            str(art),
            "-o",
            str(repo),
            "--name",
            "albert_sst2",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert again.returncode == 2 and "--overwrite" in again.stderr
    assert "Traceback" not in again.stderr


def test_triton_refuses_bad_requests(client_artifacts, tmp_path) -> None:
    from albert_edge.errors import AlbertEdgeError
    from albert_edge.triton import export_triton

    with pytest.raises(AlbertEdgeError, match="model name"):
        export_triton(client_artifacts["fp32"], tmp_path, name="a b")
    with pytest.raises(AlbertEdgeError, match="versions start at 1"):
        export_triton(client_artifacts["fp32"], tmp_path, version=0)
    info = export_triton(client_artifacts["fp32"], tmp_path, name="nobatch", max_batch_size=0)
    text = (tmp_path / "nobatch" / "config.pbtxt").read_text()
    assert info["dynamic_batching"] is False and "max_batch_size: 0" in text
    assert "dims: [ -1, -1 ]" in text and "dynamic_batching" not in text
