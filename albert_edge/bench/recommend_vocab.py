"""``bench --recommend`` over the vocabulary size: trimmed checkpoints as more candidates.

For each asked vocabulary size (``--trim-corpus TEXT``: every piece the corpus uses, as
``albert-edge trim`` does by default; plus each ``--trim-keep N``) the checkpoint is trimmed
by the real trim code (:func:`albert_edge.vocab.trim.trim_checkpoint`) into the work
directory, and each asked (target, precision) is converted from the trimmed checkpoint,
exactly as ``convert`` converts any checkpoint (so it is verified against the trimmed
checkpoint, its size floor follows the new V, and its manifest carries the trim record).

**Judged like every other candidate.** A trimmed candidate is scored on the choose split
with its *own* tokenizer (the trimmed SentencePiece model: the text it will see in
deployment goes through it), paired with the untrimmed checkpoint on the same rows, timed
interleaved with the rest, and admitted by its precision's bar and the depth package's
rule (:class:`albert_edge.depth.Rule`, not restated here). So a trim that turns too much
held-out text into other pieces fails the rule, and one that keeps accuracy competes on
size and speed; the trim record (pieces kept, corpus sha256, held-out segmentation) rides
on each row.

Refused before any model loads (:func:`check_flags`): ``--trim-keep`` without
``--trim-corpus``, ``--trim-corpus`` without ``--data`` (nothing would admit a trimmed
candidate) or that is ``--data`` (the trim would have seen the rows that judge it), a
corpus the trim cannot read (:func:`albert_edge.vocab.corpus.read_sentences`), and a
``--trim-keep`` below the pieces every trim keeps (counted on the checkpoint's own
SentencePiece model, as the trim counts it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from albert_edge.errors import BenchmarkError


def parse_keeps(text: str) -> tuple[int, ...]:
    """``--trim-keep 8000,12000`` → (8000, 12000); whole numbers ≥ 1, duplicates dropped."""
    out: list[int] = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        try:
            n = int(item)
        except ValueError:
            raise BenchmarkError(
                f"--trim-keep: {item!r} is not a whole number of pieces; e.g. --trim-keep 8000"
            ) from None
        if n < 1:
            raise BenchmarkError(f"--trim-keep: {n} pieces; each size must be at least 1")
        if n not in out:
            out.append(n)
    if not out:
        raise BenchmarkError("--trim-keep is empty; name at least one size, e.g. 8000")
    return tuple(out)


def check_flags(
    trim_corpus: Path | None,
    trim_keep: Sequence[int],
    data: Path | None,
    checkpoint: str | Path | None,
) -> None:
    """Refuse, before any model loads, what cannot give a trimmed candidate a verdict."""
    if trim_keep and trim_corpus is None:
        raise BenchmarkError(
            "--trim-keep needs --trim-corpus: the sizes keep the corpus's most frequent pieces"
        )
    if trim_corpus is None:
        return
    if data is None:
        raise BenchmarkError(
            "--trim-corpus needs --data: trimmed candidates are admitted by their accuracy "
            "on the choose split"
        )
    if trim_corpus.exists() and data.exists() and trim_corpus.resolve() == data.resolve():
        raise BenchmarkError(
            f"{trim_corpus}: --trim-corpus is also --data; trim for other text (e.g. the "
            "training set) than the rows that choose and report, or the trim has seen them"
        )
    from albert_edge.vocab.corpus import read_sentences

    read_sentences(trim_corpus)  # missing, empty, not UTF-8, no text column: named
    if not trim_keep:
        return
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.vocab.spm_surgery import mandatory_ids, read_model

    spiece = Path(checkpoint if checkpoint is not None else DEFAULT_MODEL) / "spiece.model"
    if not spiece.is_file():
        return  # not a checkpoint directory: loading it names the problem
    least = len(mandatory_ids(read_model(spiece)))
    low = min(trim_keep)
    if low < least:
        raise BenchmarkError(
            f"--trim-keep {low} is below the {least} pieces every trim of {spiece.parent.name} "
            "keeps (special, user-defined, single-character and the lowest-scored piece); "
            f"pass sizes of {least} or more"
        )


def _tag(pieces: int) -> str:
    return f"vocab{pieces}"


def trim_record(record: Mapping[str, Any], where: Path) -> dict[str, Any]:
    """What a result row carries of a trim: pieces kept (of), the rule, the corpus's name
    and sha256, the held-out segmentation, and the trimmed checkpoint it was built from."""
    return {
        "pieces_kept": record["pieces_kept"],
        "of_pieces": record["of_pieces"],
        "rule": record["rule"],
        "corpus": dict(record["corpus"]),
        "held_out": dict(record["held_out"]),
        "checkpoint": str(where),
    }


def vocab_candidates(
    ckpt: Any,
    trim_corpus: Path,
    trim_keep: Sequence[int],
    candidates: Sequence[tuple[str, str]],
    build: Callable[..., tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Path]]]],
    work: Path,
    say: Callable[[str], None],
) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Path]], list[dict[str, Any]]]:
    """(rows, built artifacts, trims): every asked (target, precision) converted from the
    checkpoint trimmed to each vocabulary size (sizes that come out equal are built once).

    ``build(candidates, at_vocab=(trimmed checkpoint, pieces, row fields))`` converts
    (``recommend._build``)."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.vocab.trim import TrimOptions, trim_checkpoint

    rows: list[dict[str, Any]] = []
    built: list[tuple[dict[str, Any], Path]] = []
    trims: list[dict[str, Any]] = []
    seen: set[int] = set()
    for keep in (None, *trim_keep):
        where = work / ("trim-corpus" if keep is None else f"trim-keep{keep}")
        say(f"recommend: trimming the vocabulary for {trim_corpus.name} ({keep or 'all'}) ...")
        record = trim_checkpoint(ckpt, trim_corpus, where, TrimOptions(keep=keep))
        pieces = int(record["pieces_kept"])
        if pieces in seen or pieces >= int(ckpt.config.vocab_size):
            why = "already a candidate" if pieces in seen else "not smaller than the checkpoint"
            trims.append({**trim_record(record, where), "skipped": why})
            continue
        seen.add(pieces)
        fields = {"vocab": trim_record(record, where)}
        trims.append(fields["vocab"])
        r, b = build(candidates, at_vocab=(load_checkpoint(where), pieces, fields))
        rows += r
        built += b
    return rows, built, trims


