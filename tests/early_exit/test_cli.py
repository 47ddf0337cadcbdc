"""``albert-edge early-exit``: a thin command over the API, refusing bad input in one line."""

from __future__ import annotations

import json

import numpy as np

from albert_edge.cli import main
from albert_edge.early_exit import EarlyExitRunner, Patience


def test_cli_builds_a_runnable_artifact(make_checkpoint, sst2_train, tmp_path, capsys):
    data = tmp_path / "train.tsv"
    data.write_text("\n".join(sst2_train.read_text().splitlines()[:41]) + "\n")
    out = tmp_path / "ee"
    code = main(
        ["early-exit", str(make_checkpoint("tiny")), "--data", str(data), "-o", str(out),
         "--fit-rows", "40", "-q"]
    )  # fmt: skip
    assert code == 0
    assert "3 exits" in capsys.readouterr().out
    index = json.loads((out / "early_exit.json").read_text())
    assert index["heads"]["train_rows"] == 40
    feeds = {
        "input_ids": np.asarray([[2, 48, 10, 3]]),
        "attention_mask": np.ones((1, 4), dtype=np.int64),
        "token_type_ids": np.zeros((1, 4), dtype=np.int64),
    }
    assert 2 <= EarlyExitRunner(out).run(feeds, Patience(1)).depth[0] <= 3  # never at 1


def test_cli_refuses_bad_data_before_loading_anything(make_checkpoint, tmp_path, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_text("no header here\n")
    out = tmp_path / "ee"
    code = main(["early-exit", str(make_checkpoint("tiny")), "--data", str(bad), "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and str(bad) in err[0], err
    assert not out.exists()
