"""The PyTorch side of a comparison: which checkpoint an artifact is compared with, and
running it.

``verify``, ``convert``'s own check, the early-exit checks, ``bench --recommend`` and
``optimize`` all compare an artifact with a PyTorch model; this module holds what they
share: finding that model from an artifact's manifest (the checkpoint it was converted
from, or for an ``optimize`` output the checkpoint given to optimize and the
intermediate it was converted from), refusing other weights, and running it in eval mode
on the feeds the artifact sees.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import CheckpointError

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.runtime import Runner

# ALBERT's special pieces: <pad> <unk> [CLS] [SEP] [MASK]; text pieces start at 5
CLS_ID, SEP_ID, PAD_ID, FIRST_PIECE = 2, 3, 0, 5

SAMPLE_DATA = Path(__file__).parent / "samples" / "sst2_dev_sample.tsv"


def adapt_feeds(feeds: dict[str, np.ndarray], runner: Runner) -> dict[str, np.ndarray]:
    """Make the reference see what the artifact sees when the export pruned an input.

    An export without ``token_type_ids`` computes with all-zero types (and one without
    ``attention_mask`` with an all-ones mask); feeding those to both sides keeps the
    comparison about the export, not about an input the artifact cannot receive.
    """
    import numpy as np

    feeds = dict(feeds)
    names = set(runner.input_names)
    if "token_type_ids" not in names:
        feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
    if "attention_mask" not in names:
        feeds["attention_mask"] = np.ones_like(feeds["input_ids"])
        feeds["input_ids"] = np.where(feeds["input_ids"] == PAD_ID, FIRST_PIECE, feeds["input_ids"])
    return feeds


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """PyTorch's thread count set to ``n`` for the block (the reference runs beside a
    runtime pinned to its own threads), restored after."""
    import torch

    old = torch.get_num_threads()
    if n > 0:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def run_reference(ckpt: Checkpoint, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The PyTorch model's head outputs for ``feeds`` (float32 numpy)."""
    import torch

    inputs = {k: torch.from_numpy(v) for k, v in feeds.items()}
    # Eval mode every time: an exporter that restores a wrapper's training flag leaves the
    # model with dropout on, and a stochastic reference fails every artifact at random.
    ckpt.model.eval()
    with torch.inference_mode():
        out = ckpt.model(**inputs, return_dict=True)
    return {
        name: getattr(out, name).detach().float().numpy()
        for name in ckpt.head.outputs
        if getattr(out, name, None) is not None
    }


def resolve_reference(
    artifact: Path, manifest: dict[str, Any] | None, reference: str | Path | None
) -> Path:
    if reference is not None:
        return Path(reference)
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.layout import resolve_source

    source = (manifest or {}).get("source")
    if isinstance(source, dict) and ("embedded" in source or "name" in source):
        resolved = resolve_source(source, artifact)
        return DEFAULT_MODEL if resolved is None else resolved
    path = source.get("path") if isinstance(source, dict) else source
    if not path:
        raise CheckpointError(
            f"{artifact}: no reference checkpoint recorded in manifest.json; pass "
            "--reference CHECKPOINT (the checkpoint it was converted from)"
        )
    if not Path(str(path)).exists():
        raise CheckpointError(
            f"{artifact}: reference checkpoint {path} (from manifest.json) does not exist; "
            "pass --reference CHECKPOINT"
        )
    return Path(str(path))


def check_reference_hash(ref_path: Path, ckpt: Checkpoint, manifest: dict[str, Any] | None) -> None:
    """Refuse a reference whose weights are not the ones the artifact was converted from.

    Verifying against other weights (a re-trained checkpoint under the same name) would
    report the artifact's error against a model it never was: a FAIL that blames the
    conversion, or a PASS for the wrong model. The manifest records the sha256 of the
    source's weight files; a source without one (written before it was recorded) is not
    checked.
    """
    from albert_edge.layout import source_record

    source = (manifest or {}).get("source")
    want = source.get("weights_sha256") if isinstance(source, dict) else None
    if not isinstance(want, str) or not want:
        return
    got = source_record(ckpt)["weights_sha256"]
    if got is not None and got != want:
        raise CheckpointError(
            f"{ref_path}: its weights (sha256 {got[:12]}...) are not the ones this artifact was "
            f"converted from (manifest.json: {want[:12]}...); pass that checkpoint as --reference"
        )