def add_vocab(
    ckpt: Any,
    *,
    trim_corpus: str | Path | None,
    trim_keep: Sequence[int],
    candidates: Sequence[tuple[str, str]],
    build: Callable[..., tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Path]]]],
    work: Path,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """``rows``, ``built`` (scored and timed like the rest), ``info`` (the trims, for the
    printout) and ``rule`` (the depth package's, which then judges every candidate); all
    empty, ``info`` and ``rule`` None, without ``trim_corpus``."""
    if trim_corpus is None:
        return {"rows": [], "built": [], "info": None, "rule": None}
    from albert_edge.depth import Rule

    rows, built, trims = vocab_candidates(
        ckpt, Path(trim_corpus), trim_keep, candidates, build, work, say
    )
    rule = Rule()
    info = {
        "corpus": str(trim_corpus),
        "sizes": [t["pieces_kept"] for t in trims if "skipped" not in t],
        "of_pieces": int(ckpt.config.vocab_size),
        "trims": trims,
        "rule_text": rule.describe().replace("full depth", "the checkpoint"),
    }
    return {"rows": rows, "built": built, "info": info, "rule": rule}


def format_vocab(result: Mapping[str, Any]) -> list[str]:
    """Per trim: pieces kept of V, the held-out segmentation, and each trimmed candidate's
    verdict (the rule on the choose split against the untrimmed checkpoint)."""
    info = result["vocabulary"]
    lines = [
        f"vocabulary x precision: trimmed for {Path(info['corpus']).name}; rule on the choose "
        f"split vs the untrimmed checkpoint: {info['rule_text']}"
    ]
    for t in info["trims"]:
        h = t["held_out"]
        lines.append(
            f"  {t['pieces_kept']} of {t['of_pieces']} pieces ({t['rule']}): held-out token "
            f"coverage {100 * h['token_coverage']:.2f} %, {100 * h['exact_segmentation_share']:.2f}"
            f" % segment as before, <unk> {h['unk_before']} -> {h['unk_after']}"
            + (f"; skipped: {t['skipped']}" if t.get("skipped") else "")
        )
    for r in result["candidates"]:
        if r.get("vocab") is None:
            continue
        verdict = "eligible" if r.get("eligible") else f"not eligible: {r.get('why_not')}"
        d = r.get("delta_vs_checkpoint")
        delta = f"{d['points']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]" if d else "-"
        lines.append(f"    {r['name']}: Δ pts {delta}  {verdict}")
    return lines
