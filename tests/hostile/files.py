"""The hostile files a case puts in its directory before it runs: what a new user has at
hand (a TSV from Excel with a byte-order mark, a UTF-16 export, a zero-byte model, a
directory of their own, a FIFO, a symlink loop ...). Each maker writes into the case's
directory; ``shared`` holds the session's artifact and checkpoint, copied, never edited.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROWS = [
    (1, "a warm , funny and moving film ."),
    (0, "the plot is thin and the jokes land with a dull thud ."),
    (1, "smart , tender and often very funny ."),
    (0, "nothing in it feels new ."),
]


def _tsv(rows: Sequence[tuple[object, str]], header: str = "label\tsentence") -> str:
    return header + "\n" + "".join(f"{label}\t{text}\n" for label, text in rows)


def _write(name: str, data: bytes) -> Callable[[Path, Mapping[str, Path]], None]:
    def make(work: Path, shared: Mapping[str, Path]) -> None:
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return make


def _user_dir(work: Path, shared: Mapping[str, Path]) -> None:
    (work / "out").mkdir()
    (work / "out" / "data.csv").write_text("id,value\n1,2\n")


def _foreign_manifest(work: Path, shared: Mapping[str, Path]) -> None:
    """Issue 26's data loss: a manifest albert-edge never wrote, with a model_file key and
    no format version, beside the user's data."""
    (work / "out").mkdir()
    (work / "out" / "data.csv").write_text("id,value\n1,2\n")
    (work / "out" / "manifest.json").write_text(
        json.dumps({"model_file": "data.csv", "files": ["data.csv"]})
    )


def _copy(name: str, key: str) -> Callable[[Path, Mapping[str, Path]], None]:
    def make(work: Path, shared: Mapping[str, Path]) -> None:
        shutil.copytree(shared[key], work / name, symlinks=True)

    return make


def _model_file(art: Path) -> Path:
    manifest = json.loads((art / "manifest.json").read_text())
    return art / manifest["model_file"]


def _flipped(work: Path, shared: Mapping[str, Path]) -> None:
    shutil.copytree(shared["art"], work / "art")
    model = _model_file(work / "art")
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0x40
    model.write_bytes(bytes(data))


def _extra(work: Path, shared: Mapping[str, Path]) -> None:
    shutil.copytree(shared["art"], work / "art")
    (work / "art" / "notes.txt").write_text("mine\n")


def _poisoned(value: float) -> Callable[[Path, Mapping[str, Path]], None]:
    """A copy of the checkpoint with ``value`` in one word-embedding row."""

    def make(work: Path, shared: Mapping[str, Path]) -> None:
        from safetensors.torch import load_file, save_file

        shutil.copytree(shared["ckpt"], work / "ckpt")
        path = work / "ckpt" / "model.safetensors"
        tensors = load_file(str(path))
        key = next(k for k in tensors if "word_embeddings" in k)
        tensors[key][5, 0] = value
        save_file(tensors, str(path), metadata={"format": "pt"})

    return make


def _other_ckpt(work: Path, shared: Mapping[str, Path]) -> None:
    """Another random checkpoint of the same shape: a --reference with other weights."""
    from albert_edge.configs import make_random_checkpoint

    spiece = shared["ckpt"] / "spiece.model"
    make_random_checkpoint(work / "ckpt", "tiny", spiece_model=spiece, seed=7)


def _own_triton_export(work: Path, shared: Mapping[str, Path]) -> None:
    """What ``export-triton ART -o repo`` wrote (the CLI under test wrote it): the entry
    ``--overwrite`` may replace."""
    import subprocess
    import sys

    from tests.hostile.judge import UNDER_TEST

    subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "export-triton",
            str(shared["art"]),
            "-o",
            "repo",
        ],
        check=True,
        capture_output=True,
        cwd=work,  # not this checkout: `python -m` puts the working directory first
        env={**os.environ, "PYTHONPATH": str(UNDER_TEST)},
    )


def _out_link(work: Path, shared: Mapping[str, Path]) -> None:
    (work / "target").mkdir()
    (work / "target" / "keep.txt").write_text("keep\n")
    (work / "out").symlink_to("target")


def _loop(work: Path, shared: Mapping[str, Path]) -> None:
    (work / "loop").symlink_to("loop2")
    (work / "loop2").symlink_to("loop")


def _bad_ckpt_config(work: Path, shared: Mapping[str, Path]) -> None:
    (work / "ckpt").mkdir()
    (work / "ckpt" / "config.json").write_text("{")


