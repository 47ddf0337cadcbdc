"""``albert_edge.sealed``: the seal of every evidence directory, its identities, and the
``--overwrite`` rule it gives each writer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from albert_edge.errors import OutputExistsError
from albert_edge.io import atomic_output_dir, is_albert_edge_artifact
from albert_edge.sealed import (
    SEAL_NAME,
    EvidenceError,
    EvidenceKind,
    check_made_from,
    checkpoint_identity,
    made_from,
    open_sealed,
    seal,
    sealed_reason,
)

KIND = EvidenceKind("test output", "result.json", "make it again (`make test-output`)")
OTHER = EvidenceKind("other output", "result.json", "make the other one again")


def _sealed_dir(path: Path, ckpt: Path | None = None, data: Path | None = None) -> Path:
    path.mkdir()
    (path / "result.json").write_text('{"accuracy": 0.81}\n')
    (path / "sub").mkdir()
    (path / "sub" / "heads.bin").write_bytes(bytes(range(64)))
    seal(path, KIND, made_from(ckpt, {"data": data}, with_checkpoint=ckpt is not None))
    return path


def test_identity_is_the_content_not_the_path(make_checkpoint, tmp_path: Path) -> None:
    """A copy elsewhere has the same identity; one changed weight, or config value, not."""
    src = make_checkpoint("tiny")
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    assert checkpoint_identity(copy) == checkpoint_identity(src)
    (copy / "tokenizer_config.json").write_text("{}\n")  # not what the model computes
    assert checkpoint_identity(copy) == checkpoint_identity(src)
    cfg = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**cfg, "layer_norm_eps": 1e-5}))
    assert checkpoint_identity(copy) != checkpoint_identity(src)
    assert checkpoint_identity(None) == checkpoint_identity(None)  # the embedded model
    with pytest.raises(EvidenceError, match="no config or weight files"):
        checkpoint_identity(tmp_path)


def test_an_original_tf1_directory_has_an_identity_its_weights_decide(tmp_path: Path) -> None:
    """``train --init DIR`` on Google's TF1 release layout: albert_config.json beside
    model.ckpt-N.index / .data-*; the directory and its prefix name the same files."""
    d = tmp_path / "tf1"
    d.mkdir()
    (d / "albert_config.json").write_text('{"hidden_size": 8}\n')
    (d / "model.ckpt-1000.index").write_bytes(b"index")
    (d / "model.ckpt-1000.data-00000-of-00001").write_bytes(b"weights")
    (d / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-1000"\n')
    (d / "30k-clean.model").write_bytes(b"tokenizer: not what the model computes")
    first = checkpoint_identity(d)
    assert checkpoint_identity(d / "model.ckpt-1000") != first  # the prefix has no config
    (d / "30k-clean.model").write_bytes(b"another tokenizer")
    assert checkpoint_identity(d) == first
    (d / "model.ckpt-1000.data-00000-of-00001").write_bytes(b"other weights")
    assert checkpoint_identity(d) != first


def test_a_sealed_directory_opens_and_records_what_it_was_made_from(
    make_checkpoint, tmp_path: Path
) -> None:
    ckpt = make_checkpoint("tiny")
    data = tmp_path / "d.tsv"
    data.write_text("sentence\tlabel\nfine\t1\n")
    out = _sealed_dir(tmp_path / "out", ckpt, data)
    m = open_sealed(out, KIND)
    assert m.extra["evidence"] == "test output"
    assert sorted(m.sha256) == ["result.json", "sub/heads.bin"]
    assert m.extra["made_from"]["checkpoint"]["identity"] == checkpoint_identity(ckpt)
    assert str(tmp_path) not in (out / SEAL_NAME).read_text()  # names, never paths
    check_made_from(out, KIND, m, checkpoint=ckpt, data={"data": data})
    data.write_text("sentence\tlabel\nfine\t0\n")
    with pytest.raises(EvidenceError, match=r"made from other data \(d\.tsv"):
        check_made_from(out, KIND, m, checkpoint=ckpt, data={"data": data})
    with pytest.raises(EvidenceError, match="made from another checkpoint"):
        check_made_from(out, KIND, m, checkpoint=None)


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda d: (d / "sub" / "heads.bin").write_bytes(b"x" * 64), r"heads\.bin: sha256"),
        (lambda d: (d / "result.json").unlink(), r"result\.json: missing"),
        (lambda d: (d / "extra.txt").write_text("mine"), r"extra\.txt.*not listed in seal"),
        (lambda d: (d / SEAL_NAME).unlink(), r"seal\.json: missing.*make it again"),
        (
            lambda d: (d / SEAL_NAME).write_text((d / SEAL_NAME).read_text().replace("0", "1")),
            r"seal\.json.*(seal mismatch|sha256)",
        ),
    ],
    ids=["changed", "removed", "added", "unsealed", "seal-edited"],
)
def test_every_damage_is_one_line_naming_the_file(tmp_path: Path, damage, says) -> None:
    out = _sealed_dir(tmp_path / "out")
    damage(out)
    with pytest.raises(EvidenceError, match=says) as exc:
        open_sealed(out, KIND)
    assert "\n" not in str(exc.value)


def test_a_seal_of_another_kind_is_refused_and_is_no_artifact(tmp_path: Path) -> None:
    out = _sealed_dir(tmp_path / "out")
    with pytest.raises(EvidenceError, match="seals a test output, not a other output"):
        open_sealed(out, OTHER)
    assert not is_albert_edge_artifact(out)  # convert --overwrite never replaces it


def test_overwrite_replaces_only_an_intact_sealed_directory_of_its_kind(tmp_path: Path) -> None:
    out = _sealed_dir(tmp_path / "out")
    kind = KIND.output_kind()
    assert sealed_reason(out, KIND) is None and kind.is_own(out)
    with atomic_output_dir(out, overwrite=True, kind=kind) as tmp:
        (tmp / "result.json").write_text("{}\n")
        seal(tmp, KIND, {})
    assert open_sealed(out, KIND).sha256.keys() == {"result.json"}
    other = OTHER.output_kind()
    with (
        pytest.raises(OutputExistsError, match="seals a test output, not a other output"),
        atomic_output_dir(out, overwrite=True, kind=other),
    ):
        pass
    (out / "mine.txt").write_text("a user's file\n")
    with (
        pytest.raises(OutputExistsError, match=r"mine\.txt"),
        atomic_output_dir(out, overwrite=True, kind=kind),
    ):
        pass
    assert (out / "mine.txt").read_text() == "a user's file\n"
