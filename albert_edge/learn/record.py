"""The training output: what every ``albert-edge train`` run writes, and how it is known.

From scratch (:mod:`albert_edge.learn.scratch`), on a task file (:mod:`albert_edge.learn.tasks`)
and from ``--init`` (:mod:`albert_edge.learn.finetune`) alike, a run writes the model files
(:func:`write_model_files`) then ``training.json`` last, holding the sha256 of every other
file (:func:`own_files`): that record is what :func:`is_training_output` checks before
``--overwrite`` may replace a directory, so a directory of the user's is never deleted.
The record's shared parts (:func:`machine`, :func:`given_args`) name no path of the
machine it was made on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError
from albert_edge.heads import EXIT_HEADS_FILE
from albert_edge.io import OutputKind
from albert_edge.sealed import SEAL_NAME, TRAINED, sealed_reason

TRAINING_RECORD = TRAINED.primary  # "training.json"


def own_files(out_dir: Path) -> dict[str, str] | None:
    """sha256 of every file under ``out_dir`` but the record; None if a symlink is there
    (a training output holds none: a link could point at anything)."""
    sums = {}
    for root, dirs, files in os.walk(out_dir):
        for name in files + dirs:
            path = Path(root, name)
            if path.is_symlink():
                return None
            rel = path.relative_to(out_dir).as_posix()
            if name in files and rel != TRAINING_RECORD:
                h = hashlib.sha256()
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                sums[rel] = h.hexdigest()
    return dict(sorted(sums.items()))


def is_training_output(path: Path) -> bool:
    """True when ``path`` holds exactly what ``albert-edge train`` wrote there, unchanged.

    The test is ``training.json``'s ``sha256``: it must name every other file the directory
    holds (walked, not taken from the record) with its current hash. A checkpoint trained
    elsewhere, one fine-tuned in place since, or a directory with a file of the user's fails
    it, so ``--overwrite`` cannot delete their work.
    """
    if not path.is_dir() or path.is_symlink():
        return False
    if (path / SEAL_NAME).exists():  # sealed (albert_edge.sealed): the seal decides
        return sealed_reason(path, TRAINED) is None
    try:
        record = json.loads((path / TRAINING_RECORD).read_text())
        recorded = record.get("sha256") if isinstance(record, dict) else None
        return isinstance(recorded, dict) and bool(recorded) and own_files(path) == recorded
    except (OSError, ValueError):
        return False


TRAINING_OUTPUT = OutputKind(
    "training output",
    is_training_output,
    f"no {TRAINING_RECORD} recording the sha256 of each of them: a checkpoint albert-edge "
    "did not train, or files changed since",
)


def given_args() -> list[str]:
    """The arguments of this run as typed (``albert-edge train ...`` or ``python -m``),
    each path shown relative to the output's parent directory (or by its name): a record
    names no directory of the machine it was made on (:func:`albert_edge.io.portable_command`)."""
    from albert_edge.io import portable_command

    argv = sys.argv[1:]
    return portable_command(argv[1:] if argv[:1] == ["train"] else argv)


def machine() -> dict[str, str]:
    """The record's ``machine``: Python, PyTorch and the processor a run trained on."""
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "processor": platform.processor() or platform.machine(),
    }


@contextlib.contextmanager
def _safetensors_os_errors(path: Path) -> Iterator[None]:
    """safetensors' I/O errors as the ``OSError`` they are.

    safetensors (Rust) raises a bare ``SafetensorError`` on a full disk ("... (os error
    28)") or past ``ulimit -f`` (27); as an ``OSError`` it becomes the one-line "no space
    left" of every other write.
    """
    try:
        yield
    except Exception as exc:
        if isinstance(exc, OSError | AlbertEdgeError):
            raise
        m = re.search(r"os error (\d+)", str(exc))
        if m is None:
            raise
        code = int(m.group(1))
        raise OSError(code, os.strerror(code), str(path)) from None


def save_model(model: Any, out_dir: Path) -> None:
    """``save_pretrained`` (safetensors), a failed write as its ``OSError``."""
    with _safetensors_os_errors(out_dir / "model.safetensors"):
        model.save_pretrained(str(out_dir), safe_serialization=True)


def write_model_files(
    tmp: Path,
    model: Any,
    exits: Any,
    spiece: Path,
    do_lower_case: bool,
    max_len: int,
    reads: str | None = None,
) -> None:
    """What every training output holds before its record: the model, the exit
    classifiers (PABEE; beside the model, which stays an ordinary checkpoint), the
    SentencePiece model and ``tokenizer_config.json``. From scratch and ``--init`` alike.
    ``reads``: the input the classifier was trained on, recorded as config.json's
    ``finetuning_task`` (:func:`albert_edge.data.input_record_of`), so every command that
    scores data refuses the other input before the model loads."""
    if reads is not None:
        model.config.finetuning_task = reads
    save_model(model, tmp)
    if exits is not None:
        from safetensors.torch import save_file

        tensors = {
            f"depth{k + 1}.classifier.{name}": t.detach().cpu().contiguous()
            for k, lin in enumerate(exits)
            for name, t in (("weight", lin.weight), ("bias", lin.bias))
        }
        with _safetensors_os_errors(tmp / EXIT_HEADS_FILE):
            save_file(tensors, str(tmp / EXIT_HEADS_FILE))
    shutil.copyfile(spiece, tmp / "spiece.model")
    tok = {
        "tokenizer_class": "AlbertTokenizer",
        "do_lower_case": do_lower_case,
        "keep_accents": False,
        "model_max_length": max_len,
    }
    (tmp / "tokenizer_config.json").write_text(json.dumps(tok, indent=2) + "\n")


def write_record(tmp: Path, summary: dict[str, Any]) -> None:
    """``training.json``, last: ``summary`` with the sha256 of every other file in ``tmp``
    (what makes the directory recognisable as ours), never NaN or Infinity."""
    from albert_edge.manifest import dumps_strict

    summary["sha256"] = own_files(tmp)
    (tmp / TRAINING_RECORD).write_text(dumps_strict(summary, indent=2) + "\n")
