"""Exit heads trained with the model (``albert-edge train --exit-loss pabee``) are where the
depth search starts, and ``convert --depth`` ships them: a checkpoint's
``exit_classifiers.safetensors`` of the right shape is read, one of the wrong shape is
refused in one line naming the file (never silently replaced by the model's own head)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from albert_edge.checkpoint import load_checkpoint
from albert_edge.depth import DepthError, SplitSettings, search_depths, write_truncated
from albert_edge.depth.features import FitSettings, trained_exit_heads
from albert_edge.heads import EXIT_HEADS_FILE
from albert_edge.sealed import SEAL_NAME, TRAINED, EvidenceError, made_from, seal

SMALL = SplitSettings(fit_rows=48, held_out_rows=32, max_length=32, resamples=100)


def _with_exits(src: Path, dst: Path, shape: tuple[int, int] | None = None) -> Path:
    shutil.copytree(src, dst)
    ckpt = load_checkpoint(dst)
    layers = int(ckpt.config.num_hidden_layers)
    rows, cols = shape or tuple(ckpt.model.classifier.weight.shape)
    gen = torch.Generator().manual_seed(3)
    tensors = {}
    for k in range(1, layers):
        tensors[f"depth{k}.classifier.weight"] = torch.randn(rows, cols, generator=gen)
        tensors[f"depth{k}.classifier.bias"] = torch.randn(rows, generator=gen)
    save_file(tensors, str(dst / EXIT_HEADS_FILE))
    return _seal_as_training_output(dst)


def _seal_as_training_output(dst: Path) -> Path:
    """Seal ``dst`` as ``albert-edge train`` seals its output (what the reader demands)."""
    (dst / SEAL_NAME).unlink(missing_ok=True)
    (dst / "training.json").write_text('{"task": "made by the test"}\n')
    seal(dst, TRAINED, made_from(with_checkpoint=False))
    return dst


def test_search_starts_from_trained_exit_heads_and_truncation_ships_them(
    make_checkpoint, small_tsv: Path, tmp_path: Path
) -> None:
    ckpt = load_checkpoint(_with_exits(make_checkpoint("tiny"), tmp_path / "ckpt"))
    trained = trained_exit_heads(ckpt)
    assert trained is not None and sorted(trained) == list(
        range(1, int(ckpt.config.num_hidden_layers) + 1)
    )
    search = search_depths(ckpt, small_tsv, split=SMALL, fit=FitSettings(epochs=0))
    assert search.settings["fit"]["init"].startswith("trained exit heads")
    for k, head in search.heads.items():
        for name, t in head.items():
            assert torch.equal(t, trained[k][name]), (k, name)
    out = write_truncated(ckpt, 1, tmp_path / "d1", search=search, how="test")
    model = load_checkpoint(out).model
    assert torch.equal(model.classifier.weight, trained[1]["classifier.weight"])
    assert torch.equal(model.albert.pooler.weight, ckpt.model.albert.pooler.weight)
    fitted = search_depths(ckpt, small_tsv, split=SMALL, fit=FitSettings(epochs=1))
    assert not torch.equal(fitted.heads[1]["classifier.weight"], trained[1]["classifier.weight"])


def test_a_checkpoint_without_exit_heads_starts_from_its_own_head(
    make_checkpoint, small_tsv: Path
) -> None:
    ckpt = load_checkpoint(make_checkpoint("tiny"))
    assert trained_exit_heads(ckpt) is None
    search = search_depths(ckpt, small_tsv, split=SMALL, fit=FitSettings(epochs=0))
    assert search.settings["fit"]["init"] == "the model's own pooler + classifier"
    own = ckpt.model.classifier.weight
    assert all(torch.equal(h["classifier.weight"], own) for h in search.heads.values())


def test_exit_heads_of_another_shape_are_refused(make_checkpoint, tmp_path: Path) -> None:
    ckpt = load_checkpoint(_with_exits(make_checkpoint("tiny"), tmp_path / "c", shape=(3, 5)))
    with pytest.raises(DepthError, match=EXIT_HEADS_FILE) as exc:
        trained_exit_heads(ckpt)
    assert "\n" not in str(exc.value)
    (tmp_path / "c" / EXIT_HEADS_FILE).write_bytes(b"not safetensors")
    _seal_as_training_output(tmp_path / "c")
    with pytest.raises(DepthError, match="unreadable exit heads"):
        trained_exit_heads(load_checkpoint(tmp_path / "c"))


def test_exit_heads_not_sealed_with_the_model_are_refused(make_checkpoint, tmp_path: Path) -> None:
    """Exit heads copied beside a checkpoint, or changed after training, are refused in one
    line naming the file: never started from."""
    ckpt = load_checkpoint(_with_exits(make_checkpoint("tiny"), tmp_path / "c"))
    assert trained_exit_heads(ckpt) is not None
    exits = tmp_path / "c" / EXIT_HEADS_FILE
    data = bytearray(exits.read_bytes())
    data[-1] ^= 1
    exits.write_bytes(bytes(data))
    with pytest.raises(EvidenceError, match=f"{EXIT_HEADS_FILE}: sha256") as exc:
        trained_exit_heads(ckpt)
    assert "\n" not in str(exc.value)
    (tmp_path / "c" / SEAL_NAME).unlink()
    with pytest.raises(DepthError, match=f"{EXIT_HEADS_FILE}: no {SEAL_NAME}"):
        trained_exit_heads(ckpt)
