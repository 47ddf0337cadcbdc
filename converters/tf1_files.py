"""Where the pieces of an original TF1 ALBERT checkpoint are: the checkpoint prefix (its
``.index`` and every ``.data-*`` shard), ``albert_config.json`` and the SentencePiece
model, from a directory, a prefix, one of its files or a TF-Hub module directory.

Light on purpose (no TensorFlow, no torch): :mod:`albert_edge.sealed` names a TF1
checkpoint's files from here, and :mod:`converters.tf1_checkpoint` loads them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from albert_edge.errors import CheckpointError

CONFIG_NAME = "albert_config.json"
TOKENIZER_NAMES = ("30k-clean.model", "spiece.model")


@dataclass(frozen=True)
class TF1Files:
    """Where the pieces of one TF1 ALBERT checkpoint are."""

    root: Path  # the directory the user meant (module dir for TF-Hub)
    prefix: Path  # checkpoint prefix: prefix.index, prefix.data-*
    config: Path
    spiece: Path | None


_DATA_RE = re.compile(r"^(?P<prefix>.+)\.data-(?P<shard>\d+)-of-(?P<count>\d+)$")
_STEP_RE = re.compile(r"-(\d+)$")
_CKPT_STATE_RE = re.compile(r'^\s*model_checkpoint_path:\s*"(?P<path>(?:[^"\\]|\\.)*)"', re.M)


def _prefix_from_file(path: Path) -> Path | None:
    name = path.name
    if name.endswith(".index"):
        return path.with_name(name[: -len(".index")])
    if name.endswith(".meta"):
        return path.with_name(name[: -len(".meta")])
    m = _DATA_RE.match(name)
    if m:
        return path.with_name(m.group("prefix"))
    return None


def index_file(prefix: Path) -> Path:
    """The checkpoint's ``.index`` file."""
    return prefix.with_name(prefix.name + ".index")


def _unescape(text: str) -> str:
    """Undo text-proto (C-style) escaping of a string field; keep it as is if odd."""
    try:
        return ast.literal_eval('b"' + text + '"').decode("utf-8")
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return text


def _prefix_from_state_file(directory: Path) -> Path | None:
    """The prefix the ``checkpoint`` state file names, or None without a state file."""
    state = directory / "checkpoint"
    if not state.is_file():
        return None
    try:
        text = state.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{state}: unreadable ({exc}); delete it or restore it") from None
    m = _CKPT_STATE_RE.search(text)
    if not m:
        raise CheckpointError(
            f"{state}: no model_checkpoint_path line; delete this file to use the highest "
            "step, or pass the checkpoint prefix (e.g. DIR/model.ckpt-10000)"
        )
    named = Path(_unescape(m.group("path")))
    # The user named this directory: a checkpoint here wins over the absolute path the
    # state file recorded (training dirs get copied; the old location may still exist).
    candidates = [directory / named.name]
    if not named.is_absolute():
        candidates.insert(0, directory / named)
    for cand in candidates:
        if index_file(cand).is_file():
            return cand
    raise CheckpointError(
        f"{state}: names checkpoint {named} but {named.name}.index is not in {directory}; "
        "copy that checkpoint's .index and .data-* files here, or pass the prefix you want "
        "(e.g. DIR/model.ckpt-10000)"
    )


def _prefix_in_dir(directory: Path) -> Path:
    named = _prefix_from_state_file(directory)
    if named is not None:
        return named
    prefixes = sorted(p.with_suffix("") for p in directory.glob("*.index"))
    if not prefixes:
        raise CheckpointError(
            f"{directory}: no TF checkpoint here (expected model.ckpt-N.index and "
            "model.ckpt-N.data-* files, or a TF-Hub module with variables/variables.index)"
        )
    numbered = [(int(m.group(1)), p) for p in prefixes if (m := _STEP_RE.search(p.name))]
    if numbered:
        return max(numbered)[1]
    if len(prefixes) == 1:
        return prefixes[0]
    raise CheckpointError(
        f"{directory}: several checkpoints ({', '.join(p.name for p in prefixes)}) and no "
        "'checkpoint' file to choose; pass the prefix you want, e.g. "
        f"{prefixes[0]}"
    )


def _first_file(dirs: list[Path], names: tuple[str, ...]) -> Path | None:
    for d in dirs:
        for name in names:
            if (d / name).is_file():
                return d / name
    return None


def locate_tf1_files(path: Path) -> TF1Files:
    """Resolve ``path`` to checkpoint prefix, albert_config.json and SentencePiece model."""
    path = Path(path)
    if path.is_dir():
        hub_index = path / "variables" / "variables.index"
        if hub_index.is_file():
            root, prefix = path, path / "variables" / "variables"
        else:
            root, prefix = path, _prefix_in_dir(path)
    else:
        from_file = _prefix_from_file(path) if path.is_file() else None
        prefix = from_file if from_file is not None else path
        if not index_file(prefix).is_file():
            if not path.exists():
                raise CheckpointError(
                    f"{path}: no such file or directory, and {path.name}.index does not exist "
                    "either; pass a TF checkpoint prefix (DIR/model.ckpt-N) or its directory"
                )
            raise CheckpointError(
                f"{path}: not a TF checkpoint ({prefix.name}.index is missing); pass the "
                "checkpoint directory or its prefix (DIR/model.ckpt-N)"
            )
        root = prefix.parent
    if prefix.name == "variables" and prefix.parent.name == "variables":
        root = prefix.parent.parent  # a TF-Hub module (named by its dir, variables/ or files)
    search = list(dict.fromkeys([prefix.parent, root, root / "assets"]))
    config = _first_file(search, (CONFIG_NAME,))
    if config is None:
        raise CheckpointError(
            f"{root}: no {CONFIG_NAME} beside the checkpoint {prefix.name}; copy the "
            f"{CONFIG_NAME} of the pretrained ALBERT this checkpoint comes from into {root}"
        )
    spiece = _first_file(search, TOKENIZER_NAMES)
    return TF1Files(root=root, prefix=prefix, config=config, spiece=spiece)


def check_data_shards(prefix: Path) -> None:
    """Refuse a checkpoint whose ``.data-*`` shards are missing or of mixed counts, before
    TensorFlow reads anything."""
    shards = sorted(prefix.parent.glob(prefix.name + ".data-*-of-*"))
    if not shards:
        raise CheckpointError(
            f"{index_file(prefix)}: no {prefix.name}.data-* file beside it; copy the checkpoint's "
            ".data-00000-of-0000N files into the same directory"
        )
    counts = {int(m.group("count")) for s in shards if (m := _DATA_RE.match(s.name))}
    expected = {
        f"{prefix.name}.data-{i:05d}-of-{count:05d}" for count in counts for i in range(count)
    }
    missing = sorted(expected - {s.name for s in shards})
    if missing or len(counts) != 1:
        raise CheckpointError(
            f"{prefix.parent}: checkpoint data shards missing or inconsistent "
            f"({', '.join(missing) or 'mixed shard counts'}); copy all .data-* files of "
            f"{prefix.name}"
        )
