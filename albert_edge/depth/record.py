"""The depth search's record: its split, its per-depth evidence and its heads.

Shared by the classification search (:mod:`albert_edge.depth.search`) and the token /
span search (:mod:`albert_edge.depth.task_search`), so both write one layout that the
rule, ``depth truncate`` and ``convert --depth`` read.
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


@dataclass
class DepthScore:
    """One depth's evidence on the held-out split (fractions; 0.01 = 1 point)."""

    depth: int
    head: str  # "refit": a head fitted after this layer; "own": the model's own head
    groups_kept: int
    held_out_accuracy: float
    delta: float  # accuracy − full-depth model's accuracy, same rows
    delta_low: float
    delta_high: float
    fit_accuracy: float | None = None
    report: dict[str, Any] | None = None  # on report data: accuracy + intervals (never chosen on)
    # the metric the held_out_accuracy / fit_accuracy / delta fields hold: accuracy for a
    # classifier, the task's primary metric (entity F1, SQuAD F1) for a token or span head
    metric: str = "accuracy"


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
