"""train --init: outputs convert/depth take, identities recorded, exits added or continued,
distilled shallow students."""

from __future__ import annotations

import json
from pathlib import Path

from tests.learn.conftest import cli


def _record(out: Path) -> dict:
    return json.loads((out / "training.json").read_text())


def test_finetune_adds_exits_and_records_identities(make_checkpoint, rows200, dev60, tmp_path):
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.depth.features import trained_exit_heads
    from albert_edge.manifest import sha256_file
    from albert_edge.train import is_training_output

    init = make_checkpoint()
    out = tmp_path / "ft"
    assert (
        cli(
            "--init",
            init,
            "--train",
            rows200,
            "--dev",
            dev60,
            "-o",
            out,
            "--epochs",
            "2",
            "--batch-size",
            "16",
            "--exit-loss",
            "pabee",
            "--lr",
            "1e-3",
        )
        == 0
    )
    rec = _record(out)
    assert is_training_output(out)
    assert rec["init"]["weights_sha256"] == sha256_file(init / "model.safetensors")
    assert rec["init"]["files"]["spiece.model"] == sha256_file(init / "spiece.model")
    assert rec["data"]["train"]["sha256"] == sha256_file(rows200)
    held = rec["data"]["held_out"]
    assert held["rows"] == 32 and held["trained_rows"] == 168
    # 20 rows asked (0.1 of 200), raised to the minimum: the record says what was held out
    assert (held["fraction"], held["held_fraction"], held["raised_to_minimum"]) == (0.1, 0.16, True)
    assert rec["selected"]["epoch"] in (1, 2)
    assert rec["student"]["exits"] == "new"
    ckpt = load_checkpoint(out)
    assert ckpt.config.to_dict()["hidden_size"] == 32
    heads = trained_exit_heads(ckpt)
    assert heads is not None and sorted(heads) == [1, 2, 3]
    # the weights moved (a fine-tune, not a copy)
    before = load_checkpoint(init).model.state_dict()
    after = ckpt.model.state_dict()
    assert any(not bool((before[k] == after[k]).all()) for k in before)

    from albert_edge.depth import FitSettings, SplitSettings, search_depths

    search = search_depths(
        out, rows200, split=SplitSettings(100, 50, max_length=32), fit=FitSettings(epochs=0)
    )
    assert search.representable == [1, 2, 3] and "trained exit heads" in str(search.settings)

    again = tmp_path / "ft2"
    assert (
        cli(
            "--init",
            out,
            "--train",
            rows200,
            "-o",
            again,
            "--epochs",
            "1",
            "--batch-size",
            "32",
            "--exit-loss",
            "pabee",
        )
        == 0
    )
    assert _record(again)["student"]["exits"] == "init"


def test_distilled_shallow_student_converts(make_checkpoint, rows200, tmp_path):
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    init = make_checkpoint("tiny-groups")  # 4 layers in 2 groups
    out = tmp_path / "student"
    assert (
        cli(
            "--init",
            init,
            "--train",
            rows200,
            "-o",
            out,
            "--epochs",
            "1",
            "--batch-size",
            "32",
            "--depth",
            "2",
            "--distil",
            "--distil-hidden",
            "--alpha",
            "0.3",
            "--temperature",
            "3",
        )
        == 0
    )
    rec = _record(out)
    assert rec["student"]["layers"] == 2 and rec["student"]["num_hidden_groups"] == 1
    assert rec["teacher"]["weights_sha256"] == rec["init"]["weights_sha256"]
    assert rec["teacher"]["alpha"] == 0.3 and rec["teacher"]["hidden"] == 1.0
    ckpt = load_checkpoint(out)
    assert int(ckpt.config.num_hidden_layers) == 2
    manifest = convert(out, tmp_path / "art", ConvertOptions(precision="fp32"))
    assert manifest["verification"]


