"""``albert-edge early-exit --max-drop P``: the threshold chosen on held-out rows, recorded.

The command chooses on one half of the rows it holds out of the fit and reports on the
other half; the artifact's recorded policy is what the runner uses by default. Refusals
(wrong task data, wrong head, too few rows) come in one line before any model loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from albert_edge.cli import main

os.environ.setdefault("USE_TF", "0")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", "early-exit", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "USE_TF": "0"},
    )


def _head(src: Path, rows: int, out: Path) -> Path:
    out.write_text("\n".join(src.read_text().splitlines()[: rows + 1]) + "\n")
    return out


@pytest.mark.slow
def test_max_drop_chooses_on_held_out_rows_and_records_it(trained_checkpoint, sst2_train, tmp_path):
    data = _head(sst2_train, 480, tmp_path / "train.tsv")
    out = tmp_path / "ee"
    proc = _cli(
        str(trained_checkpoint), "--data", str(data), "-o", str(out),
        "--fit-rows", "240", "--held-out-rows", "240", "--max-drop", "1", "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    index = json.loads((out / "early_exit.json").read_text())
    choice = index["policy_choice"]
    assert index["policy"] == choice["policy"]
    assert choice["split"]["fit_rows"] == 240 and index["heads"]["train_rows"] == 240
    assert choice["split"]["data"] == "train.tsv"  # a name, never this machine's path
    assert choice["choose"]["rows"] == 120 and choice["report"]["rows"] == 120
    # the pick: the lowest mean depth among thresholds within 1 point on the choose rows
    evidence = choice["choose"]["evidence"]
    admitted = [e for e in evidence if -e["delta_vs_checkpoint"]["points"] <= 1 + 1e-9]
    assert all(e["why_not"] is None for e in admitted)
    assert all(e["why_not"] for e in evidence if e not in admitted)
    if admitted:
        best = min(admitted, key=lambda e: (e["mean_depth"], -e["accuracy"], e["policy"]))
        assert choice["policy"] == best["policy"]
    else:
        assert choice["policy"] == "off" and "full depth" in choice["note"]
    rep = choice["report"]
    d = rep["delta_vs_full_depth"]
    assert d["low"] <= d["points"] <= d["high"]
    assert rep["accuracy_drop_points"] == pytest.approx(-d["points"])
    assert 1.0 <= rep["mean_layers"] <= 4.0 and sum(rep["exit_share"]) == pytest.approx(1.0)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["early_exit"]["policy_choice"] == choice
    assert f"policy {choice['policy']}" in proc.stdout and "paired" in proc.stdout

    # the runner uses the recorded policy by default: same decisions as simulating it
    from albert_edge.early_exit import EarlyExitRunner, parse_policy, simulate

    runner = EarlyExitRunner(out)
    feeds = {
        "input_ids": np.asarray([[2, 48, 10, 3], [2, 200, 31, 3]]),
        "attention_mask": np.ones((2, 4), dtype=np.int64),
        "token_type_ids": np.zeros((2, 4), dtype=np.int64),
    }
    depth, _ = simulate(runner.all_exits(feeds), parse_policy(choice["policy"]))
    assert runner.run(feeds).depth.tolist() == depth.tolist()


def test_too_few_rows_for_max_drop_is_one_line_before_loading(
    make_checkpoint, sst2_train, tmp_path
):
    data = _head(sst2_train, 100, tmp_path / "small.tsv")
    out = tmp_path / "ee"
    code = main(
        ["early-exit", str(make_checkpoint("tiny")), "--data", str(data), "-o", str(out),
         "--max-drop", "0.5", "-q"]
    )  # fmt: skip
    assert code != 0 and not out.exists()


@pytest.mark.parametrize("bad", ["-1", "nan", "x"])
def test_max_drop_must_be_points(bad, make_checkpoint, sst2_train, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["early-exit", str(make_checkpoint("tiny")), "--data", str(sst2_train),
              "-o", str(tmp_path / "ee"), "--max-drop", bad])  # fmt: skip
    assert exc.value.code != 0
    assert "accuracy drop in points" in capsys.readouterr().err


def _one_line_refusal(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()  # what building the fixture model printed is not the command's
    code = main(["early-exit", *args, "-q"])
    err = [x for x in capsys.readouterr().err.strip().splitlines() if x]
    assert code != 0 and len(err) == 1, err
    return err[0]


def test_a_squad_file_is_refused_in_one_line(make_checkpoint, tmp_path, capsys):
    squad = tmp_path / "dev.json"
    squad.write_text(
        json.dumps(
            {
                "version": "1.1",
                "data": [
                    {
                        "title": "t",
                        "paragraphs": [
                            {
                                "context": "Paris is in France.",
                                "qas": [
                                    {
                                        "id": "1",
                                        "question": "Where is Paris?",
                                        "answers": [{"text": "France", "answer_start": 12}],
                                    }
                                ],
                            }
                        ],
                    }
                ],
            }
        )
    )
    out = tmp_path / "ee"
    line = _one_line_refusal(
        [str(make_checkpoint("tiny")), "--data", str(squad), "-o", str(out)], capsys
    )
    assert str(squad) in line and not out.exists()


@pytest.mark.parametrize("head", ["token-classification", "question-answering"])
def test_a_token_or_span_head_is_refused_in_one_line(
    head, make_checkpoint, sst2_train, tmp_path, capsys
):
    ckpt = make_checkpoint("tiny", head=head)
    out = tmp_path / "ee"
    line = _one_line_refusal([str(ckpt), "--data", str(sst2_train), "-o", str(out)], capsys)
    assert "sequence-classification" in line and head in line and "convert" in line
    assert not out.exists()


def test_pair_rows_feed_both_sentences_to_the_exit_heads(make_checkpoint, tmp_path):
    """A pair file (RTE-style columns) is read by the task layer and each row's features
    are those of the sentence pair, not of its first sentence."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.early_exit.fit import fit_heads_on, fit_rows_of
    from albert_edge.early_exit.heads import pooled_features, pooled_features_of
    from albert_edge.tasks import encode

    rows = ["index\tsentence1\tsentence2\tlabel"]
    for i in range(24):
        label = i % 2
        rows.append(f"{i}\tthe cat number {i} sat on the mat\ta cat sat {i % 5}\t{label}")
    data = tmp_path / "pairs.tsv"
    data.write_text("\n".join(rows) + "\n")
    ckpt_dir = make_checkpoint("tiny")
    fit = fit_rows_of(data, 20, 0, ckpt_dir)
    assert fit.pair and len(fit.examples) == 20
    ckpt = load_checkpoint(ckpt_dir)
    pair = pooled_features_of(ckpt, encode(fit, ckpt.tokenizer(), 128))
    single = pooled_features(ckpt, [ex.text for ex in fit.examples])
    assert pair.shape == single.shape and not np.allclose(pair, single)
    heads = fit_heads_on(ckpt, fit, 0)
    assert heads.record["train_rows"] == 20 and heads.num_exits == int(
        ckpt.config.num_hidden_layers
    )
