"""Fault cases of issue 13 that are fast enough for every run (the rest: @slow below and
benchmarks/fault_injection.py). Each was a defect on main; each drives the real CLI or API.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from albert_edge.errors import AlbertEdgeError, ArtifactIntegrityError
from tests.faults.harness import EMBEDDED, one_line_error, run_cli, tree_sums


def test_convert_ckpt_onto_itself_refuses_and_keeps_every_byte(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(EMBEDDED, ckpt)
    before = tree_sums(ckpt)
    r = run_cli("convert", str(ckpt), "-o", str(ckpt), "--overwrite", "--no-verify")
    assert one_line_error(r) and "would replace the input" in r.stderr
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "thesis.txt").write_text("years of work")
    r2 = run_cli("convert", str(ckpt), "-o", str(notes), "--overwrite", "--no-verify")
    assert one_line_error(r2) and "did not write" in r2.stderr
    assert tree_sums(ckpt) == before and tree_sums(notes) == {
        "thesis.txt": hashlib.sha256(b"years of work").hexdigest()
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "notes"]


def _copy(art: Path, to: Path) -> Path:
    shutil.copytree(art, to)
    return to


def test_verify_never_follows_a_manifest_out_of_the_artifact(
    onnx_artifact: Path, tmp_path: Path
) -> None:
    """Was: an absolute model_file made verify check another file and PASS."""
    from albert_edge.verify import verify

    art = _copy(onnx_artifact, tmp_path / "art")
    manifest = json.loads((art / "manifest.json").read_text())
    model = art / manifest["model_file"]
    good = shutil.copyfile(model, tmp_path / "good.onnx")
    model.write_bytes(b"garbage")
    for model_file in (str(good), "../good.onnx"):
        (art / "manifest.json").write_text(json.dumps({**manifest, "model_file": model_file}))
        with pytest.raises(AlbertEdgeError, match="not a relative path inside the artifact"):
            verify(art, seq_lens=(8,), batch_sizes=(1,), progress=False)
    r = run_cli("verify", str(art))
    assert one_line_error(r)


@pytest.mark.parametrize("name", ["model.onnx", "spiece.model", "config.json", "manifest.json"])
def test_verify_fails_on_a_single_flipped_bit(
    onnx_artifact: Path, tmp_path: Path, name: str
) -> None:
    """A low mantissa bit of one weight changes no output beyond tolerance: only the
    recorded sha256 can tell, and verify must not PASS a file that is not the one written."""
    from albert_edge.verify import verify

    art = _copy(onnx_artifact, tmp_path / "art")
    if name == "model.onnx":  # wherever the layout puts it
        name = json.loads((art / "manifest.json").read_text())["model_file"]
    data = bytearray((art / name).read_bytes())
    at = len(data) * 3 // 4
    if name == "manifest.json":  # a flip that keeps it valid JSON: an even digit turns odd
        at = next(i for i in range(at, len(data)) if data[i] in b"02468")
    data[at] ^= 0x01
    (art / name).write_bytes(bytes(data))
    with pytest.raises(ArtifactIntegrityError):
        verify(art, seq_lens=(8,), batch_sizes=(1,), progress=False)


def test_verify_of_the_intact_artifact_passes(onnx_artifact: Path) -> None:
    from albert_edge.verify import verify

    report = verify(onnx_artifact, seq_lens=(8,), batch_sizes=(1,), progress=False)
    assert report.passed


@pytest.mark.parametrize("text", ["{}", "[]", "not json"])
def test_malformed_manifest_is_one_line_on_every_command(
    onnx_artifact: Path, tmp_path: Path, text: str
) -> None:
    art = _copy(onnx_artifact, tmp_path / "art")
    (art / "manifest.json").write_text(text)
    commands = [("verify", str(art))]
    if text == "[]":  # the other commands share the reader: one case each is enough
        commands += [
            ("quantize", str(art), "--precision", "int8-dynamic", "-o", str(tmp_path / "q")),
            ("inspect", str(art)),
        ]
    for args in commands:
        r = run_cli(*args)
        assert one_line_error(r), (args, r.stderr)
    assert not (tmp_path / "q").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "x", "--max-examples", "0"],
        ["verify", "x", "--threads", "0"],
        ["verify", "x", "--batch-sizes", "0"],
        ["verify", "x", "--seq-lens", "-8"],
        ["convert", "-o", "x", "--num-calibration", "0"],
        ["convert", "-o", "x", "--block-size", "0"],
        ["convert", "-o", "x", "--opset", "0"],
        ["bench", "--runs", "0"],
        ["bench", "--warmup", "-1"],
        ["bench", "--threads", "0"],
    ],
)
def test_numeric_options_reject_nonsense(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from albert_edge.cli import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert ">= " in capsys.readouterr().err


def test_quantize_offers_the_no_verify_it_suggests() -> None:
    from albert_edge.cli import build_parser

    a = build_parser().parse_args(
        ["quantize", "m", "--precision", "int4", "-o", "q", "--no-verify"]
    )
    assert a.no_verify


def test_sqnr_failure_reads_as_a_failure() -> None:
    """Was: "SQNR 12.0 dB < 12.0 dB"."""
    from albert_edge.compare import judge

    msg = judge({"sqnr_db": 11.96}, {"min_sqnr_db": 12.0})
    assert msg is not None and msg.startswith("SQNR 11.96 dB < 12.0 dB")


def test_refused_pickle_is_not_called_truncated(tmp_path: Path) -> None:
    import argparse

    import torch

    from albert_edge.checkpoint import _load_state_dict
    from albert_edge.errors import CheckpointError

    path = tmp_path / "pytorch_model.bin"
    torch.save({"w": torch.zeros(2), "x": argparse.Namespace(a=1)}, path)
    with pytest.raises(CheckpointError) as info:
        _load_state_dict(path)
    assert "refused to unpickle" in str(info.value) and "truncated" not in str(info.value)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        _load_state_dict(path)


def test_extra_tsv_columns_are_an_error(tmp_path: Path) -> None:
    """Was: a stray tab silently cut the sentence short."""
    from albert_edge.data import DataError, read_sst2

    p = tmp_path / "d.tsv"
    p.write_text("sentence\tlabel\na fine\tfilm\t1\n")
    with pytest.raises(DataError, match=r"d.tsv:2: row has 3 .* header has 2"):
        read_sst2(p)


def test_bench_that_measured_nothing_exits_non_zero(tmp_path: Path) -> None:
    r = run_cli("bench", "--backend", "torch-cuda-fp32", "--json", str(tmp_path / "b.json"))
    if r.returncode == 0 and "skipped" not in r.stdout:
        pytest.skip("a CUDA device is present: the CUDA row was measured")
    assert r.returncode == 1 and "nothing was measured" in r.stderr
    assert "Traceback" not in r.stderr
