"""manifest.json as a typed, versioned, sealed schema: data to check, not to trust."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from albert_edge.errors import AlbertEdgeError, ArtifactIntegrityError
from albert_edge.manifest import (
    FORMAT_VERSION,
    Manifest,
    ManifestError,
    check_files,
    load_manifest,
    read_manifest,
    write_manifest,
)


def artifact(path: Path, model_file: str = "model.onnx", **extra: object) -> Path:
    (path / model_file).parent.mkdir(parents=True, exist_ok=True)
    (path / model_file).write_bytes(b"\x08\x07model")
    (path / "spiece.model").write_bytes(b"sp")
    write_manifest(path, {"target": "onnx", "precision": "fp32", "model_file": model_file, **extra})
    return path


def test_write_then_load_round_trips_and_keeps_target_keys(tmp_path: Path) -> None:
    art = artifact(tmp_path, opset=17, requirements={"onnxruntime": ">=1.17"})
    m = load_manifest(art)
    assert isinstance(m, Manifest) and m.format_version == FORMAT_VERSION
    assert m.target == "onnx" and m.precision == "fp32"
    assert m.extra["opset"] == 17 and m.extra["requirements"] == {"onnxruntime": ">=1.17"}
    assert set(m.sha256) == {"model.onnx", "spiece.model"}  # found by walking, not listed
    d = read_manifest(art)
    assert d["model_file"] == "model.onnx" and d["opset"] == 17
    check_files(art, m)


def test_model_file_in_a_subdirectory_is_walked_and_accepted(tmp_path: Path) -> None:
    art = artifact(tmp_path, model_file="onnx/model.onnx")
    m = load_manifest(art)
    assert m.model_file == "onnx/model.onnx" and "onnx/model.onnx" in m.sha256
    check_files(art, m)


@pytest.mark.parametrize(
    "text",
    ["{}", "[]", "null", "3", '"model.onnx"', "not json", "", '{"model_file": 3}'],
)
def test_malformed_manifests_are_one_line_errors(tmp_path: Path, text: str) -> None:
    """Was: ``{}`` or a JSON list gave a traceback."""
    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(ManifestError) as info:
        load_manifest(tmp_path)
    assert "manifest.json" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "model_file", ["/etc/passwd", "../other/model.onnx", "a/../../x.onnx", "~/m.onnx", "..\\m"]
)
def test_paths_outside_the_artifact_are_rejected(tmp_path: Path, model_file: str) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"model_file": model_file}))
    with pytest.raises(ManifestError, match="not a relative path inside the artifact"):
        load_manifest(tmp_path)


def test_write_refuses_an_absolute_model_file(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"m")
    with pytest.raises(ManifestError):
        write_manifest(tmp_path, {"model_file": str(tmp_path / "model.onnx")})


def test_any_edit_of_a_sealed_manifest_is_detected(tmp_path: Path) -> None:
    art = artifact(tmp_path)
    raw = (art / "manifest.json").read_bytes()
    data = json.loads(raw)
    for edited in (
        json.dumps({**data, "precision": "int4"}, indent=2) + "\n",  # content
        raw.decode()[:-1],  # the last byte (a newline) only
        raw.decode().replace('"fp32"', '"fp33"'),
    ):
        (art / "manifest.json").write_text(edited)
        with pytest.raises(ArtifactIntegrityError, match="modified or damaged"):
            load_manifest(art)
    no_version = {k: v for k, v in data.items() if k != "format_version"}
    (art / "manifest.json").write_text(json.dumps(no_version, indent=2) + "\n")
    with pytest.raises(AlbertEdgeError):  # hashes present: cannot pass as a legacy manifest
        load_manifest(art)


def test_every_bit_of_every_file_matters(tmp_path: Path) -> None:
    art = artifact(tmp_path)
    for name in ("model.onnx", "spiece.model"):
        original = (art / name).read_bytes()
        for i in range(len(original) * 8):
            b = bytearray(original)
            b[i // 8] ^= 1 << (i % 8)
            (art / name).write_bytes(bytes(b))
            with pytest.raises(ArtifactIntegrityError, match="sha256"):
                check_files(art, load_manifest(art))
        (art / name).write_bytes(original)
        (art / name).unlink()
        with pytest.raises(ArtifactIntegrityError, match="missing"):
            check_files(art, load_manifest(art))
        (art / name).write_bytes(original)
    check_files(art, load_manifest(art))


def test_symlink_out_of_the_artifact_is_refused(tmp_path: Path) -> None:
    art = artifact(tmp_path / "art")
    outside = tmp_path / "outside.onnx"
    outside.write_bytes((art / "model.onnx").read_bytes())
    (art / "model.onnx").unlink()
    (art / "model.onnx").symlink_to(outside)
    with pytest.raises(ArtifactIntegrityError, match="outside the artifact"):
        check_files(art, load_manifest(art))


def test_legacy_manifest_without_hashes_still_loads(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"m")
    (tmp_path / "manifest.json").write_text('{"target": "onnx", "model_file": "model.onnx"}')
    m = load_manifest(tmp_path)
    assert m.format_version == 1 and not m.sha256
    check_files(tmp_path, m)


def test_future_format_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text('{"format_version": 99, "model_file": "m.onnx"}')
    with pytest.raises(ManifestError, match="upgrade albert-edge"):
        load_manifest(tmp_path)


def test_loading_an_artifact_checks_the_model_hash(tmp_path: Path) -> None:
    """runtime.model_file is the door every loader goes through."""
    from albert_edge.runtime import model_file

    art = artifact(tmp_path)
    assert model_file(art) == art / "model.onnx"
    assert model_file(art / "model.onnx") == art / "model.onnx"
    (art / "model.onnx").write_bytes(b"\x08\x07modem")
    with pytest.raises(ArtifactIntegrityError):
        model_file(art)
    with pytest.raises(ArtifactIntegrityError):
        model_file(art / "model.onnx")


# --- the record every target shares (albert_edge.manifest.artifact_record) ---------------


def _facts(**over: object) -> dict[str, object]:
    from albert_edge.manifest import MATMUL_KEYS, SIZE_KEYS

    facts: dict[str, object] = {k: i for i, k in enumerate((*SIZE_KEYS, *MATMUL_KEYS))}
    facts.update(precision="int8-dynamic", factorized_embedding_intact=True, **over)
    return facts


def test_artifact_record_builds_the_shared_keys_once(tmp_path: Path) -> None:
    from albert_edge.manifest import MATMUL_KEYS, SIZE_KEYS, artifact_record

    rec = artifact_record(
        "tflite",
        source={"name": "m", "kind": "hf", "embedded": False, "weights_sha256": None},
        head="sequence-classification",
        precision="fp32",
        model_file="model.tflite",
        inputs=[{"name": "input_ids"}],
        outputs=["logits"],
        facts=_facts(),
        sizes={"note": "why"},
        files=["spiece.model", "model.tflite"],
    )
    assert rec["target"] == "tflite" and rec["precision"] == "fp32"  # asked, not detected
    assert list(rec["sizes"]) == [*SIZE_KEYS, "note"]
    assert [rec[k] for k in MATMUL_KEYS] == [len(SIZE_KEYS) + i for i in range(3)]
    assert rec["factorized_embedding_intact"] is True
    assert rec["files"] == ["model.tflite", "spiece.model"]  # the model first, once
    (tmp_path / "model.tflite").write_bytes(b"tfl3")
    (tmp_path / "spiece.model").write_bytes(b"sp")
    write_manifest(tmp_path, rec)  # a record is a writable manifest as it stands
    assert load_manifest(tmp_path).files == ["model.tflite", "spiece.model"]


def test_artifact_record_refuses_facts_without_a_shared_key() -> None:
    from albert_edge.manifest import artifact_record

    facts = _facts()
    del facts["floor_bytes"]
    with pytest.raises(AlbertEdgeError, match="facts lack floor_bytes"):
        artifact_record(
            "onnx",
            source={},
            head="base",
            precision="fp32",
            model_file="onnx/model.onnx",
            inputs=[],
            outputs=[],
            facts=facts,
        )


# --- `from albert_edge import convert` ---------------------------------------------------

_CONVERT_NAME = """
import sys
import albert_edge
{first}
from albert_edge import convert
import albert_edge.convert as module
from albert_edge.convert import convert as function
assert convert is module is albert_edge.convert, (convert, module)
assert callable(convert) and function is not convert
try:
    convert(sys.argv[1], sys.argv[2])
except albert_edge.AlbertEdgeError as exc:
    print(type(exc).__name__, exc)
"""


@pytest.mark.parametrize(
    "first", ["", "import albert_edge.convert", "albert_edge.convert", "import albert_edge.cli"]
)
def test_convert_is_one_callable_object_in_any_import_order(tmp_path: Path, first: str) -> None:
    """The import system binds the submodule over the package's lazy ``convert``; the
    public name must mean one thing whatever was imported first, and calling it must
    reach the function (here: a missing checkpoint, refused in one line)."""
    import subprocess
    import sys

    script = _CONVERT_NAME.format(first=first)
    missing = tmp_path / "no-such-checkpoint"
    run = subprocess.run(
        [sys.executable, "-c", script, str(missing), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("CheckpointError") and str(missing) in run.stdout
    assert not (tmp_path / "out").exists()
