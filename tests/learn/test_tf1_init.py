"""train --init from an original TF1 checkpoint (written by TensorFlow itself)."""

from __future__ import annotations

import json

import pytest

from tests.learn.conftest import cli


@pytest.mark.slow  # TensorFlow writes the checkpoint: its import alone takes tens of seconds
def test_finetune_from_tf1_checkpoint(make_checkpoint, rows200, spiece_path, tmp_path):
    from albert_edge.checkpoint import load_checkpoint
    from tests.tf1_utils import write_tf1_checkpoint

    src = load_checkpoint(make_checkpoint()).model
    written = write_tf1_checkpoint(
        tmp_path / "tf1", src, "sequence-classification", spiece=spiece_path
    )
    out = tmp_path / "ft"
    assert (
        cli(
            "--init",
            written.root,
            "--train",
            rows200,
            "--spiece",
            spiece_path,
            "-o",
            out,
            "--epochs",
            "1",
            "--batch-size",
            "32",
        )
        == 0
    )
    rec = json.loads((out / "training.json").read_text())
    assert rec["init"]["kind"] == "tf1"
    ckpt = load_checkpoint(out)
    assert ckpt.source == "hf" and int(ckpt.config.num_hidden_layers) == 3