def _bert_ckpt(work: Path, shared: Mapping[str, Path]) -> None:
    shutil.copytree(shared["ckpt"], work / "ckpt")
    cfg = json.loads((work / "ckpt" / "config.json").read_text())
    cfg["model_type"] = "bert"
    (work / "ckpt" / "config.json").write_text(json.dumps(cfg))


def _truncated_weights(work: Path, shared: Mapping[str, Path]) -> None:
    shutil.copytree(shared["ckpt"], work / "ckpt")
    path = work / "ckpt" / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _huge_header(work: Path, shared: Mapping[str, Path]) -> None:
    """safetensors whose header length claims 2**60 bytes: refused before reading."""
    shutil.copytree(shared["ckpt"], work / "ckpt")
    path = work / "ckpt" / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes((2**60).to_bytes(8, "little") + data[8:])


def _fifo(work: Path, shared: Mapping[str, Path]) -> None:
    os.mkfifo(work / "model.onnx")


def _triton_repo(work: Path, shared: Mapping[str, Path]) -> None:
    (work / "repo" / "art" / "1").mkdir(parents=True)
    (work / "repo" / "art" / "config.pbtxt").write_text('name: "art"\n')
    (work / "repo" / "art" / "1" / "model.onnx").write_bytes(b"mine")


def _bad_manifest(work: Path, shared: Mapping[str, Path]) -> None:
    shutil.copytree(shared["art"], work / "art")
    (work / "art" / "manifest.json").write_text("{not json")


MAKERS: dict[str, Callable[[Path, Mapping[str, Path]], None]] = {
    "user_dir": _user_dir,
    "foreign_manifest": _foreign_manifest,
    "afile": _write("afile", b"a file of the user's\n"),
    "bom.tsv": _write("bom.tsv", b"\xef\xbb\xbf" + _tsv(ROWS).encode()),
    "utf16.tsv": _write("utf16.tsv", _tsv(ROWS).encode("utf-16")),
    "latin1.tsv": _write("latin1.tsv", _tsv([(1, "caf\xe9 cr\xe8me")]).encode("latin-1")),
    "binary.tsv": _write("binary.tsv", bytes(range(256)) * 4),
    "empty.tsv": _write("empty.tsv", b""),
    "blank.tsv": _write("blank.tsv", b"\n\n  \n"),
    "nolabel.tsv": _write("nolabel.tsv", _tsv(ROWS, "sentiment\tsentence").encode()),
    "comma.tsv": _write("comma.tsv", b"label,sentence\n1,good film\n0,bad film\n"),
    "wordlabel.tsv": _write("wordlabel.tsv", _tsv([("positive", "good film")]).encode()),
    "label7.tsv": _write("label7.tsv", _tsv([(7, "good film"), (1, "fine")]).encode()),
    "straytab.tsv": _write("straytab.tsv", b"label\tsentence\n1\tgood\tfilm\n"),
    "headeronly.tsv": _write("headeronly.tsv", b"label\tsentence\n"),
    "crlf.tsv": _write("crlf.tsv", _tsv(ROWS).replace("\n", "\r\n").encode()),
    "calib.txt": _write("calib.txt", "".join(t + "\n" for _, t in ROWS).encode()),
    "rows60.tsv": _write("rows60.tsv", _tsv((ROWS * 60)[:60]).encode()),
    "onnx_plan.json": _write(
        "onnx_plan.json",
        b'{"format": "albert-edge/precision-plan", "version": 1, "target": "onnx", "units": []}',
    ),
    "zero/model.onnx": _write("zero/model.onnx", b""),
    "garbage/model.onnx": _write("garbage/model.onnx", b"this is not a protobuf" * 50),
    "garbage/model.tflite": _write("garbage/model.tflite", b"TFL3 but not really" * 50),
    "text.onnx": _write("text.onnx", b"hello\n"),
    "empty_dir": lambda w, s: (w / "empty_dir").mkdir(),
    "bad_ckpt_config": _bad_ckpt_config,
    "bert_ckpt": _bert_ckpt,
    "truncated_ckpt": _truncated_weights,
    "huge_header_ckpt": _huge_header,
    "art": _copy("art", "art"),
    "ckpt": _copy("ckpt", "ckpt"),
    "flipped_art": _flipped,
    "extra_art": _extra,
    "nan_ckpt": _poisoned(float("nan")),
    "inf_ckpt": _poisoned(float("inf")),
    "out_link": _out_link,
    "other_ckpt": _other_ckpt,
    "own_triton_export": _own_triton_export,
    "loop": _loop,
    "fifo": _fifo,
    "triton_repo": _triton_repo,
    "bad_manifest_art": _bad_manifest,
}
