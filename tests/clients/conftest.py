"""Artifacts of the embedded SST-2 model as ``albert-edge convert`` writes them, shared by the
client tests (Python and Node). Built once per session; never modify what they return."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from albert_edge.data import read_sst2
from albert_edge.reference import SAMPLE_DATA

# Sentences the clients are compared on: SST-2 dev rows from the packaged sample.
N_SENTENCES = 12


@pytest.fixture(scope="session")
def client_artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"fp32", "int8", "int4", "mixed": dir}: ``convert`` at default flags, verification
    included (int8: word table quantized, read by standard ops that every client has; int4:
    the default ``--int4-kernel int8`` form, 4-bit codes decoded at load by model-local
    ONNX functions, ``albert_edge.Int4Weight``/``Int4Rows``/``Int4Scales``; mixed: a
    precision plan with fp32, int8 and int4 weights in one graph)."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    root = tmp_path_factory.mktemp("clients")
    out = {
        "fp32": root / "sst2-fp32",
        "int8": root / "sst2-int8",
        "int4": root / "sst2-int4",
    }
    convert(None, out["fp32"], ConvertOptions(precision="fp32"))
    convert(None, out["int8"], ConvertOptions(precision="int8-dynamic"))
    convert(None, out["int4"], ConvertOptions(precision="int4"))
    # a precision plan holding all three widths: fp32 attention QKV and classifier, int8
    # FFN-in and position table, int4 elsewhere (the word table's 4-bit gathered rows too)
    from albert_edge.mixed import convert_with_plan, prepare, written_plan

    prep = prepare(None, ConvertOptions())
    by_role = {u.role.split(" (")[0]: u.tensor for u in prep.units}
    chosen = {
        by_role["attention Q,K,V"]: "fp32",
        by_role["head"]: "fp32",
        by_role["FFN in"]: "int8",
        by_role["position table"]: "int8",
    }
    plan = written_plan(prep.units, prep.identity, ConvertOptions(), chosen)
    out["mixed"] = root / "sst2-mixed"
    convert_with_plan(prep, out["mixed"], ConvertOptions(), plan, "client plan")
    return out


@pytest.fixture(scope="session")
def sentences() -> list[tuple[int, str]]:
    rows = read_sst2(SAMPLE_DATA)
    # spread over the sample, both labels, short and long
    step = max(1, len(rows) // N_SENTENCES)
    return rows[::step][:N_SENTENCES]


@pytest.fixture(scope="session")
def torch_logits(sentences: list[tuple[int, str]]) -> list[list[float]]:
    """PyTorch logits of the embedded checkpoint, one sentence at a time (no padding)."""
    import torch

    from albert_edge.checkpoint import load_checkpoint

    ckpt = load_checkpoint(None)
    tok = ckpt.tokenizer()
    out = []
    with torch.no_grad():
        for _, text in sentences:
            enc = tok.encode(text, padding="none")
            feeds = {k: torch.tensor(v) for k, v in vars(enc).items()}
            out.append(ckpt.model(**feeds).logits[0].tolist())
    return out


@pytest.fixture(scope="session")
def tflite_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``albert-edge convert --to tflite`` of the embedded model (fp32, the default bucket),
    as written: LiteRT metadata with spiece.model and labels.txt in its zip tail."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = tmp_path_factory.mktemp("clients-tflite") / "sst2-tflite-fp32"
    convert(None, out, ConvertOptions(target="tflite", precision="fp32", verify=False))
    return out


@pytest.fixture(scope="session")
def tflite_int8_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``convert --to tflite --precision int8-dynamic`` of the embedded model, as written."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = tmp_path_factory.mktemp("clients-tflite") / "sst2-tflite-int8"
    convert(None, out, ConvertOptions(target="tflite", precision="int8-dynamic", verify=False))
    return out


# The embedded model pruned as issue 54's contract says (transformers' own _prune_heads and
# an FFN slice, tests/prune_utils.py): 2 of its 4 heads and half its 512 FFN neurons gone
# from the one shared group, so every one of its 4 layers runs 2-head attention.
PRUNED_HEADS = {0: [1, 3]}
PRUNED_FFN = 256


@pytest.fixture(scope="session")
def pruned_client(
    tmp_path_factory: pytest.TempPathFactory, sentences: list[tuple[int, str]]
) -> dict[str, Any]:
    """{"ckpt": the pruned checkpoint, "int8": ``convert`` int8-dynamic of it (verified),
    "logits": its PyTorch logits on :func:`sentences`' rows, one sentence at a time}."""
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.layout import DEFAULT_MODEL
    from albert_edge.options import ConvertOptions
    from tests.prune_utils import prune_checkpoint

    root = tmp_path_factory.mktemp("clients-pruned")
    ckpt_dir = prune_checkpoint(DEFAULT_MODEL, root / "ckpt", PRUNED_HEADS, PRUNED_FFN)
    out = root / "sst2-pruned-int8"
    convert(ckpt_dir, out, ConvertOptions(precision="int8-dynamic"))
    ckpt = load_checkpoint(ckpt_dir)
    tok = ckpt.tokenizer()
    logits = []
    with torch.no_grad():
        for _, text in sentences:
            enc = tok.encode(text, padding="none")
            feeds = {k: torch.tensor(v) for k, v in vars(enc).items()}
            logits.append(ckpt.model(**feeds).logits[0].tolist())
    return {"ckpt": ckpt_dir, "int8": out, "logits": logits}
