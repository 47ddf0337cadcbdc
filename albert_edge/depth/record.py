"""The depth search's record: its split, its per-depth evidence and its heads.

One layout for every head the search serves (:mod:`albert_edge.depth.search`): each
depth's evidence names the metric it was scored in (:class:`HeldOutMetric`: accuracy for
a sequence classifier, entity F1 for a token head, SQuAD F1 for a span head), so the
rule, ``depth truncate`` and ``convert --depth`` read one layout. Records written before
the metric was named (``held_out_accuracy`` and ``metric`` fields, ``accuracy`` in the
report) are read by :func:`score_from_dict` and :func:`upgrade_reference`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from albert_edge.depth.features import DepthError
from albert_edge.depth.stats import DEFAULT_RESAMPLES, MIN_BOOTSTRAP_ROWS
from albert_edge.errors import TooFewRowsError


@dataclass(frozen=True)
class SplitSettings:
    """How many labelled rows fit the heads and how many score them (seeded split).

    With fewer rows than ``fit_rows + held_out_rows``, a quarter (at most
    ``held_out_rows``) is held out and the rest fits.
    """

    fit_rows: int = 20000
    held_out_rows: int = 5000
    seed: int = 27
    max_length: int = 128
    resamples: int = DEFAULT_RESAMPLES


@dataclass(frozen=True)
class HeldOutMetric:
    """A metric on the held-out split: its name (the task's primary metric, or accuracy
    for a sequence classifier) and its value (a fraction: 0.01 = 1 point)."""

    name: str
    value: float


@dataclass
class DepthScore:
    """One depth's evidence on the held-out split (fractions; 0.01 = 1 point), in the
    metric ``held_out_metric`` names."""

    depth: int
    head: str  # "refit": a head fitted after this layer; "own": the model's own head
    groups_kept: int
    held_out_metric: HeldOutMetric
    delta: float  # the metric − the full-depth model's, same examples
    delta_low: float
    delta_high: float
    fit_metric: float | None = None  # the same metric on the fit split
    report: dict[str, Any] | None = None  # on report data: metric + intervals (never chosen on)

    @property
    def metric(self) -> str:
        """The name of the metric every number of this score is in."""
        return self.held_out_metric.name

    @property
    def value(self) -> float:
        """The held-out metric's value."""
        return self.held_out_metric.value


def score_from_dict(d: dict[str, Any]) -> DepthScore:
    """A :class:`DepthScore` from its JSON, also as written before the metric was named
    (``held_out_accuracy`` + ``metric``, ``fit_accuracy``; a report's ``accuracy``)."""
    d = dict(d)
    if "held_out_accuracy" in d:
        d["held_out_metric"] = {
            "name": d.pop("metric", "accuracy"),
            "value": d.pop("held_out_accuracy"),
        }
    if "fit_accuracy" in d:
        d["fit_metric"] = d.pop("fit_accuracy")
    held = d["held_out_metric"]
    d["held_out_metric"] = HeldOutMetric(str(held["name"]), float(held["value"]))
    if isinstance(d.get("report"), dict):
        d["report"] = _upgrade_report(d["report"], d["held_out_metric"].name)
    return DepthScore(**d)


def upgrade_reference(ref: dict[str, Any]) -> dict[str, Any]:
    """A search's ``reference`` in this layout, also as written before the metric was
    named (``held_out_accuracy`` + ``metric``; a report's ``accuracy``)."""
    ref = dict(ref)
    if "held_out_accuracy" in ref:
        ref["held_out_metric"] = {
            "name": ref.pop("metric", "accuracy"),
            "value": ref.pop("held_out_accuracy"),
        }
    if isinstance(ref.get("report"), dict):
        ref["report"] = _upgrade_report(ref["report"], ref["held_out_metric"]["name"])
    return ref


def _upgrade_report(rep: dict[str, Any], metric: str) -> dict[str, Any]:
    if "accuracy" not in rep or "value" in rep:
        return rep
    rep = dict(rep)
    rep["value"] = rep.pop("accuracy")
    rep.setdefault("metric", metric)
    return rep


