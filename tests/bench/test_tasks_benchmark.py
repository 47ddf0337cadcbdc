"""The task benchmark's own logic (benchmarks/tasks.py): a checkpoint is reused only when
its training.json records the same training; each artifact gets the convert flags it
needs; a row that was not built says why in the table instead of a figure."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from benchmarks import tasks as bt


def _checkpoint(tmp_path: Path, train: Path, *, epochs: int, rows: int) -> Path:
    ckpt = tmp_path / "ner-model"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"weights")
    record = {
        "data": {"train": {"sha256": hashlib.sha256(train.read_bytes()).hexdigest()}},
        "hyperparameters": {"epochs": epochs},
        "train_examples": rows,
    }
    (ckpt / "training.json").write_text(json.dumps(record))
    return ckpt


def test_a_checkpoint_is_reused_only_for_the_same_training(tmp_path: Path) -> None:
    train = tmp_path / "train.txt"
    train.write_text("EU B-ORG\nrejects O\n")
    spec = {"train": train, "flags": ["--max-train-rows", "6000", "--epochs", "1"]}
    ckpt = _checkpoint(tmp_path, train, epochs=1, rows=6000)
    assert bt.reusable(ckpt, spec) is None
    assert "--epochs 1, not 2" in str(bt.reusable(ckpt, {**spec, "flags": ["--epochs", "2"]}))
    fewer = {**spec, "flags": ["--max-train-rows", "3000", "--epochs", "1"]}
    assert "--max-train-rows 6000, not 3000" in str(bt.reusable(ckpt, fewer))
    other = tmp_path / "other.txt"
    other.write_text("EU B-LOC\n")
    assert "another file" in str(bt.reusable(ckpt, {**spec, "train": other}))
    assert "no training.json" in str(bt.reusable(tmp_path / "missing", spec))


def test_each_artifact_gets_the_flags_it_needs(tmp_path: Path) -> None:
    spec = {"calibration": tmp_path / "cal.txt", "choose": tmp_path / "choose.txt"}
    ck, out = tmp_path / "ck", tmp_path / "out"

    def args(art: str, max_len: int = 128) -> list[str]:
        return bt.convert_args(art, ck, out, spec, max_len)

    plain = args("onnx-int4")
    assert plain[:6] == ["convert", str(ck), "--to", "onnx", "--precision", "int4"]
    assert "--calibration" not in plain and "--seq-lens" not in plain
    assert args("tflite-fp32", 256)[args("tflite-fp32", 256).index("--seq-lens") + 1] == (
        "16,32,64,128,256"
    )
    assert "--seq-lens" not in args("tflite-fp32", 128)
    for art in ("onnx-int8-static", "tflite-int8-full"):
        a = args(art)
        assert a[a.index("--calibration") + 1] == str(spec["calibration"])
    auto = args("onnx-auto")
    assert auto[auto.index("--precision") + 1] == "auto"
    assert auto[auto.index("--max-drop") + 1] == "1"
    assert auto[auto.index("--data") + 1] == str(spec["choose"])


def _results(scores: dict[str, Any]) -> dict[str, Any]:
    return {
        "tasks": {
            "pair": {
                "command": "albert-edge train --train train.tsv",
                "checkpoint_reused_from": None,
                "task": {
                    "kind": "classification",
                    "architecture": "AlbertForSequenceClassification",
                    "labels": ["0", "1"],
                    "max_len": 128,
                },
                "train_wall_s": 801.0,
                "train_examples": 3300,
                "held_out": {"primary": "accuracy", "accuracy": 0.6785},
                "parameters": 2176386,
                "hyperparameters": {"batch_size": 32, "lr": 0.001},
                "checkpoint_bytes": 8708912,
                "scores": scores,
                "machine": {
                    "cpu": "AMD EPYC",
                    "cpu_kernel_family": "avx2",
                    "cpus": 2,
                    "load_average": [3.0, 2.0, 1.0],
                },
            }
        }
    }


def test_the_table_says_why_a_row_was_not_built_and_shows_timings_with_load() -> None:
    lat = {"p50": 1.25, "min": 1.0, "runs": 9, "load_before": [4.5, 3.0, 2.0]}
    scores = {
        "data": "dev.tsv: 408 sentence pairs",
        "majority_class": {"label": "1", "accuracy": 0.6838},
        "pytorch": {"primary": "accuracy", "accuracy": 0.6838, "f1": 0.8122},
        "onnx-int4": {
            "accuracy": 0.6838,
            "vs_pytorch": {"delta": 0.0, "low": 0.0, "high": 0.0},
            "agreement": 1.0,
            "outputs_sqnr_db": 31.5,
            "bytes": 1122336,
            "command": "albert-edge convert pair-model --to onnx --precision int4",
            "latency": {"w1": lat, "w2": {**lat, "p50": 0.5}},
        },
        "onnx-auto": {
            "accuracy": 0.6838,
            "vs_pytorch": {"delta": 0.0, "low": 0.0, "high": 0.0},
            "bytes": 1131404,
            "command": "albert-edge convert pair-model --precision auto",
            "plan": {
                "weights": {"int4": 8, "fp32": 1},
                "rows": 367,
                "data": "pair-untrained.tsv",
                "metric": "accuracy",
                "loss_points": {"delta": -0.25, "delta_low": -0.8, "delta_high": 0.3},
                "rule": "point loss <= 1.0",
            },
            "verify_cli": {
                "command": "albert-edge verify pair-onnx-auto --data dev.tsv --json",
                "exit": 0,
                "metric": "accuracy",
                "metric_artifact": 0.6814,
                "metric_reference": 0.6838,
                "delta_points": -0.24,
                "interval_points": {"low": -0.5, "high": 0.0},
            },
        },
        "onnx-int8-static": {
            "not_built": "calibration on CoNLL files not supported by this commit",
            "command": "albert-edge convert pair-model --precision int8-static",
        },
    }
    md = bt.markdown(_results(scores))
    rows = {ln.split(" | ")[0]: ln for ln in md.splitlines() if ln.startswith("| ")}
    assert "not built: calibration on CoNLL files not supported" in rows["| ONNX int8-static"]
    int4 = rows["| ONNX int4"]
    assert "68.38 | +0.00 [+0.00, +0.00] | 100.00 | 31.5 | 1,122,336" in int4
    assert "1.250 / 1.000 (load 4.5)" in int4 and "0.500 / 1.000 (load 4.5)" in int4
    assert "not run" in rows["| TFLite int8-full"]
    assert "Δ 0 says nothing about quantization error" in md  # at the majority class
    assert "- auto's plan: 1 at fp32, 8 at int4; chosen on 367 rows of `pair-untrained.tsv`" in md
    assert "-0.25 [-0.80, +0.30] accuracy points" in md
    verify = next(ln for ln in md.splitlines() if "albert-edge verify pair-onnx-auto" in ln)
    assert "accuracy 68.14 vs PyTorch 68.38, Δ -0.24 [-0.50, +0.00]" in verify
    assert verify.endswith("the table has 68.38")  # verify's figure differs from the table's
    assert "These timings were taken" in md and "under load" in md


def test_the_auto_data_is_the_training_rows_never_trained_on(tmp_path: Path) -> None:
    from albert_edge.learn.split import HeldOut
    from albert_edge.tasks import read_task_file

    n, cap = 400, 200  # 40 held out, 360 left, the first 200 of them trained on
    train = tmp_path / "train.txt"
    train.write_text(
        "-DOCSTART- -X- -X- O\n\n"
        + "\n\n".join(f"Word{i} NNP I-NP I-PER\nsaid VBD I-VP O" for i in range(n))
        + "\n"
    )
    spec = {"train": train, "flags": ["--max-train-rows", str(cap), "--epochs", "1"]}
    training = {
        "data": {"train": {"rows": n}, "held_out": {"fraction": 0.1, "seed": 27}},
        "train_examples": cap,
    }
    rows = bt.untrained_rows(spec, training)
    fit, held = HeldOut(0.1, 27).split(n, str(train))
    assert set(rows) == set(range(n)) - set(fit[:cap]) and set(held) <= set(rows)
    out = bt.write_choose_file(spec, training, tmp_path / "choose.txt")
    got = read_task_file(out)
    assert [e.words[0] for e in got.examples] == [f"Word{i}" for i in rows]
    assert {tuple(e.tags) for e in got.examples} == {("B-PER", "O")}  # IOB1 read as IOB2
