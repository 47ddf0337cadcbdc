"""The litert_metadata pass (albert_edge.tflite.passes.metadata) on a tiny hand-built graph.

Fast: no conversion. The graph has ALBERT's signature (int32 input_ids / attention_mask /
token_type_ids → logits), so the pass sees what it sees on a converted model; outputs are
compared with the real LiteRT interpreter before and after. The official reader
(tflite-support's MetadataDisplayer) is tried in tests/clients/test_tflite_metadata.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from albert_edge.errors import PassError
from albert_edge.tflite import flatbuffer as fb
from albert_edge.tflite import litert_metadata as lm
from albert_edge.tflite.inspect import analyze_model
from albert_edge.tflite.passes import LiteRTMetadataPass
from tests.tflite.tiny_tflite import classifier_like_graph

SEQ = 8
FILES = {"spiece.model": b"\x0a\x05hello sentencepiece", "labels.txt": b"negative\npositive\n"}


def _meta(**kw: Any) -> lm.ModelMetadata:
    labels = lm.AssociatedFile("labels.txt", "class names", "TENSOR_AXIS_LABELS")
    fields: dict[str, Any] = {
        "name": "tiny",
        "description": "a tiny classifier",
        "version": "v1",
        "author": "tests",
        "license": "Apache-2.0",
        "inputs": tuple(
            lm.TensorMetadata(n, f"{n} desc", ("batch", "sequence"))
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ),
        "outputs": (lm.TensorMetadata("logits", "scores", ("sequence", "class"), (labels,)),),
        "subgraph_name": f"seq_{SEQ}",
        "sentencepiece_model": lm.AssociatedFile("spiece.model", "tokenizer"),
        **kw,
    }
    return lm.ModelMetadata(**fields)


def _feeds() -> dict[str, np.ndarray]:
    ids = np.arange(5, 5 + SEQ, dtype=np.int32).reshape(1, SEQ)
    return {
        "input_ids": ids,
        "attention_mask": np.ones((1, SEQ), np.int32),
        "token_type_ids": np.zeros((1, SEQ), np.int32),
    }


def _run(data: bytes) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=data)
    out: np.ndarray = it.get_signature_runner(f"seq_{SEQ}")(**_feeds())["logits"]
    return out


def _run_compiled(data: bytes) -> np.ndarray:
    """The same signature through LiteRT 2.x's CompiledModel (CPU), as bench's litert-gpu."""
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator

    key = f"seq_{SEQ}"
    cm = CompiledModel.from_buffer(data, hardware_accel=HardwareAccelerator.CPU)
    ins = {n: cm.create_input_buffer_by_name(key, n) for n in _feeds()}
    outs = {"logits": cm.create_output_buffer_by_name(key, "logits")}
    for n, a in _feeds().items():
        ins[n].write(a)
    cm.run_by_name(key, ins, outs)
    return np.asarray(outs["logits"].read(SEQ * 2, np.float32))


def _attach(meta: lm.ModelMetadata, files: dict[str, bytes] = FILES) -> tuple[bytes, bytes, Any]:
    model = classifier_like_graph(SEQ)
    before = fb.write_model(model)
    p = LiteRTMetadataPass(meta, files)
    report = p(model)
    data = p.pack(fb.write_model(model))
    return before, data, report


def test_metadata_reads_back_and_outputs_are_identical() -> None:
    before, data, report = _attach(_meta())
    assert report["inputs"] == ["input_ids", "attention_mask", "token_type_ids"]
    assert report["associated_files"] == {k: len(v) for k, v in FILES.items()}
    assert (
        report["file_bytes_added"]
        == lm.associated_files_bytes(data)
        > sum(map(len, FILES.values()))
    )

    meta = lm.model_metadata(fb.read_model(data))
    assert meta is not None
    assert (meta["name"], meta["version"], meta["author"], meta["license"]) == (
        "tiny",
        "v1",
        "tests",
        "Apache-2.0",
    )
    assert meta["min_parser_version"] == lm.MIN_PARSER_VERSION
    (sg,) = meta["subgraph_metadata"]
    assert sg["name"] == f"seq_{SEQ}"
    assert [t["name"] for t in sg["input_tensor_metadata"]] == [
        "input_ids",
        "attention_mask",
        "token_type_ids",
    ]
    assert sg["input_tensor_metadata"][1]["dimension_names"] == ["batch", "sequence"]
    (out,) = sg["output_tensor_metadata"]
    assert out["associated_files"] == [
        {"name": "labels.txt", "description": "class names", "type": "TENSOR_AXIS_LABELS"}
    ]
    (unit,) = sg["input_process_units"]
    assert unit["options_type"] == "SentencePieceTokenizerOptions"
    assert [f["name"] for f in unit["sentencepiece_model"]] == ["spiece.model"]

    # The files are in the zip tail, byte for byte; the model runs exactly as before.
    assert lm.packed_files(data) == FILES
    assert np.array_equal(_run(data), _run(before))
    assert np.array_equal(_run_compiled(data), _run_compiled(before))
    report2 = analyze_model(fb.read_model(data), len(data), data=data)
    assert report2["litert_metadata"]["missing_files"] == []
    assert report2["associated_files_bytes"] == report["file_bytes_added"]
    assert report2["litert_metadata"]["packed_files"] == {k: len(v) for k, v in FILES.items()}


def test_running_twice_keeps_one_entry() -> None:
    model = classifier_like_graph(SEQ)
    LiteRTMetadataPass(_meta(), FILES)(model)
    LiteRTMetadataPass(_meta(version="v2"), FILES)(model)
    names = [md.name for md in model.metadata]
    assert names.count(lm.METADATA_ENTRY.encode()) == 1
    assert lm.model_metadata(model)["version"] == "v2"  # type: ignore[index]


def test_names_must_follow_the_subgraph_order() -> None:
    meta = _meta()
    swapped = (meta.inputs[1], meta.inputs[0], meta.inputs[2])
    with pytest.raises(PassError, match="do not match subgraph 0"):
        LiteRTMetadataPass(_meta(inputs=swapped), FILES)(classifier_like_graph(SEQ))


def test_a_file_named_but_not_given_is_refused() -> None:
    with pytest.raises(ValueError, match=r"labels\.txt"):
        LiteRTMetadataPass(_meta(), {"spiece.model": b"x"})


def test_postcondition_catches_a_wrong_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that drops a field (here: the author) is caught by the read-back."""
    real = lm.build_metadata

    def lossy(meta: lm.ModelMetadata, *a: Any) -> bytes:
        return real(lm.ModelMetadata(**{**vars(meta), "author": ""}), *a)

    monkeypatch.setattr(lm, "build_metadata", lossy)
    with pytest.raises(PassError, match="litert_metadata pass: model fields"):
        LiteRTMetadataPass(_meta(), FILES)(classifier_like_graph(SEQ))


