"""int8-dynamic on older TFLite runtimes: the file either computes what ai-edge-litert
computes there, or is refused at load; never wrong logits without an error.

Measured (albert_edge/tflite/passes/versions.py): a FULLY_CONNECTED with a float input and
per-channel int8 weights, left at its float version (v5) by ai-edge-quantizer, loads on
tflite-runtime 2.14.0 and in tflite-support 0.4.4's runtime and returns zeros there.
convert stamps that form v12 (LiteRT's own version for it), which those runtimes refuse;
``--per-tensor`` gives FCs they compute right.

The old runtimes run from their own Pythons when present: tflite-support's venv
(``.venv-tflite-support``, made by ``.ci/setup.sh``, or ``ALBERT_EDGE_TFLITE_SUPPORT_PYTHON``;
its Task Library ``BertNLClassifier`` returns the logits as scores) and a Python with
``tflite-runtime==2.14.0`` (``TFLITE_RUNTIME_214_PYTHON``, as in ``test_tflite.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SIDE_PYTHON = Path(
    os.environ.get("ALBERT_EDGE_TFLITE_SUPPORT_PYTHON", ROOT / ".venv-tflite-support/bin/python")
)
SEQ = 16
SENTENCES = ["a fine , funny film", "dull and lifeless", "the acting is superb"]


@pytest.fixture(scope="module")
def int8_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The embedded SST-2 model at int8-dynamic, one 16-token signature: the default
    (per-channel weights) and ``--per-tensor``."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    root = tmp_path_factory.mktemp("old-runtimes")
    out = {}
    for kind, per_channel in (("per-channel", None), ("per-tensor", False)):
        options = ConvertOptions(
            target="tflite",
            precision="int8-dynamic",
            seq_lens=(SEQ,),
            per_channel=per_channel,
            verify=False,
        )
        convert(None, root / kind, options)
        out[kind] = root / kind
    return out


def _task_library_ids(artifact: Path) -> list[list[int]]:
    """``[CLS] pieces [SEP]`` as BertNLClassifier builds them (SentencePiece alone)."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(artifact / "spiece.model"))
    cls, sep = sp.piece_to_id("[CLS]"), sp.piece_to_id("[SEP]")
    return [[cls, *sp.encode(s), sep] for s in SENTENCES]


def _litert_logits(model: Path, ids: list[list[int]]) -> np.ndarray:
    """ai-edge-litert's builtin kernels (no XNNPACK, as the old runtimes below run them)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    runner = Interpreter(
        model_path=str(model),
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    ).get_signature_runner(f"seq_{SEQ}")
    rows = []
    for row in ids:
        x, mask = np.zeros((1, SEQ), np.int32), np.zeros((1, SEQ), np.int32)
        x[0, : len(row)], mask[0, : len(row)] = row, 1
        rows.append(runner(input_ids=x, attention_mask=mask, token_type_ids=0 * x)["logits"][0])
    return np.asarray(rows)


def _run(python: Path | str, code: str, *args: str, stdin: str = "") -> Any:
    r = subprocess.run(
        [str(python), "-c", code, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": "", "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_per_channel_hybrid_fc_is_versioned(int8_files: dict[str, Path]) -> None:
    """Default int8-dynamic: every float × per-channel int8 FC is v12 and inspect and the
    manifest say 2.14 cannot run it (and how to get a file it can); ``--per-tensor``: no
    FC above v10, and they say it runs there. Both compute the same classes in LiteRT."""
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.inspect import inspect_tflite
    from albert_edge.tflite.op_versions import PER_TENSOR_HINT
    from albert_edge.tflite.passes.versions import per_channel_hybrid_fc

    said = {}
    for kind, out in int8_files.items():
        model = fb.read_model((out / "model.tflite").read_bytes())
        fcs = [
            (per_channel_hybrid_fc(model, sg, op), int(model.operatorCodes[op.opcodeIndex].version))
            for sg in model.subgraphs
            for op in sg.operators
            if fb.builtin_names()[fb.opcode_builtin(model.operatorCodes[op.opcodeIndex])]
            == "FULLY_CONNECTED"
        ]
        assert fcs
        if kind == "per-channel":
            assert all(v == 12 for per_channel, v in fcs if per_channel)
            assert sum(per_channel for per_channel, _ in fcs) >= 6  # every layer's matmuls
        else:
            assert not any(per_channel for per_channel, _ in fcs)
            assert max(v for _, v in fcs) <= 10
        report = inspect_tflite(out / "model.tflite")
        runtime = json.loads((out / "manifest.json").read_text())["runtime"]
        assert runtime["loads_on_tflite_runtime_2_14"] is report["loads_on_tflite_runtime_2_14"]
        assert runtime["offending_ops_for_2_14"] == report["tflite_runtime_2_14"]["offending_ops"]
        assert runtime["runs_right_on"] == report["tflite_runtime_2_14"]["runs_right_on"]
        said[kind] = runtime
    assert said["per-channel"]["loads_on_tflite_runtime_2_14"] is False
    assert said["per-channel"]["offending_ops_for_2_14"] == [
        f"FULLY_CONNECTED v12 (2.14 has v10{PER_TENSOR_HINT})"
    ]
    assert said["per-channel"]["runs_right_on"] == ["ai-edge-litert"]
    assert said["per-tensor"]["loads_on_tflite_runtime_2_14"] is True
    assert said["per-tensor"]["runs_right_on"] == [
        "ai-edge-litert",
        "tflite-runtime 2.14.0",
        "tflite-support 0.4.4",
    ]
    ids = _task_library_ids(int8_files["per-tensor"])
    per_channel = _litert_logits(int8_files["per-channel"] / "model.tflite", ids)
    per_tensor = _litert_logits(int8_files["per-tensor"] / "model.tflite", ids)
    assert (per_channel.argmax(1) == per_tensor.argmax(1)).all()
    np.testing.assert_allclose(per_channel, per_tensor, atol=0.1)


CLASSIFY = r"""
import json, sys
from tflite_support.task import text

