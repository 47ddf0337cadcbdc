"""Trimmed checkpoints: the pieces a deployment's text needs, re-indexed together.

Why a CHECKPOINT transform (as ``albert_edge.depth`` truncation is): the result is an
ordinary Hugging Face ALBERT directory with a smaller ``vocab_size``, so ``convert`` runs
on it unchanged for every target and precision, the size floor follows the new V from the
config, and every client reads the tokenizer files written from the trimmed
``spiece.model`` (transformers' converter builds ``tokenizer.json`` from it; LiteRT packs it
into the metadata; the Java port reads it).

What changes together, by one old-id list (``old_ids[new] = old``): the SentencePiece
pieces (:mod:`albert_edge.vocab.spm_surgery`), the word-embedding rows, and the MLM
decoder's rows and biases where the head has them. ``trim.json`` records what was kept,
the corpus's sha256, the held-out measurements and the id map's sha256.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.checkpoint import TRIM_FILE
from albert_edge.errors import AlbertEdgeError
from albert_edge.io import OutputKind
from albert_edge.manifest import dumps_strict

if TYPE_CHECKING:
    from albert_edge.checkpoint import Checkpoint
    from albert_edge.tasks import TaskData
    from albert_edge.tokenizer import AlbertTokenizer
    from albert_edge.vocab.corpus import Corpus


class TrimError(AlbertEdgeError):
    """A trim cannot be done as asked (too few pieces, bad coverage, bad rank)."""


# Tensors with one row per piece: re-indexed with the SentencePiece model.
ROW_TENSORS = (
    "albert.embeddings.word_embeddings.weight",
    "predictions.decoder.weight",
    "predictions.decoder.bias",
    "predictions.bias",
)
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
_FILES = {
    "config.json",
    "model.safetensors",
    "spiece.model",
    "truncation.json",
    TRIM_FILE,
    *_TOKENIZER_FILES,
}


def _trimmed_reason(path: Path) -> str | None:
    """Why ``path`` is not a trimmed checkpoint ``trim`` wrote, or ``None`` when it is: no
    ``trim.json``, or a file ``trim`` never writes beside it (named, so a user who added a
    file to a trimmed checkpoint learns which one)."""
    if not path.is_dir() or path.is_symlink():
        return "not a directory"
    if not (path / TRIM_FILE).is_file():
        return f"no {TRIM_FILE}"
    extra = sorted(p.name for p in path.iterdir() if p.name not in _FILES)
    if extra:
        more = f" and {len(extra) - 1} more" if len(extra) > 1 else ""
        return f"{extra[0]}{more}: not a file trim writes, beside its {TRIM_FILE}"
    return None


def _is_trimmed_checkpoint(path: Path) -> bool:
    return _trimmed_reason(path) is None


TRIMMED = OutputKind(
    "trimmed checkpoint", _is_trimmed_checkpoint, f"no {TRIM_FILE}", _trimmed_reason
)


@dataclass(frozen=True)
class TrimOptions:
    """``keep``: pieces in all; ``coverage``: share of the corpus's tokens to cover (at
    most one of the two; neither: every piece the corpus uses). ``embedding_rank``: also
    factor the word table to this rank (:mod:`albert_edge.vocab.rank`)."""

    keep: int | None = None
    coverage: float | None = None
    embedding_rank: int | None = None
    held_out: Path | None = None
    overwrite: bool = False
    refit_steps: int = 300
    max_drop: float | None = None  # held-out metric points (albert_edge.vocab.heldout)

    def __post_init__(self) -> None:
        if self.keep is not None and self.coverage is not None:
            raise TrimError("--keep and --coverage both given; pass one of them")
        if self.coverage is not None and not 0.0 < self.coverage <= 1.0:
            raise TrimError(f"--coverage {self.coverage} is not in (0, 1]; e.g. 0.99")
        if self.max_drop is not None and not 0.0 <= self.max_drop < 100.0:
            raise TrimError(f"--max-drop {self.max_drop} is not in [0, 100) metric points")


def count_pieces(tok: AlbertTokenizer, sentences: Iterable[str]) -> Counter[int]:
    """How often each piece id occurs in the tokenization of ``sentences``."""
    counts: Counter[int] = Counter()
    for ids in tokenize_all(tok, sentences):
        counts.update(ids)
    return counts


def tokenize_all(tok: AlbertTokenizer, sentences: Iterable[str]) -> list[list[int]]:
    """Piece ids of each sentence (no [CLS]/[SEP])."""
    return [tok.tokenize_ids(s) for s in sentences]


def choose_pieces(
    proto: Any, counts: Counter[int], keep: int | None = None, coverage: float | None = None
) -> set[int]:
    """The mandatory pieces, then the corpus's by frequency (ties: lower id first) up to
    ``keep`` pieces or ``coverage`` of the corpus's tokens; neither: all it uses."""
    from albert_edge.vocab.spm_surgery import mandatory_ids

    kept = mandatory_ids(proto)
    if keep is not None and keep < len(kept):
        raise TrimError(
            f"--keep {keep} is below the {len(kept)} pieces every trim keeps (special, "
            "user-defined, single-character and the lowest-scored piece); pass --keep "
            f"{len(kept)} or more"
        )
    total = sum(counts.values()) or 1
    covered = sum(c for i, c in counts.items() if i in kept)
    for i, c in sorted(counts.items(), key=lambda ic: (-ic[1], ic[0])):
        if i in kept:
            continue
        if keep is not None and len(kept) >= keep:
            break
        if coverage is not None and covered / total >= coverage:
            break
        kept.add(i)
        covered += c
    return kept


