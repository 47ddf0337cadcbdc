"""What the stages hand the candidates: one frozen, typed record of a run's inputs.

The split, the fine-tune, the depth searches and the trimmed vocabularies each leave
files in the work directory; :class:`RunContext` names them (and the identity of the
sealed record each came from, which keys every candidate built on them), with the
flags a build needs. It crosses into the build workers (spawned processes, Ray tasks)
as it is: plain paths, strings and numbers, picklable. :func:`candidate_source` finds a
candidate's checkpoint and depth search in a work directory from what a report records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert_edge.optimize.plan import PRUNE_STAGES, VOCAB_STAGES, Candidate
from albert_edge.prune.plan import heads_from_json, heads_json, heads_label


@dataclass(frozen=True)
class VocabSource:
    """A checkpoint a stage made from the searched model: a trimmed vocabulary (``trim``:
    as the trim left it; ``heal``: after the healing fine-tune) or the pruned checkpoint;
    its own depth search (its heads read its states), and the identity of that search's
    sealed record."""

    checkpoint: Path
    search: Path
    id: str


@dataclass(frozen=True)
class PrunedLayer:
    """One shared layer of a pruned checkpoint (its flat index, ``group * inner_group_num
    + inner``): the heads it keeps (original numbering) and its FFN neurons kept."""

    layer: int
    heads_kept: tuple[int, ...]
    ffn_kept: int


@dataclass(frozen=True)
class PruneSummary:
    """What the prune stage removed: heads and FFN neurons kept per shared layer (one
    FFN count for every layer, each its own which; one head count or one per layer), of
    how many; the encoder FLOPs factor at 128 tokens; which weights were kept (healed or
    not)."""

    heads_keep: int | tuple[int, ...]
    of_heads: int
    ffn_keep: int
    of_ffn: int
    layers: tuple[PrunedLayer, ...]
    flops_ratio: float | None
    healed: str

    def to_json(self) -> dict[str, Any]:
        return {
            "heads_keep": heads_json(self.heads_keep),
            "of_heads": self.of_heads,
            "ffn_keep": self.ffn_keep,
            "of_ffn": self.of_ffn,
            "layers": {
                str(x.layer): {"heads_kept": list(x.heads_kept), "ffn_kept": x.ffn_kept}
                for x in self.layers
            },
            "flops_ratio": self.flops_ratio,
            "healed": self.healed,
        }

    @classmethod
    def from_json(cls, rec: Mapping[str, Any]) -> PruneSummary:
        layers = tuple(
            PrunedLayer(int(k), tuple(int(h) for h in v["heads_kept"]), int(v["ffn_kept"]))
            for k, v in sorted((rec.get("layers") or {}).items(), key=lambda kv: int(kv[0]))
        )
        ratio = rec.get("flops_ratio")
        return cls(
            heads_keep=heads_from_json(rec["heads_keep"]),
            of_heads=int(rec["of_heads"]),
            ffn_keep=int(rec["ffn_keep"]),
            of_ffn=int(rec["of_ffn"]),
            layers=layers,
            flops_ratio=None if ratio is None else float(ratio),
            healed=str(rec.get("healed", "")),
        )

    def describe(self) -> str:
        """One line: the counts kept, per layer which heads, the FLOPs factor."""
        which = "; ".join(
            f"layer {x.layer}: heads {list(x.heads_kept)}, FFN {x.ffn_kept}" for x in self.layers
        )
        flops = f", encoder FLOPs x{self.flops_ratio:.3f}" if self.flops_ratio is not None else ""
        return (
            f"heads {heads_label(self.heads_keep)}/{self.of_heads} and FFN "
            f"{self.ffn_keep}/{self.of_ffn} "
            f"per shared layer ({which}){flops}; {self.healed}"
        )


@dataclass(frozen=True)
class RunContext:
    """A run's inputs to every candidate build.

    ``given``: the checkpoint the user gave (None: the embedded model), what every
    candidate is scored against; ``fit`` / ``choose`` / ``report``: the split's files (in
    ``--data``'s format), ``reference_choose`` / ``reference_report`` the given model's
    saved outputs on the held ones; ``base``: the fine-tuned model (else ``given``) and
    ``search`` its depth search; ``trim`` / ``heal``: the trimmed vocabularies that ran;
    ``pruned``: the pruned checkpoint where its stages ran, ``prune`` what it removed.
    The ``*_id`` fields are the sealed records' identities (``inputs_sha256``)."""

    given: Path | None
    target: str
    objective: str
    seq_len: int
    max_drop: float
    min_lower_bound: float
    layers: int
    fit: Path
    choose: Path
    choose_rows: int
    report: Path
    reference_choose: Path
    reference_report: Path
    split: str
    base: Path | None = None
    base_id: str | None = None
    search: Path | None = None
    search_id: str | None = None
    corpus: Path | None = None
    trim: VocabSource | None = None
    heal: VocabSource | None = None
    pruned: VocabSource | None = None
    prune: PruneSummary | None = None

    def held(self, part: str) -> Path:
        """The file of a held part: ``choose`` or ``report``."""
        return {"choose": self.choose, "report": self.report}[part]

    def reference(self, part: str) -> Path:
        """The given model's saved outputs on a held part."""
        return {"choose": self.reference_choose, "report": self.reference_report}[part]

    def vocab(self, name: str) -> VocabSource | None:
        """A trimmed vocabulary by its candidate name, None where its stages did not run."""
        return {"trim": self.trim, "heal": self.heal}.get(name)

    def derived(self, c: Candidate) -> VocabSource | None:
        """The stage-made checkpoint ``c`` builds from (pruned, or a trimmed vocabulary),
        None for the searched or the given model."""
        return self.pruned if c.pruned else self.vocab(c.vocab)

    def identity(self) -> dict[str, Any]:
        """What every candidate's sealed inputs hold of the run: the split, the searched
        model and its depth search, and the flags the build reads."""
        return {
            "split": self.split,
            "base_id": self.base_id,
            "search_id": self.search_id,
            "target": self.target,
            "objective": self.objective,
            "seq_len": self.seq_len,
        }


def candidate_source(
    work: Path, spec: Candidate | Mapping[str, Any], given: Path | None
) -> tuple[Path | None, Path]:
    """(the checkpoint a candidate was converted from before any truncation, the depth
    search that truncates it) in a work directory: what ``verify --reference`` and
    ``depth truncate`` take to rebuild it. ``spec``: the candidate, or its spec as the
    report records it (``vocab``, ``source``); ``given``: the checkpoint optimize was
    given."""
    c = spec if isinstance(spec, Candidate) else Candidate.from_spec(spec)
    stages = Path(work) / "stages"
    if c.pruned:
        model, search = PRUNE_STAGES
        return stages / model / "model", stages / search / "search"
    if c.vocab in VOCAB_STAGES:
        model, search = VOCAB_STAGES[c.vocab]
        return stages / model / "model", stages / search / "search"
    tuned = stages / "finetune" / "model"
    source = tuned if c.source == "base" and tuned.is_dir() else given
    return source, stages / "depth" / "search"
