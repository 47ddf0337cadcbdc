"""Issue 26, finite or fail: a NaN or Inf stops the command with a line naming where, no
comparison with NaN in it passes, and every JSON file albert-edge writes is strict JSON.

Defects of the issue, each failing on fb1525b (benchmarks/results/hostile_defects.md):

* a checkpoint with an ``inf`` in one embedding row converted, and ``verify`` printed
  "SQNR nan dB ... PASSED" (its ``--json`` held ``NaN``: not JSON);
* ``train --lr inf`` exited 0 with every tensor NaN.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.test_identity import one_line_refusal, run_cli, snapshot


def _strict_loads(text: str) -> Any:
    """json.loads that refuses NaN / Infinity, as JavaScript's JSON.parse does."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def inf_checkpoint(tmp_path_factory: pytest.TempPathFactory, make_checkpoint: Any) -> Path:
    """A tiny checkpoint with one ``inf`` in the word-embedding row of "movie": a token
    the random verification grid rarely meets, text often does."""
    from safetensors.torch import load_file, save_file

    from albert_edge.tokenizer import AlbertTokenizer

    out = tmp_path_factory.mktemp("inf") / "ckpt"
    shutil.copytree(make_checkpoint(), out)
    row = AlbertTokenizer(out / "spiece.model").encode("movie", padding="none").input_ids[0][1]
    state = load_file(str(out / "model.safetensors"))
    state["albert.embeddings.word_embeddings.weight"][row, 3] = math.inf
    save_file(state, str(out / "model.safetensors"))
    return out


def test_a_non_finite_weight_stops_convert_and_verify_naming_the_tensor(
    inf_checkpoint: Path, tmp_path: Path, make_checkpoint: Any
) -> None:
    """Was: convert exit 0; verify on text meeting that row: "logits SQNR nan dB ...
    PASSED", exit 0, and ``--json`` with NaN in it."""
    before = snapshot(inf_checkpoint)
    clean = make_checkpoint()
    out = tmp_path / "art"
    line = one_line_refusal(run_cli("convert", str(inf_checkpoint), "-o", str(out), "--quiet"))
    assert "albert.embeddings.word_embeddings.weight" in line and "non-finite" in line
    assert "conversion bug" not in line
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []
    # an artifact of the clean model, verified against the damaged one
    art = tmp_path / "clean"
    r = run_cli(
        "convert", str(clean), "-o", str(art), "--quiet", "--no-verify", "--optimize", "none"
    )
    assert r.returncode == 0, r.stderr[-1500:]
    r = run_cli("verify", str(art), "--reference", str(inf_checkpoint), "--json", "--quiet")
    assert r.returncode != 0 and "PASSED" not in r.stdout
    assert "word_embeddings" in r.stderr or "non-finite" in r.stderr + r.stdout
    assert snapshot(inf_checkpoint) == before


def test_verify_never_passes_a_nan_comparison() -> None:
    from albert_edge.grid import judge_outputs

    for precision in ("fp32", "int8-dynamic"):
        nan = {
            "logits": {
                "max_abs_err": math.nan,
                "mean_abs_err": math.nan,
                "sqnr_db": math.nan,
                "sqnr_db_min": math.nan,
                "worst_at": {},
            }
        }
        failures = judge_outputs(nan, precision)
        assert failures and "non-finite" in failures[0] and nan["logits"]["passed"] is False


def test_nan_logits_on_the_data_fail_verify_and_its_json_is_strict(
    tmp_path: Path, make_checkpoint: Any
) -> None:
    """An artifact whose word row of "movie" is NaN (sealed as if a converter wrote it):
    the grid may never meet the row, the data does; equal argmaxes of NaN logits must
    not count as agreement, and the report must stay strict JSON."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    from albert_edge.convert import convert
    from albert_edge.manifest import read_manifest, write_manifest
    from albert_edge.options import ConvertOptions
    from albert_edge.tokenizer import AlbertTokenizer

    ckpt = make_checkpoint()
    art = tmp_path / "art"
    convert(ckpt, art, ConvertOptions(verify=False, optimize="none"))
    model_path = art / read_manifest(art)["model_file"]
    row = AlbertTokenizer(art / "spiece.model").encode("movie", padding="none").input_ids[0][1]
    model = onnx.load(str(model_path))
    (table,) = [t for t in model.graph.initializer if "word_embeddings" in t.name]
    values = numpy_helper.to_array(table).copy()
    values[row] = np.nan
    table.CopyFrom(numpy_helper.from_array(values, table.name))
    onnx.save(model, str(model_path))
    write_manifest(art, read_manifest(art))  # re-sealed: the bytes are "what was written"
    data = tmp_path / "dev.tsv"
    data.write_text("sentence\tlabel\n" + "a movie\t1\nthe movie is bad\t0\n" * 4)
    r = run_cli(
        "verify", str(art), "--reference", str(ckpt), "--data", str(data), "--json", "--quiet"
    )
    assert r.returncode == 1, r.stderr[-1500:]
    report = _strict_loads(r.stdout)
    assert report["passed"] is False
    assert any("non-finite" in f for f in report["failures"]), report["failures"]
    assert report["non_finite"]  # which numbers became null, and why


def test_train_lr_inf_is_refused_before_any_work(
    tmp_path: Path, sst2_dev: Path, spiece_path: Path
) -> None:
    """Was: exit 0 after training, with every tensor of the written model NaN."""
    out = tmp_path / "out"
    r = run_cli(
        "train",
        "-o",
        str(out),
        "--lr",
        "inf",
        "--epochs",
        "1",
        "--train",
        str(sst2_dev),
        "--dev",
        str(sst2_dev),
        "--spiece",
        str(spiece_path),
        "--quiet",
        timeout=600,
    )
    line = one_line_refusal(r)
    assert "--lr" in line and "finite" in line
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_loss_going_non_finite_stops_training_naming_the_step() -> None:
    import torch

    from albert_edge.errors import AlbertEdgeError
    from albert_edge.learn.checks import check_finite_step

    model = torch.nn.Linear(2, 2)
    check_finite_step(torch.tensor(0.5), model, 1, 3)
    with pytest.raises(AlbertEdgeError, match="epoch 2, step 7"):
        check_finite_step(torch.tensor(math.nan), model, 2, 7)
    with torch.no_grad():
        model.weight[0, 0] = math.inf
    with pytest.raises(AlbertEdgeError, match="weight weight is not finite after step 9"):
        check_finite_step(None, model, 1, 9)


def test_strict_json_nulls_non_finite_numbers_and_says_why(tmp_path: Path) -> None:
    from albert_edge.manifest import dumps_strict, load_manifest, write_manifest

    text = dumps_strict({"a": math.nan, "b": [1.0, math.inf], "c": {"d": -math.inf}})
    assert _strict_loads(text) == {
        "a": None,
        "b": [1.0, None],
        "c": {"d": None},
        "non_finite": {"a": "nan", "b[1]": "inf", "c.d": "-inf"},
    }
    (tmp_path / "model.onnx").write_bytes(b"m")
    write_manifest(
        tmp_path,
        {"model_file": "model.onnx", "verification": {"logits": {"sqnr_db": math.inf}}},
    )
    raw = (tmp_path / "manifest.json").read_text()
    data = _strict_loads(raw)
    assert data["verification"]["logits"]["sqnr_db"] is None
    assert data["non_finite"] == {"verification.logits.sqnr_db": "inf"}
    load_manifest(tmp_path)  # sealed as written