def segmentation_report(
    before: AlbertTokenizer,
    after: AlbertTokenizer,
    old_ids: Sequence[int],
    sentences: Sequence[str],
) -> dict[str, Any]:
    """How the trimmed tokenizer treats ``sentences`` (held-out text) against the original:
    the share of original tokens whose piece was kept, the share of sentences segmented
    exactly as before (ids remapped), and ``<unk>`` counts before and after."""
    new_of = {old: new for new, old in enumerate(old_ids)}
    tokens = kept_tokens = exact = 0
    unk_before = unk_after = 0
    for s in sentences:
        a = before.tokenize_ids(s)
        b = after.tokenize_ids(s)
        tokens += len(a)
        kept_tokens += sum(1 for i in a if i in new_of)
        unk_before += a.count(before.unk_id)
        unk_after += b.count(after.unk_id)
        exact += [new_of.get(i, -1) for i in a] == b
    n = len(sentences)
    return {
        "sentences": n,
        "tokens_before": tokens,
        "token_coverage": kept_tokens / tokens if tokens else 1.0,
        "exact_segmentation_share": exact / n if n else 1.0,
        "unk_before": unk_before,
        "unk_after": unk_after,
    }


def old_ids_of(before: AlbertTokenizer, after: AlbertTokenizer) -> list[int]:
    """``old_ids[new] = old`` for a trimmed tokenizer ``after`` of ``before`` (by piece)."""
    index = {before.sp.IdToPiece(i): i for i in range(before.vocab_size)}
    try:
        return [index[after.sp.IdToPiece(i)] for i in range(after.vocab_size)]
    except KeyError as exc:
        raise TrimError(
            f"{after.path}: piece {exc} is not in {before.path}; not a trim of that model"
        ) from None


def trimmed_state(ckpt: Checkpoint, old_ids: Sequence[int]) -> tuple[Any, dict[str, Any]]:
    """(config, state dict) with every per-piece tensor re-indexed to ``old_ids``; the
    tied decoder weight is left to the tie (it is the word table)."""
    import copy

    import torch

    cfg = copy.deepcopy(ckpt.config)
    cfg.vocab_size = len(old_ids)
    idx = torch.tensor(list(old_ids), dtype=torch.long)
    state: dict[str, Any] = {}
    tied = bool(getattr(cfg, "tie_word_embeddings", True))
    for key, t in ckpt.model.state_dict().items():
        if key == "predictions.decoder.weight" and tied:
            continue
        state[key] = t.index_select(0, idx).clone() if key in ROW_TENSORS else t
    return cfg, state


def held_out_task_data(
    corpus: str | Path, checkpoint: str | Path | None, options: TrimOptions
) -> TaskData | None:
    """The rows the held-out check scores, read against the model's config.json before
    it loads: ``--held-out`` when given (a task file the head cannot be scored on is
    refused), else the corpus (scored where it is a task file that fits the head). A
    ``--max-drop`` with nothing to score is refused here, in one line."""
    from albert_edge.vocab.heldout import scored_data

    given = options.held_out is not None
    file = options.held_out if options.held_out is not None else Path(corpus)
    flag = "--held-out" if given else "--corpus"
    data, why = scored_data(file, checkpoint, flag=flag, required=given)
    if data is None and options.max_drop is not None:
        raise TrimError(
            f"--max-drop {options.max_drop}: no held-out rows to score it on ({why}); pass "
            "--held-out with a labelled file of the model's task (e.g. its dev set)"
        )
    return data


