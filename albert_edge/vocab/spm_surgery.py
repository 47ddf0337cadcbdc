"""SentencePiece model surgery through its own protobuf (``sentencepiece_model_pb2``).

Why the protobuf and not a re-trained model: re-training would change scores and therefore
segmentations; removing pieces from the unigram model while leaving every other piece's
score, the normalizer spec and the trainer spec (bar ``vocab_size``) untouched keeps the
Viterbi search the same over a smaller candidate set. A sentence whose original best
segmentation uses only kept pieces therefore keeps that segmentation (ids remapped),
because the best path of a set is still the best path of any subset that contains it.

What must stay, whatever the corpus (:func:`mandatory_ids`):

- CONTROL, UNKNOWN and USER_DEFINED pieces (``<pad> <unk> [CLS] [SEP] [MASK]`` at ids 0-4,
  and ALBERT's ``( ) " - . – £ €``, which the fast tokenizer splits out before SentencePiece);
- every single-character piece, so any word the original tokenized without ``<unk>`` still
  has a segmentation into pieces that exist;
- BYTE pieces where the model has byte fallback (unknown characters then stay bytes);
- the lowest-scored NORMAL piece: every Unigram implementation (SentencePiece, the
  ``tokenizers`` library, :mod:`albert_edge.tokenizer`, the Java port) scores an unknown
  character as ``min_score - 10``; dropping the lowest piece would raise that penalty and
  change where ``<unk>`` wins.

Kept pieces stay in their original order, so new ids are monotone in old ids and the
special pieces keep ids 0-4.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from albert_edge.errors import TokenizerError


def pb() -> Any:
    """The generated protobuf module (typed Any: its stubs vary across protobuf releases)."""
    return importlib.import_module("sentencepiece.sentencepiece_model_pb2")


def read_model(path: Path) -> Any:
    """The ``ModelProto`` of ``path``; refused unless it is a unigram SentencePiece model."""
    m = pb()
    proto = m.ModelProto()
    try:
        proto.ParseFromString(path.read_bytes())
    except Exception as exc:  # protobuf's DecodeError, OSError
        raise TokenizerError(
            f"{path}: not a readable SentencePiece model ({type(exc).__name__}); "
            "restore the checkpoint's original spiece.model"
        ) from None
    if not len(proto.pieces):
        raise TokenizerError(f"{path}: SentencePiece model has no pieces")
    kind = proto.trainer_spec.model_type
    if kind != m.TrainerSpec.UNIGRAM:
        name = m.TrainerSpec.ModelType.Name(kind)
        raise TokenizerError(
            f"{path}: SentencePiece model type is {name}, not UNIGRAM; trim needs a unigram "
            "model (ALBERT's), whose scores decide segmentation"
        )
    return proto


def mandatory_ids(proto: Any) -> set[int]:
    """Pieces kept whatever the corpus (see the module docstring for why each)."""
    sp = pb().ModelProto.SentencePiece
    keep: set[int] = set()
    lowest: tuple[float, int] | None = None
    for i, p in enumerate(proto.pieces):
        if p.type in (sp.CONTROL, sp.UNKNOWN, sp.USER_DEFINED, sp.BYTE) or len(p.piece) == 1:
            keep.add(i)
        if p.type == sp.NORMAL and (lowest is None or p.score < lowest[0]):
            lowest = (p.score, i)
    if lowest is not None:
        keep.add(lowest[1])
    return keep


def trimmed_model(proto: Any, keep: Iterable[int]) -> tuple[Any, list[int]]:
    """(new ModelProto, ``old_ids``): the pieces in ``keep`` in original order, scores,
    types and every spec unchanged except ``trainer_spec.vocab_size``. ``old_ids[new] = old``."""
    old_ids = sorted(set(keep))
    out = pb().ModelProto()
    out.CopyFrom(proto)
    del out.pieces[:]
    for i in old_ids:
        out.pieces.append(proto.pieces[i])
    out.trainer_spec.vocab_size = len(old_ids)
    return out, old_ids


def id_map_sha256(old_ids: list[int]) -> str:
    """sha256 of the old id of each new id, comma separated: identifies the re-indexing."""
    return hashlib.sha256(",".join(map(str, old_ids)).encode()).hexdigest()
