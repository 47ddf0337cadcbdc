"""Exit policies: when a row may stop stepping the shared layer. Pure NumPy, no runtime.

Why one module: the ONNX Runtime and LiteRT runners, the benchmark's threshold search and
the Android core (``EarlyExit.java``, a line-for-line mirror) must take the same decision
from the same logits, so the rule lives here once and the Java port is checked against it
sentence by sentence (``tests/test_android_java.py``).

The rules, for one row, after exit ``k`` (1-based, the head after layer ``k``) of ``L``:

* :class:`Off` never exits early: the row runs all ``L`` layers and returns exit ``L``,
  which is the model's own pooler + classifier, so the result is the full-depth model's.
* :class:`Confidence` (DeeBERT-style): exit when the largest softmax probability of exit
  ``k``'s logits is ``>= threshold`` (:func:`max_probability`: the Android core's
  float32-rounded softmax, so Java and Python compute the same number).
* :class:`Patience` (PABEE, Zhou et al. 2020): exit when the argmax has not changed for
  ``patience`` consecutive steps, i.e. exits ``k - patience .. k`` all agree
  (``patience + 1`` heads). ``patience = t`` therefore never exits before layer ``t + 1``.

* :class:`FixedDepth` (timing only, not in the Java core): every row stops at exit ``k``,
  having computed every head on the way, as a row that a real policy stops there would.

Whatever the policy, the last exit always stops the row. Argmax ties go to the lowest
index (NumPy's and the Java loop's rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from albert_edge.errors import UnsupportedError

if TYPE_CHECKING:
    import numpy as np

POLICY_KINDS = ("off", "confidence", "patience", "depth")


@dataclass(frozen=True)
class Off:
    """Run every layer: equals the full-depth model."""

    kind: str = "off"

    def describe(self) -> str:
        return "off (full depth)"


@dataclass(frozen=True)
class Confidence:
    """Exit once max softmax probability >= ``threshold`` (in (0, 1])."""

    threshold: float
    kind: str = "confidence"

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise UnsupportedError(
                f"confidence threshold {self.threshold!r} must be in (0, 1]; e.g. 0.9"
            )

    def describe(self) -> str:
        return f"confidence >= {self.threshold:g}"


@dataclass(frozen=True)
class Patience:
    """Exit once the argmax has been unchanged for ``patience`` consecutive steps."""

    patience: int
    kind: str = "patience"

    def __post_init__(self) -> None:
        if not isinstance(self.patience, int) or self.patience < 1:
            raise UnsupportedError(f"patience {self.patience!r} must be an integer >= 1; e.g. 2")

    def describe(self) -> str:
        return f"patience {self.patience}"


@dataclass(frozen=True)
class FixedDepth:
    """Every row stops at exit ``depth``, computing every exit head on the way.

    Not a deployment policy (a truncated artifact does the same work with one call): it
    is how ``bench --recommend`` times what a row that exits at ``depth`` costs under
    confidence or patience (the same steps, the same head runs), so that a dynamic
    artifact's latency is the exit-depth mix on labelled rows times these timed costs.
    The Android core does not implement it.
    """

    depth: int
    kind: str = "depth"

    def __post_init__(self) -> None:
        if not isinstance(self.depth, int) or self.depth < 1:
            raise UnsupportedError(f"fixed exit depth {self.depth!r} must be an integer >= 1")

    def describe(self) -> str:
        return f"every row exits at {self.depth}"


ExitPolicy = Off | Confidence | Patience | FixedDepth


def parse_policy(text: str) -> ExitPolicy:
    """``off``, ``confidence:0.9`` or ``patience:2`` (the CLI and report spelling)."""
    kind, _, value = text.strip().partition(":")
    try:
        if kind == "off" and not value:
            return Off()
        if kind == "confidence":
            return Confidence(float(value))
        if kind == "patience":
            return Patience(int(value))
        if kind == "depth":
            return FixedDepth(int(value))
    except ValueError:
        pass
    raise UnsupportedError(
        f"unknown exit policy {text!r}; write off, confidence:TAU (e.g. confidence:0.9), "
        "patience:T (e.g. patience:2) or, for timing only, depth:K"
    )


def policy_to_dict(policy: ExitPolicy) -> dict[str, Any]:
    if isinstance(policy, Confidence):
        return {"kind": "confidence", "threshold": policy.threshold}
    if isinstance(policy, Patience):
        return {"kind": "patience", "patience": policy.patience}
    if isinstance(policy, FixedDepth):
        return {"kind": "depth", "depth": policy.depth}
    return {"kind": "off"}


def policy_text(policy: ExitPolicy) -> str:
    """The spelling :func:`parse_policy` reads back (what an artifact's index records)."""
    if isinstance(policy, Confidence):
        return f"confidence:{policy.threshold!r}"
    if isinstance(policy, Patience):
        return f"patience:{policy.patience}"
    if isinstance(policy, FixedDepth):
        return f"depth:{policy.depth}"
    return "off"


def max_probability(logits: np.ndarray) -> np.ndarray:
    """Largest softmax probability per row of ``[rows, labels]`` float32 logits.

    The Android core's rule (``Postprocess.softmax``): max-subtracted, in float64, summed
    left to right, rounded to float32, so that a one-ulp difference between libms' ``exp``
    cannot flip an exit decision between Python and Java.
    """
    import numpy as np

    x = np.asarray(logits, dtype=np.float32).astype(np.float64)
    exps = np.exp(x - x.max(axis=-1, keepdims=True))
    total = np.zeros(x.shape[:-1], dtype=np.float64)
    for j in range(x.shape[-1]):
        total = total + exps[..., j]
    return np.asarray(1.0 / total).astype(np.float32)


class PolicyState:
    """The per-row memory a policy needs between exits (the patience counters).

    ``step(k, logits)`` takes exit ``k``'s logits for the rows still active (in the order
    of ``rows``) and returns a boolean mask: which of them stop now.
    """

    def __init__(self, policy: ExitPolicy, num_rows: int, num_exits: int) -> None:
        import numpy as np

        self.policy = policy
        self.num_exits = num_exits
        self.last = np.full(num_rows, -1, dtype=np.int64)
        self.count = np.zeros(num_rows, dtype=np.int64)

    def step(self, k: int, logits: np.ndarray, rows: np.ndarray) -> np.ndarray:
        import numpy as np

        if k >= self.num_exits:
            return np.ones(len(rows), dtype=bool)
        policy = self.policy
        if isinstance(policy, Confidence):
            return np.asarray(max_probability(logits).astype(np.float64) >= policy.threshold)
        if isinstance(policy, Patience):
            pred = np.asarray(logits).argmax(axis=-1)
            same = pred == self.last[rows]
            self.count[rows] = np.where(same, self.count[rows] + 1, 0)
            self.last[rows] = pred
            return np.asarray(self.count[rows] >= policy.patience)
        if isinstance(policy, FixedDepth):
            return np.full(len(rows), k >= policy.depth, dtype=bool)
        return np.zeros(len(rows), dtype=bool)


def simulate(per_exit: np.ndarray, policy: ExitPolicy) -> tuple[np.ndarray, np.ndarray]:
    """Decisions from every exit's logits, ``[rows, L, labels]`` → (exit depth, logits).

    What a runner with ``policy`` returns, computed offline from all exits: the threshold
    search and the Java parity goldens use it; the runners' own loop must agree with it
    (tested).
    """
    import numpy as np

    rows, num_exits, _ = per_exit.shape
    state = PolicyState(policy, rows, num_exits)
    depth = np.zeros(rows, dtype=np.int64)
    out = np.zeros((rows, per_exit.shape[2]), dtype=np.float32)
    active = np.arange(rows)
    for k in range(1, num_exits + 1):
        stop = state.step(k, per_exit[active, k - 1], active)
        done = active[stop]
        depth[done] = k
        out[done] = per_exit[done, k - 1]
        active = active[~stop]
        if not len(active):
            break
    return depth, out
