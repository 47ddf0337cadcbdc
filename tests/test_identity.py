"""Issue 26, identity: an artifact is what albert-edge wrote and sealed, nothing else.

Each defect of the issue that is about identity has a test here that failed on fb1525b
(benchmarks/results/hostile_defects.md has the before/after):

* ``convert -o DIR --overwrite`` deleted a user's ``data.csv`` because DIR held a
  hand-written ``manifest.json`` with a ``model_file`` key;
* a resumed ``bench --json`` mixed rows of two models when the artifact was replaced at
  the same path between the runs;
* ``export-triton --overwrite`` could never replace its own export (and could write into
  its input), and ``--max-batch-size`` beyond int32 gave a config Triton rejects;
* a zero-byte ``model.onnx`` inspected as "fp32 ONNX, opset 0", exit 0.

The CLI runs in a subprocess from ``/`` on the albert_edge under test (its checkout on
PYTHONPATH), so a worktree of an older commit can run the same tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import albert_edge
from albert_edge.errors import AlbertEdgeError

CHECKOUT = Path(albert_edge.__file__).resolve().parents[1]


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "OMP_NUM_THREADS": "1", "USE_TF": "0"}
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd="/",
    )


def one_line_refusal(r: subprocess.CompletedProcess[str]) -> str:
    """The refusal's single error line (exit 2, no traceback)."""
    assert r.returncode == 2, (r.returncode, r.stderr[-1500:])
    assert "Traceback" not in r.stderr, r.stderr[-1500:]
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert 1 <= len(lines) <= 2, lines
    return lines[-1]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def onnx_artifact(tmp_path_factory: pytest.TempPathFactory, make_checkpoint: Any) -> Path:
    """A real, sealed ONNX artifact of a tiny random checkpoint (never modify: copy it)."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = tmp_path_factory.mktemp("identity") / "art"
    convert(make_checkpoint(), out, ConvertOptions(verify=False))
    return out


# --- --overwrite: never a directory albert-edge did not write -------------------------


def _hand_written(d: Path) -> None:
    d.mkdir()
    (d / "data.csv").write_text("id,label\n1,0\n")
    (d / "manifest.json").write_text(json.dumps({"model_file": "data.csv"}))


def _legacy_format_1(d: Path) -> None:
    d.mkdir()
    (d / "model.onnx").write_bytes(b"\x08\x07")
    (d / "manifest.json").write_text(
        json.dumps(
            {"format_version": 1, "albert_edge_version": "0.1.0", "model_file": "model.onnx"}
        )
    )


@pytest.mark.parametrize(
    ("make", "why"),
    [(_hand_written, "no format_version"), (_legacy_format_1, "format 1")],
    ids=["hand-written-manifest", "legacy-format-1"],
)
def test_overwrite_never_replaces_a_foreign_or_unsealed_directory(
    tmp_path: Path, make: Any, why: str
) -> None:
    """Was: the hand-written ``{"model_file": "data.csv"}`` passed for an artifact and
    ``convert --overwrite`` deleted data.csv."""
    out = tmp_path / "out"
    make(out)
    before = snapshot(out)
    line = one_line_refusal(run_cli("convert", "-o", str(out), "--overwrite", "--quiet"))
    assert why in line and "--overwrite" in line
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temp dir, no lock


def test_overwrite_names_the_file_the_manifest_does_not_list(
    onnx_artifact: Path, tmp_path: Path
) -> None:
    from albert_edge.io import artifact_foreign_reason, is_albert_edge_artifact

    art = tmp_path / "art"
    shutil.copytree(onnx_artifact, art)
    assert is_albert_edge_artifact(art)
    (art / "notes.txt").write_text("mine")
    assert artifact_foreign_reason(art) == "notes.txt is not listed in its manifest.json"


# --- verify: only a sealed, complete artifact ------------------------------------------


def test_verify_refuses_foreign_and_legacy_manifests_in_one_line(
    onnx_artifact: Path, tmp_path: Path, make_checkpoint: Any
) -> None:
    """The real artifact, its manifest rewritten without the seal (by hand, or as format 1
    of albert-edge 0.1.0 wrote it). Was: verified and PASSED, vouching for bytes that no
    manifest recorded."""
    from albert_edge.manifest import ManifestError
    from albert_edge.verify import verify

    sealed = json.loads((onnx_artifact / "manifest.json").read_text())
    plain = {
        k: v
        for k, v in sealed.items()
        if k not in ("format_version", "albert_edge_version", "sha256", "manifest_sha256")
    }
    legacy = {"format_version": 1, "albert_edge_version": "0.1.0", **plain}
    for manifest, why in ((plain, "no format_version"), (legacy, "format 1")):
        art = tmp_path / why.replace(" ", "-")
        shutil.copytree(onnx_artifact, art)
        (art / "manifest.json").write_text(json.dumps(manifest, indent=2))
        with pytest.raises(ManifestError, match=why) as info:
            verify(art, reference=make_checkpoint(), progress=False, sample=False)
        assert "\n" not in str(info.value)
        assert "not a sealed albert-edge artifact" in str(info.value)


def test_verify_fails_a_file_the_manifest_does_not_list(
    onnx_artifact: Path, tmp_path: Path, make_checkpoint: Any
) -> None:
    """Was: PASSED with a second model file dropped into the artifact."""
    from albert_edge.errors import ArtifactIntegrityError
    from albert_edge.verify import verify

    art = tmp_path / "art"
    shutil.copytree(onnx_artifact, art)
    (art / "onnx" / "model_extra.onnx").write_bytes((art / "onnx" / "model.onnx").read_bytes())
    with pytest.raises(ArtifactIntegrityError, match=r"model_extra\.onnx: not listed"):
        verify(art, reference=make_checkpoint(), progress=False, sample=False)


def test_verify_refuses_a_reference_with_other_weights(
    onnx_artifact: Path, make_checkpoint: Any
) -> None:
    from albert_edge.errors import CheckpointError
    from albert_edge.verify import verify

    other = make_checkpoint(seed=1)  # same config and head, other weights
    with pytest.raises(CheckpointError, match="not the ones this artifact was converted from"):
        verify(onnx_artifact, reference=other, progress=False, sample=False)
    report = verify(onnx_artifact, reference=make_checkpoint(), progress=False, sample=False)
    assert report.passed


# --- bench resume: rows keyed on content ------------------------------------------------


def test_resumed_bench_remeasures_an_artifact_replaced_at_the_same_path(
    tmp_path: Path, make_checkpoint: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: the rerun kept the interrupted run's rows of the old model and measured only
    the missing shape on the new one: one target, rows of two models."""
    from albert_edge.bench import harness

    target = tmp_path / "model"
    shutil.copytree(make_checkpoint(), target)
    log = tmp_path / "b.json.rows.jsonl"
    kw: dict[str, Any] = dict(
        backends=["torch-fp32"],
        seq_lens=(8, 16),
        runs=2,
        warmup=0,
        roofline=False,
        progress=False,
        rows_path=log,
    )
    harness.bench([target], **kw)
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[:2]) + "\n")  # interrupted after the first row
    shutil.rmtree(target)
    shutil.copytree(make_checkpoint(seed=1), target)  # another model, the same path
    seen: list[Any] = []
    real = harness.run_child

    def spy(spec: dict[str, Any], *a: Any, **k: Any) -> dict[str, Any]:
        seen.append([(s["batch"], s["seq_len"]) for s in spec["shapes"]])
        return real(spec, *a, **k)

    monkeypatch.setattr(harness, "run_child", spy)
    report = harness.bench([target], **kw)
    assert seen == [[(1, 8), (1, 16)]]  # every shape measured again, on the new model
    assert not any("resumed" in n for n in report.get("notes", []))
    # (the same model at the same path still resumes: tests/test_io_bench_rows.py)