def test_kd_term_matches_definition():
    import torch

    from albert_edge.learn.distil import DistilSettings, kd_term, layer_map

    torch.manual_seed(0)
    s, t, y = torch.randn(5, 3), torch.randn(5, 3), torch.tensor([0, 1, 2, 0, 1])
    cfg = DistilSettings(alpha=0.25, temperature=2.0)
    p_t = torch.softmax(t / 2, -1)
    kl = (p_t * (p_t.log() - torch.log_softmax(s / 2, -1))).sum(-1).mean()
    want = 0.25 * torch.nn.functional.cross_entropy(s, y) + 0.75 * 4 * kl
    assert torch.allclose(kd_term(s, t, y, cfg), want, atol=1e-6)
    assert layer_map(2, 4) == [2, 4] and layer_map(3, 12) == [4, 8, 12]


def test_cls_term_is_patient_kd_on_unit_vectors():
    """0 where the projected student [CLS] points the teacher's way (any scale), 2 where
    orthogonal, 4 where opposite; layer i of the student meets column i of the teacher's
    states, and the gradient reaches the projection and the student."""
    import torch

    from albert_edge.learn.distil import cls_term

    proj = torch.nn.Linear(2, 3, bias=False)
    with torch.no_grad():
        proj.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
    s1 = torch.tensor([[[9.0, 9.0], [1.0, 0.0]]])  # [B=1, T=2, H=2]
    s2 = torch.tensor([[[9.0, 9.0], [0.0, 2.0]]], requires_grad=True)
    states = (torch.zeros(1, 2, 2), s1, s2)  # embeddings first; [CLS] at position 0

    def value(t: torch.Tensor) -> float:
        return float(cls_term(states, t, proj).detach())

    assert value(torch.tensor([[[5.0, 5.0, 0.0]] * 2])) < 1e-6  # same direction, any scale
    assert abs(value(torch.tensor([[[0.0, 0.0, 1.0]] * 2])) - 2.0) < 1e-6
    assert abs(value(torch.tensor([[[-1.0, -1.0, 0.0]] * 2])) - 4.0) < 1e-5
    t = torch.tensor([[[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]])  # layer 1 aligned, layer 2 at 45°
    loss = cls_term(states, t, proj)
    assert abs(loss.item() - (2 - 2**0.5) / 2) < 1e-6  # (0 + |unit(1,1) - (1,0)|^2) / 2
    loss.backward()
    assert proj.weight.grad is not None and float(proj.weight.grad.abs().sum()) > 0
    assert s2.grad is not None and float(s2.grad[0, 0].abs().sum()) > 0
    assert float(s2.grad[0, 1].abs().sum()) == 0.0  # only [CLS] is compared


def test_three_labels_kept(make_checkpoint, rows200, tmp_path):
    """The init's head decides the labels (not SST-2's two)."""
    from albert_edge.checkpoint import load_checkpoint

    lines = rows200.read_text().splitlines()
    three = tmp_path / "three.tsv"
    body = [f"{i % 3}\t{line.split(chr(9), 1)[1]}" for i, line in enumerate(lines[1:])]
    three.write_text("\n".join([lines[0], *body]) + "\n")
    out = tmp_path / "o"
    assert (
        cli(
            "--init",
            make_checkpoint(num_labels=3),
            "--train",
            three,
            "--dev",
            three,
            "-o",
            out,
            "--epochs",
            "1",
            "--batch-size",
            "32",
        )
        == 0
    )
    assert int(load_checkpoint(out).config.num_labels) == 3


def test_fewer_groups_student(make_checkpoint, rows200, tmp_path):
    from albert_edge.checkpoint import load_checkpoint

    init = make_checkpoint("tiny-groups")  # 4 layers in 2 groups of 2 inner layers
    out = tmp_path / "g1"
    assert (
        cli(
            "--init",
            init,
            "--train",
            rows200,
            "-o",
            out,
            "--epochs",
            "1",
            "--batch-size",
            "32",
            "--groups",
            "1",
            "--distil",
        )
        == 0
    )
    c = load_checkpoint(out).config
    assert int(c.num_hidden_groups) == 1 and int(c.num_hidden_layers) == 4
