"""benchmarks.deep_teacher (masked-LM pretraining, then ``train --init``) and
``benchmarks.learn --parts deep-teacher --deep-teacher-from DIR`` on a tiny model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

TINY = ["--layers", "3", "--groups", "1", "--hidden", "32", "--batch", "16", "--seed", "3"]


@pytest.fixture(scope="module")
def teacher(
    tmp_path_factory: pytest.TempPathFactory, rows200: Path, dev60: Path, spiece_path: Path
) -> Iterator[Path]:
    from benchmarks import deep_teacher

    with pytest.MonkeyPatch.context() as mp:  # the repository's copy, not ../shared's
        mp.setattr(deep_teacher, "SPIECE", spiece_path)
        yield _pretrain_and_finetune(deep_teacher, tmp_path_factory, rows200, dev60)


def _pretrain_and_finetune(
    deep_teacher: ModuleType, tmp_path_factory: pytest.TempPathFactory, rows200: Path, dev60: Path
) -> Path:
    root = tmp_path_factory.mktemp("deep-teacher")
    pre = root / "pre"
    argv = ["pretrain", "-o", str(pre), "--train", str(rows200), *TINY, "--steps", "3"]
    assert deep_teacher.main([*argv, "--log-every", "1", "--save-every", "2"]) == 0
    rec = json.loads((pre / deep_teacher.RECORD).read_text())
    assert rec["steps_done"] == 3 and len(rec["loss_curve"]) == 3
    assert rec["corpus"]["labels_read"] is False
    out = root / "t"
    argv = ["finetune", "--pretrained", str(pre), "-o", str(out), "--train", str(rows200)]
    assert deep_teacher.main([*argv, "--dev", str(dev60), "--batch", "16"]) == 0
    return out


def test_corpus_is_outside_the_held_out_split(rows200: Path) -> None:
    from albert_edge.data import read_sst2
    from albert_edge.learn import HeldOut
    from benchmarks.deep_teacher import corpus

    rows = read_sst2(rows200, labels=range(2))
    fit, held = HeldOut().split(len(rows), str(rows200), [t for _, t in rows])
    texts, info = corpus(rows200)
    assert not set(texts) & {rows[i][1] for i in held}
    assert set(texts) <= {rows[i][1] for i in fit} and len(texts) == len(set(texts))
    assert info["held_out"]["rows"] == len(held) == 32


def test_mask_predicts_only_word_pieces_and_every_row_something() -> None:
    import torch

    from benchmarks.deep_teacher import _mask

    ids = torch.tensor([[2, 10, 11, 3, 0, 0], [2, 12, 3, 0, 0, 0], [2, 13, 14, 15, 16, 3]] * 20)
    special = (ids == 2) | (ids == 3) | (ids == 0)
    inputs, labels = _mask(ids, special, 30000, 4, torch.Generator().manual_seed(0))
    picked = labels != -100
    assert not (picked & special).any()
    assert picked.any(dim=1).all()
    assert torch.equal(labels[picked], ids[picked])
    assert torch.equal(inputs[~picked], ids[~picked])
    assert (inputs[picked] == 4).float().mean() > 0.5  # mostly [MASK]


def test_deep_teacher_from_takes_the_pretrained_teacher(
    teacher: Path, rows200: Path, dev60: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import learn

    monkeypatch.setattr(learn, "TRAIN", rows200)
    monkeypatch.setattr(learn, "DEV", dev60)
    held = learn._held_rows()
    res = learn.part_deep(tmp_path, 100, held, reuse=teacher)
    t = res["teacher"]
    assert (t["recipe"], t["layers"], t["groups"], res["student_depth"]) == ("mlm", 3, 1, 1)
    assert t["held_out"]["rows"] == len(held) == 32
    for part in ("truncate_refit_head", "finetune_no_teacher", "distil"):
        assert 0.0 <= res[part]["held_out"]["accuracy"] <= 1.0
    assert set(res["dev_report"]) == {
        "teacher",
        "truncate_refit_head",
        "finetune_no_teacher",
        "distil",
    }
    key = learn._deep_key(res, teacher, check_only=False)
    assert key == "deep-teacher-mlm-L3-G1"
    res.update(machine={"load_average": [0.0]}, part_wall_s=1.0, rows=100)
    md = learn.render({key: res})
    assert "**pretrained here by** masked-LM" in md and "Distilled vs no teacher" in md

    check = learn.part_deep(tmp_path / "c", 100, held, reuse=teacher, check_only=True)
    assert set(check) == {"teacher", "student_depth", "truncate_refit_head"}
    assert learn._deep_key(check, teacher, check_only=True) == f"deep-check-{teacher.name}"


def test_deep_teacher_from_refuses_a_teacher_of_other_rows(
    teacher: Path, rows200: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from benchmarks import learn

    other = tmp_path / "other"
    shutil.copytree(teacher, other)
    rec = json.loads((other / "deep_teacher.json").read_text())
    rec["pretraining"]["corpus"]["sentences_sha256"] = "0" * 64
    (other / "deep_teacher.json").write_text(json.dumps(rec))
    monkeypatch.setattr(learn, "TRAIN", rows200)
    with pytest.raises(SystemExit, match="outside today's held-out split"):
        learn.part_deep(tmp_path / "w", 100, learn._held_rows(), reuse=other)