try:
    clf = text.BertNLClassifier.create_from_file(sys.argv[1])
except (RuntimeError, ValueError) as exc:
    print(json.dumps({"refused": str(exc)}))
    raise SystemExit(0)
out = []
for line in sys.stdin.read().splitlines():
    cats = clf.classify(line).classifications[0].categories
    out.append({c.category_name: c.score for c in cats})
print(json.dumps({"scores": out}))
"""


@pytest.mark.skipif(
    not SIDE_PYTHON.is_file(),
    reason=f"{SIDE_PYTHON} missing: run .ci/setup.sh (tflite-support in its own venv)",
)
def test_tflite_support_runtime(int8_files: dict[str, Path]) -> None:
    """tflite-support 0.4.4's runtime: the ``--per-tensor`` file's logits are
    ai-edge-litert's on the same ids; the default file is refused at load (it used to load
    and return [-0.04, 0.04] where ai-edge-litert gives [-3.2, 2.6])."""
    got = _run(
        SIDE_PYTHON,
        CLASSIFY,
        str(int8_files["per-channel"] / "model.tflite"),
        stdin="\n".join(SENTENCES),
    )
    assert "FULLY_CONNECTED' version '12'" in got.get("refused", ""), got

    artifact = int8_files["per-tensor"]
    got = _run(SIDE_PYTHON, CLASSIFY, str(artifact / "model.tflite"), stdin="\n".join(SENTENCES))
    config = json.loads((artifact / "config.json").read_text())
    labels = [config["id2label"][str(i)] for i in range(len(config["id2label"]))]
    scores = np.asarray([[row[name] for name in labels] for row in got["scores"]])
    want = _litert_logits(artifact / "model.tflite", _task_library_ids(artifact))
    assert np.abs(want).max() > 1.0  # a trained classifier's logits, not a collapsed graph
    np.testing.assert_allclose(scores, want, atol=1e-3)


RUN_214 = r"""
import json, sys
import numpy as np
from tflite_runtime.interpreter import Interpreter

try:
    runner = Interpreter(model_path=sys.argv[1]).get_signature_runner(sys.argv[2])
except (RuntimeError, ValueError) as exc:
    print(json.dumps({"refused": str(exc)}))
    raise SystemExit(0)
out = []
for row in json.loads(sys.stdin.read()):
    n = int(sys.argv[2].split("_")[1])
    x, m = np.zeros((1, n), np.int32), np.zeros((1, n), np.int32)
    x[0, : len(row)], m[0, : len(row)] = row, 1
    out.append(runner(input_ids=x, attention_mask=m, token_type_ids=0 * x)["logits"][0].tolist())
print(json.dumps({"logits": out}))
"""


@pytest.mark.skipif(
    not os.environ.get("TFLITE_RUNTIME_214_PYTHON"),
    reason="TFLITE_RUNTIME_214_PYTHON not set (a Python with tflite-runtime==2.14.0, numpy<2)",
)
def test_tflite_runtime_2_14(int8_files: dict[str, Path]) -> None:
    """tflite-runtime 2.14.0: the same as tflite-support's runtime above."""
    py = os.environ["TFLITE_RUNTIME_214_PYTHON"]
    ids = _task_library_ids(int8_files["per-tensor"])
    for kind, out in int8_files.items():
        got = _run(py, RUN_214, str(out / "model.tflite"), f"seq_{SEQ}", stdin=json.dumps(ids))
        if kind == "per-channel":
            assert "FULLY_CONNECTED" in got.get("refused", ""), got
        else:
            want = _litert_logits(out / "model.tflite", ids)
            np.testing.assert_allclose(np.asarray(got["logits"]), want, atol=1e-3)


def test_question_answering_buckets_end_at_384() -> None:
    """A question-answering head's default buckets end at 384 where its positions allow
    (the Task Library's BertQuestionAnswerer feeds subgraph 0, the longest, 384 tokens);
    other heads and shorter models keep the buckets up to 128."""
    from types import SimpleNamespace

    from albert_edge.heads import HEADS
    from albert_edge.tflite.pipeline import default_seq_lens

    def ckpt(head: str, positions: int) -> Any:
        return SimpleNamespace(
            head=HEADS[head], config=SimpleNamespace(max_position_embeddings=positions)
        )

    assert default_seq_lens(ckpt("question-answering", 512)) == (16, 32, 64, 128, 384)
    assert default_seq_lens(ckpt("question-answering", 384)) == (16, 32, 64, 128, 384)
    assert default_seq_lens(ckpt("question-answering", 256)) == (16, 32, 64, 128)
    assert default_seq_lens(ckpt("question-answering", 512), gpu=True) == (384,)
    assert default_seq_lens(ckpt("sequence-classification", 512)) == (16, 32, 64, 128)