@dataclass
class DepthSearch:
    """A finished search: its evidence (JSON) and its heads (tensors, by depth)."""

    source: dict[str, Any]
    config: dict[str, int]
    data: dict[str, Any]
    settings: dict[str, Any]
    reference: dict[str, Any]  # the unchanged model at full depth on the held-out split
    scores: list[DepthScore]
    representable: list[int]
    heads: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)
    # What the search was made from (checkpoint identity, data sha256): its seal.json's
    # made_from (albert_edge.sealed), checked before a reader uses the heads.
    made_from: dict[str, Any] = field(default_factory=dict, repr=False)

    def score(self, depth: int, head: str = "refit") -> DepthScore:
        for s in self.scores:
            if s.depth == depth and s.head == head:
                return s
        raise DepthError(
            f"the depth search has no {head} head at depth {depth}; searched depths: "
            + ", ".join(str(s.depth) for s in self.scores if s.head == head)
        )

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k not in ("heads", "made_from")}
        d["format"] = "albert-edge-depth-search/1"
        return d


def bits(correct: Any) -> str:
    """A 0/1 vector as a string of '0'/'1' (JSON-compact): the reference's per-row
    correctness, kept so that artifacts scored later pair with it row by row."""
    return "".join("1" if c else "0" for c in correct)


def unbits(text: str) -> Any:
    import numpy as np

    return np.frombuffer(text.encode(), dtype=np.uint8) == ord("1")


# The fewest held-out rows a depth is chosen on: the held-out split is what the paired
# bootstrap resamples, so its minimum is the bootstrap's (docs/depth.md).
MIN_HELD_OUT_ROWS = MIN_BOOTSTRAP_ROWS


def split_sizes(n: int, s: SplitSettings) -> tuple[int, int, str | None]:
    """(fit rows, held-out rows, note): what :func:`split_rows` draws from ``n`` rows.

    With fewer rows than asked, a quarter (at most ``held_out_rows``) is held out and the
    rest fits, and the note says so in words (printed, and kept in the search's record):
    a size is never shrunk silently. Fewer than :data:`MIN_HELD_OUT_ROWS` held-out rows
    is refused, naming the minimum."""
    note = None
    enough = n >= s.fit_rows + s.held_out_rows
    held = s.held_out_rows if enough else min(s.held_out_rows, n // 4)
    fit = min(s.fit_rows, n - held)
    if not enough:
        note = (
            f"asked for {s.fit_rows} fit + {s.held_out_rows} held-out rows, the data has {n}: "
            f"fitting on {fit}, holding out {held}"
        )
    if held < MIN_HELD_OUT_ROWS:
        need = 4 * MIN_HELD_OUT_ROWS
        raise TooFewRowsError(
            f"{held} held-out rows cannot choose a depth: a depth search needs at least "
            f"{MIN_HELD_OUT_ROWS} held-out rows (the bootstrap's minimum); "
            + (
                f"pass --held-out-rows {MIN_HELD_OUT_ROWS} or more"
                if n >= s.fit_rows + MIN_HELD_OUT_ROWS
                else f"give at least {need} labelled rows"
            )
        )
    if fit < 1:
        raise TooFewRowsError(f"{n} labelled rows leave no row to fit the heads on")
    return fit, held, note


def split_rows(n: int, s: SplitSettings) -> tuple[list[int], list[int]]:
    """(fit, held-out) row indices: a seeded permutation, disjoint by construction."""
    import numpy as np

    fit, held, _ = split_sizes(n, s)
    perm = np.random.default_rng(s.seed).permutation(n).tolist()
    return perm[:fit], perm[fit : fit + held]


# The config dimensions a search records (what its heads were fitted for).
_DIMS = (
    "num_hidden_layers",
    "num_hidden_groups",
    "inner_group_num",
    "hidden_size",
    "embedding_size",
    "num_labels",
)