def trim_checkpoint(
    checkpoint: str | Path | Checkpoint | None,
    corpus: str | Path,
    out: str | Path,
    options: TrimOptions | None = None,
) -> dict[str, Any]:
    """Write the trimmed checkpoint directory ``out`` (atomically); return its trim record.

    The result is loaded back (strictly, tokenizer checked against the config) before it
    is kept, so what is written is exactly what ``convert`` will read.
    """
    from albert_edge.checkpoint import Checkpoint, load_checkpoint
    from albert_edge.io import check_output
    from albert_edge.vocab.corpus import read_corpus
    from albert_edge.vocab.spm_surgery import read_model, trimmed_model

    options = options or TrimOptions()
    out = Path(out)
    inputs = [Path(checkpoint)] if isinstance(checkpoint, str | Path) else []
    check_output(out, overwrite=options.overwrite, inputs=inputs, kind=TRIMMED)
    source = None if isinstance(checkpoint, Checkpoint) else checkpoint
    where = checkpoint.path if isinstance(checkpoint, Checkpoint) else source
    scored = held_out_task_data(corpus, where, options)  # judged before the model loads
    text = read_corpus(corpus, options.held_out, scored=scored)
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
    before = ckpt.tokenizer()
    proto = read_model(before.path)
    fit_ids = tokenize_all(before, text.fit)
    counts: Counter[int] = Counter(i for ids in fit_ids for i in ids)
    kept = choose_pieces(proto, counts, options.keep, options.coverage)
    new_proto, old_ids = trimmed_model(proto, kept)
    cfg, state = trimmed_state(ckpt, old_ids)
    rank_record = None
    if options.embedding_rank is not None:
        from albert_edge.vocab.rank import factor_embedding

        cfg, state, rank_record = factor_embedding(
            ckpt,
            cfg,
            state,
            options.embedding_rank,
            fit_ids,
            text,
            before,
            old_ids,
            options.refit_steps,
        )
    return _write(ckpt, out, options, cfg, state, new_proto, old_ids, text, rank_record)


def _write(
    ckpt: Checkpoint,
    out: Path,
    options: TrimOptions,
    cfg: Any,
    state: dict[str, Any],
    new_proto: Any,
    old_ids: list[int],
    text: Corpus,
    rank_record: dict[str, Any] | None,
) -> dict[str, Any]:
    import hashlib

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.io import atomic_output_dir
    from albert_edge.layout import source_record, write_tokenizer_files
    from albert_edge.tokenizer import AlbertTokenizer
    from albert_edge.torch_model import write_weights
    from albert_edge.vocab.spm_surgery import id_map_sha256

    with atomic_output_dir(
        out, overwrite=options.overwrite, inputs=[ckpt.path], kind=TRIMMED
    ) as tmp:
        write_weights(tmp, cfg, ckpt.head, state)  # refuses any mismatch
        spiece = new_proto.SerializeToString()
        (tmp / "spiece.model").write_bytes(spiece)
        (tmp / "tokenizer_config.json").write_text(
            json.dumps({"do_lower_case": bool(ckpt.do_lower_case)}) + "\n"
        )
        if "truncation" in ckpt.extra_files:  # a depth-truncated source keeps its record
            shutil.copyfile(ckpt.extra_files["truncation"], tmp / "truncation.json")
        after = AlbertTokenizer(tmp / "spiece.model", do_lower_case=ckpt.do_lower_case)
        before = ckpt.tokenizer()
        record: dict[str, Any] = {
            "pieces_kept": len(old_ids),
            "of_pieces": before.vocab_size,
            "rule": _rule(options),
            "corpus": {"file": text.name, "sha256": text.sha256, "sentences": len(text.fit)},
            "held_out": {
                "from": text.held_out_from,
                **segmentation_report(before, after, old_ids, text.held_out),
            },
            "id_map_sha256": id_map_sha256(old_ids),
            "spiece_sha256": hashlib.sha256(spiece).hexdigest(),
            "source": source_record(ckpt),
        }
        if rank_record is not None:
            record["embedding_rank"] = rank_record
        (tmp / TRIM_FILE).write_text(dumps_strict(record, indent=2) + "\n")
        loaded = load_checkpoint(tmp)  # the directory loads as any checkpoint does
        if text.held_data is not None:  # the task's metric, paired with the untrimmed model
            from albert_edge.vocab.heldout import check_drop, compare

            record["held_out"]["metric"] = compare(loaded, ckpt, text.held_data)
            check_drop(record["held_out"]["metric"], options.max_drop, "the trimmed model")
            (tmp / TRIM_FILE).write_text(dumps_strict(record, indent=2) + "\n")
        with tempfile.TemporaryDirectory(prefix="albert-edge-trim-") as td:
            for name in write_tokenizer_files(loaded, Path(td)):
                if name in _TOKENIZER_FILES:
                    shutil.copyfile(Path(td) / name, tmp / name)
    return record


def _rule(options: TrimOptions) -> str:
    if options.keep is not None:
        return f"--keep {options.keep}"
    if options.coverage is not None:
        return f"--coverage {options.coverage}"
    return "every piece the corpus uses"