# --- export-triton: a sealed entry of its own --------------------------------------------


def _triton_config(entry: Path) -> Any:
    from google.protobuf import text_format

    model_config_pb2 = pytest.importorskip("tritonclient.grpc.model_config_pb2")
    return text_format.Parse((entry / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())


def test_export_triton_overwrite_replaces_its_own_entry_only(
    onnx_artifact: Path, tmp_path: Path
) -> None:
    """Was: ``--overwrite`` was refused on export-triton's own output, always."""
    repo = tmp_path / "repo"
    r = run_cli("export-triton", str(onnx_artifact), "-o", str(repo), "--name", "m")
    assert r.returncode == 0, r.stderr[-1500:]
    r = run_cli(
        "export-triton",
        str(onnx_artifact),
        "-o",
        str(repo),
        "--name",
        "m",
        "--overwrite",
        "--max-batch-size",
        "4",
    )
    assert r.returncode == 0, r.stderr[-1500:]
    assert _triton_config(repo / "m").max_batch_size == 4
    assert sorted(p.name for p in repo.iterdir()) == ["m"]  # no temp dir, no lock
    # a model of the shared repository that export-triton did not write: never replaced
    (repo / "theirs" / "1").mkdir(parents=True)
    (repo / "theirs" / "config.pbtxt").write_text('name: "theirs"\n')
    before = snapshot(repo / "theirs")
    line = one_line_refusal(
        run_cli(
            "export-triton", str(onnx_artifact), "-o", str(repo), "--name", "theirs", "--overwrite"
        )
    )
    assert "did not write" in line and snapshot(repo / "theirs") == before


def test_export_triton_never_writes_into_its_input(onnx_artifact: Path, tmp_path: Path) -> None:
    art = tmp_path / "art"
    shutil.copytree(onnx_artifact, art)
    before = snapshot(art)
    for repo, name in ((art, "x"), (tmp_path, "art")):
        r = run_cli("export-triton", str(art), "-o", str(repo), "--name", name, "--overwrite")
        assert "input" in one_line_refusal(r)
        assert snapshot(art) == before


def test_export_triton_numbers_stay_within_the_protobuf(
    onnx_artifact: Path, tmp_path: Path
) -> None:
    """Was: ``--max-batch-size 99999999999999999999`` wrote a config.pbtxt that Triton's
    protobuf rejects (max_batch_size is an int32)."""
    from albert_edge.triton import export_triton

    line = one_line_refusal(
        run_cli(
            "export-triton",
            str(onnx_artifact),
            "-o",
            str(tmp_path / "repo"),
            "--max-batch-size",
            "99999999999999999999",
        )
    )
    assert "2147483647" in line and not (tmp_path / "repo").exists()
    with pytest.raises(AlbertEdgeError, match="2147483647"):
        export_triton(onnx_artifact, tmp_path / "repo", max_batch_size=2**31)
    info = export_triton(onnx_artifact, tmp_path / "repo", name="big", max_batch_size=2**31 - 1)
    assert info["max_batch_size"] == 2**31 - 1
    assert _triton_config(tmp_path / "repo" / "big").max_batch_size == 2**31 - 1


# --- inspect ---------------------------------------------------------------------------


def test_inspect_refuses_a_zero_byte_onnx(tmp_path: Path) -> None:
    """Was: "fp32 ONNX, opset 0", exit 0."""
    (tmp_path / "model.onnx").write_bytes(b"")
    line = one_line_refusal(run_cli("inspect", str(tmp_path / "model.onnx")))
    assert "0 bytes" in line or "not an ONNX model" in line
    assert (tmp_path / "model.onnx").read_bytes() == b""
