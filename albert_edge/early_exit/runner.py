"""``EarlyExitRunner``: step the shared layer with ONNX Runtime, stop each row when its
policy says so.

Batch semantics (documented in ``docs/early-exit.md``, tested): **each row exits on its
own**. After layer ``k`` the exit head runs on the rows still active; rows the policy
stops keep exit ``k``'s logits and leave the batch, which is compacted (the hidden state
and the mask of the remaining rows are gathered) so that later layers only pay for the
rows still running. A row's result is therefore its own result, whichever rows it was
batched with, up to the float noise of a different batch shape (padding to the batch's
longest row, as in any batched run).

One ``run`` per step: step ``k`` returns the next hidden state and exit ``k``'s logits
(the shared pooler and one ``[H, labels]`` product, negligible beside a layer; under
policy off they are computed and ignored until the last step). One ``InferenceSession``
per graph, shared by every position that graph runs (``exit_index`` says which exit
head; the last position reads ``model_logits``, the model's own head).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.early_exit.index import read_index
from albert_edge.early_exit.policy import ExitPolicy, Off, PolicyState, parse_policy
from albert_edge.errors import AlbertEdgeError

if TYPE_CHECKING:
    import numpy as np


@dataclass
class ExitResult:
    """Per row: the logits it returned and the exit (= layers run) that produced them."""

    logits: np.ndarray
    depth: np.ndarray

    @property
    def layers_run(self) -> int:
        """Layer evaluations summed over rows (what the policy saved, against rows × L)."""
        return int(self.depth.sum())


class EarlyExitRunner:
    """An ONNX dynamic-exit artifact: ``run(feeds, policy)`` → :class:`ExitResult`."""

    def __init__(self, path: str | Path, threads: int = 2) -> None:
        from albert_edge.onnx.runtime import OrtRunner

        self.root, self.index = read_index(path)
        self.num_exits = int(self.index["num_exits"])
        self.threads = threads
        paths = self.index["steps"]
        self.first = OrtRunner(self.root / paths[0], threads)
        # one session per graph, shared by the positions it runs (hot weights, one pool)
        sessions = {paths[0]: self.first.session}
        for rel in paths[1:]:
            if rel not in sessions:
                sessions[rel] = OrtRunner(self.root / rel, threads).session
        self.steps = [sessions[rel] for rel in paths]
        self._token_dtypes = {
            i.name: "int32" if i.type == "tensor(int32)" else "int64"
            for i in self.first.session.get_inputs()
            if i.name != "exit_index"
        }
        self.embed = self.first  # what callers read the token inputs and length limit from
        self.input_names = tuple(n for n in self.first.input_names if n != "exit_index")
        mask = next(i for i in self.steps[-1].get_inputs() if i.name == "attention_mask")
        self._mask_dtype = "int32" if mask.type == "tensor(int32)" else "int64"
        # the artifact's own run-time default ("policy" in the index; absent: off)
        self.policy: ExitPolicy = parse_policy(str(self.index.get("policy", "off")))

    def _step(
        self, k: int, hidden: np.ndarray | None, mask: np.ndarray, feeds: Mapping[str, Any]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Step ``k``: (the next hidden state, exit ``k``'s logits), one session run."""
        import numpy as np

        index = {"exit_index": np.asarray(min(k, self.num_exits - 1) - 1, dtype=np.int64)}
        if k == 1:
            missing = [n for n in self._token_dtypes if n not in feeds]
            if missing:
                raise AlbertEdgeError(
                    f"{self.root}: the model needs input(s) {missing} that were not given; "
                    f"given: {sorted(feeds)}"
                )
            step = {
                n: np.ascontiguousarray(feeds[n], dtype=t) for n, t in self._token_dtypes.items()
            }
            step.update(index)
        else:
            assert hidden is not None, "steps after the first take the previous hidden state"
            step = {"hidden_states": hidden, "attention_mask": mask, **index}
        last = "model_logits" if k == self.num_exits else "logits"
        hidden_out, logits = self.steps[k - 1].run(["hidden_states_out", last], step)
        return hidden_out, np.asarray(logits, dtype=np.float32)

    def _mask(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import numpy as np

        if "attention_mask" not in feeds:
            raise AlbertEdgeError(
                f"{self.root}: a dynamic-exit run needs attention_mask (the steps read it); "
                f"given: {sorted(feeds)}"
            )
        return np.ascontiguousarray(feeds["attention_mask"], dtype=self._mask_dtype)

    def run(self, feeds: Mapping[str, np.ndarray], policy: ExitPolicy | None = None) -> ExitResult:
        """Run a batch under ``policy`` (None: the artifact's recorded policy, which is
        :class:`Off` — every layer, the full model — unless the index names another)."""
        import numpy as np

        policy = policy or self.policy
        mask = self._mask(feeds)
        hidden: np.ndarray | None = None
        rows = mask.shape[0]
        state = PolicyState(policy, rows, self.num_exits)
        depth = np.zeros(rows, dtype=np.int64)
        logits: np.ndarray | None = None
        active = np.arange(rows)
        for k in range(1, self.num_exits + 1):
            hidden, head = self._step(k, hidden, mask, feeds)
            if k < self.num_exits and isinstance(policy, Off):
                continue
            if logits is None:
                logits = np.zeros((rows, head.shape[1]), dtype=np.float32)
            stop = state.step(k, head, active)
            logits[active[stop]] = head[stop]
            depth[active[stop]] = k
            if stop.all():
                break
            if stop.any():
                keep = ~stop
                active, hidden, mask = active[keep], hidden[keep], mask[keep]
        assert logits is not None
        return ExitResult(logits, depth)

    def all_exits(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        """Every exit's logits, ``[rows, L, labels]``: what thresholds are chosen from."""
        import numpy as np

        mask = self._mask(feeds)
        hidden: np.ndarray | None = None
        per_exit = []
        for k in range(1, self.num_exits + 1):
            hidden, head = self._step(k, hidden, mask, feeds)
            per_exit.append(head)
        return np.stack(per_exit, axis=1).astype(np.float32)


class PolicyRunner:
    """An early-exit artifact as a :class:`albert_edge.runtime.Runner`: ``run(feeds)`` →
    ``{"logits", "exit_depth"}`` under the artifact's recorded policy.

    Why: ``open_runner`` is how the benchmark harness (and anything else written against
    the Runner protocol) loads an artifact, so a dynamic-exit directory can be timed
    interleaved beside one-graph artifacts without a harness of its own.
    """

    output_names = ("logits", "exit_depth")

    def __init__(self, path: str | Path, threads: int = 2, backend: str = "auto") -> None:
        if backend not in ("auto", "cpu"):
            raise AlbertEdgeError(
                f"{path}: a dynamic-exit artifact runs on ONNX Runtime's CPU provider only, "
                f"not {backend!r}"
            )
        self.runner = EarlyExitRunner(path, threads)
        self.path = self.runner.root
        self.input_names = tuple(self.runner.input_names)
        self.max_seq_len = int(self.runner.embed.max_seq_len)
        self.policy = self.runner.policy

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        result = self.runner.run(feeds)
        return {"logits": result.logits, "exit_depth": result.depth}


def open_any_runner(path: str | Path, threads: int = 2, backend: str = "auto") -> Any:
    """:func:`albert_edge.runtime.open_runner`, or a :class:`PolicyRunner` for a
    dynamic-exit artifact (its directory or ``early_exit.json``).

    Why here and not in ``open_runner``: the runtime layer sits below this package, so the
    callers that may meet either kind (the benchmark worker, ``bench --recommend``) ask
    here instead.
    """
    from albert_edge.early_exit.index import INDEX, is_early_exit
    from albert_edge.runtime import model_file, open_runner

    p = Path(path)
    if is_early_exit(p) or p.name == INDEX:  # a missing early_exit.json: the manifest says so
        model_file(p)  # the manifest's check: inside the artifact, sha256 as recorded
        return PolicyRunner(p, threads=threads, backend=backend)
    return open_runner(p, threads=threads, backend=backend)