def test_parse_refuses_a_foreign_buffer() -> None:
    with pytest.raises(ValueError, match="M001"):
        lm.parse_metadata(b"\x10\x00\x00\x00TFL3" + bytes(16))


def test_no_metadata_reports_none() -> None:
    data = fb.write_model(classifier_like_graph(SEQ))
    report = analyze_model(fb.read_model(data), len(data), data=data)
    assert report["litert_metadata"] is None and report["associated_files_bytes"] == 0


def test_metadata_names_may_differ_from_the_signature() -> None:
    """The Task Library's names (ids/mask/segment_ids) describe the signature's tensors
    by position; a mapping that puts a name at the wrong position is refused."""
    from albert_edge.tflite.passes.metadata import TASK_LIBRARY_NAMES

    ins = tuple(lm.TensorMetadata(n, "d") for n in ("ids", "mask", "segment_ids"))
    model = classifier_like_graph(SEQ)
    LiteRTMetadataPass(_meta(inputs=ins), FILES, TASK_LIBRARY_NAMES)(model)
    meta = lm.model_metadata(model)
    assert meta is not None
    names = [t["name"] for t in meta["subgraph_metadata"][0]["input_tensor_metadata"]]
    assert names == ["ids", "mask", "segment_ids"]
    wrong = {**TASK_LIBRARY_NAMES, "input_ids": "mask", "attention_mask": "ids"}
    with pytest.raises(PassError, match="do not match subgraph 0"):
        LiteRTMetadataPass(_meta(inputs=ins), FILES, wrong)(classifier_like_graph(SEQ))


def test_a_damaged_zip_tail_reads_as_missing_files() -> None:
    """A file cut inside its zip tail still runs (the flatbuffer is whole); inspect lists
    the associated files as missing instead of failing."""
    before, data, _ = _attach(_meta())
    tail = lm.associated_files_bytes(data)
    cut = data[: len(data) - tail + 40]  # into the first local file header
    report = analyze_model(fb.read_model(cut), len(cut), data=cut)
    assert report["litert_metadata"]["missing_files"] == ["spiece.model", "labels.txt"]
    assert np.array_equal(_run(cut), _run(before))


def test_associated_files_are_reproducible(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two converts of one checkpoint give one sha256: the appended zip must not stamp
    the wall clock (it did: 4 bytes differed between runs, issue 25's hash check)."""
    import time

    from albert_edge.tflite.litert_metadata import append_associated_files

    files = {"spiece.model": b"sp", "labels.txt": b"negative\npositive\n"}
    first = append_associated_files(b"\x00" * 16, files)
    later = time.localtime(time.time() + 86_400 * 400)
    monkeypatch.setattr(time, "localtime", lambda *_: later)
    assert append_associated_files(b"\x00" * 16, files) == first