def default_sample(ref_path: Path, ckpt: Checkpoint) -> Path | None:
    """The packaged SST-2 dev sample, for the model it fits: the embedded SST-2 ALBERT."""
    from albert_edge.checkpoint import DEFAULT_MODEL

    try:
        embedded = Path(ref_path).resolve() == DEFAULT_MODEL.resolve()
    except OSError:
        return None
    if embedded and ckpt.head.name == "sequence-classification" and SAMPLE_DATA.is_file():
        return SAMPLE_DATA
    return None


def given_record(manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    """What an ``optimize`` output's manifest records of the checkpoint the user gave
    (``optimize.checkpoint``: name, weights sha256, path relative to the artifact), or
    None for any other artifact (and for optimize outputs written before it was kept)."""
    opt = (manifest or {}).get("optimize")
    rec = opt.get("checkpoint") if isinstance(opt, dict) else None
    return rec if isinstance(rec, dict) else None


def given_checkpoint(
    art: Path, manifest: dict[str, Any] | None, reference: str | Path | None
) -> Path | None:
    """The checkpoint given to ``optimize`` for an optimize output, else None (the
    ordinary path: the artifact against the checkpoint it was converted from).

    ``--reference`` names the given checkpoint (same weights) or the intermediate the
    artifact was converted from (the ordinary comparison); any other weights are refused.
    Without it, the recorded relative path is followed when it still holds the recorded
    weights; else one line says what was recorded."""
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.layout import describe_recorded, find_recorded, weights_sha256

    rec = given_record(manifest)
    if rec is None:
        return None
    want = rec.get("weights_sha256")
    if reference is not None:
        ref = Path(reference)
        have = weights_sha256(ref)
        if have is not None and have == want:
            return ref
        source = (manifest or {}).get("source")
        built = source.get("weights_sha256") if isinstance(source, dict) else None
        if have is not None and have == built:
            return None  # the intermediate itself: the ordinary comparison
        raise CheckpointError(
            f"{ref}: its weights (sha256 {str(have)[:12]}…) are neither the checkpoint given "
            f"to optimize (sha256 {str(want)[:12]}…) nor the model the artifact was converted "
            f"from (sha256 {str(built)[:12]}…); pass the checkpoint given to optimize as "
            "--reference"
        )
    if rec.get("embedded"):
        return DEFAULT_MODEL
    found = find_recorded(rec, art)
    if found is None:
        raise CheckpointError(
            f"{art}: manifest.json records the checkpoint given to optimize as "
            f"{describe_recorded(rec, art)}; pass --reference CHECKPOINT (the checkpoint "
            "given to optimize)"
        )
    return found


def intermediate_checkpoint(
    art: Path, manifest: dict[str, Any], given: Path
) -> tuple[Path | None, str]:
    """(the checkpoint the artifact was converted from, if it can be reached, else None;
    one line saying which model the output grid compares with, or why it is skipped)."""
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.layout import find_recorded

    source = manifest.get("source")
    src = source if isinstance(source, dict) else {}
    rec = given_record(manifest) or {}
    sha = src.get("weights_sha256")
    if sha and sha == rec.get("weights_sha256"):
        return given, "output parity: against the given checkpoint itself (converted unchanged)"
    if src.get("embedded"):
        return DEFAULT_MODEL, "output parity: against the embedded model it was converted from"
    found = find_recorded(src, art)
    name = src.get("name") or "unknown"
    if found is not None:
        return found, (
            f"output parity: against the intermediate {src.get('relative_path')} ({name}), the "
            "model optimize converted (another depth, vocabulary or fine-tune than the given "
            "checkpoint)"
        )
    return None, (
        f"output parity skipped: the intermediate the artifact was converted from ({name}, "
        f"weights sha256 {str(sha)[:12]}…) is not reachable (optimize built it in its work "
        "directory or a temporary one); the metric is against the given checkpoint"
    )
