"""``EarlyExitRunner``: step the shared layer with ONNX Runtime, stop each row when its
policy says so.

Batch semantics (documented in ``docs/early-exit.md``, tested): **each row exits on its
own**. After layer ``k`` the exit head runs on the rows still active; rows the policy
stops keep exit ``k``'s logits and leave the batch, which is compacted (the hidden state
and the mask of the remaining rows are gathered) so that later layers only pay for the
rows still running. A row's result is therefore its own result, whichever rows it was
batched with, up to the float noise of a different batch shape (padding to the batch's
longest row, as in any batched run).

One ``InferenceSession`` per graph: the embedding graph once, then per layer the group's
step graph and the exit graph. The exit graph computes every exit's logits from the
shared pooler (each one a ``[H, labels]`` product, negligible beside a layer) and the
runner reads exit ``k``'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.early_exit.policy import ExitPolicy, Off, PolicyState
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


def read_index(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The artifact directory and its ``early_exit.json``; one line if it is not one."""
    from albert_edge.early_exit.artifact import FORMAT, INDEX

    root = Path(path)
    if root.is_file():
        root = root.parent
    index_path = root / INDEX
    try:
        index = json.loads(index_path.read_text())
    except (OSError, ValueError):
        raise AlbertEdgeError(
            f"{index_path}: not a dynamic-exit artifact (no readable {INDEX}); build one "
            "with albert_edge.early_exit.build_early_exit_artifact"
        ) from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise AlbertEdgeError(f"{index_path}: unknown format; expected {FORMAT}")
    return root, index


class EarlyExitRunner:
    """An ONNX dynamic-exit artifact: ``run(feeds, policy)`` → :class:`ExitResult`."""

    def __init__(self, path: str | Path, threads: int = 2) -> None:
        from albert_edge.onnx.runtime import OrtRunner

        self.root, self.index = read_index(path)
        self.num_exits = int(self.index["num_exits"])
        self.threads = threads
        self.embed = OrtRunner(self.root / self.index["embed"], threads)
        self.exits = OrtRunner(self.root / self.index["exits"], threads)
        steps = {name: OrtRunner(self.root / name, threads) for name in set(self.index["layers"])}
        self.layers = [steps[name] for name in self.index["layers"]]
        self.input_names = self.embed.input_names
        mask = next(i for i in self.layers[0].session.get_inputs() if i.name == "attention_mask")
        self._mask_dtype = "int32" if mask.type == "tensor(int32)" else "int64"
        self._exit_names = [f"logits_{k}" for k in range(1, self.num_exits + 1)]

    def _step(self, k: int, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        out = self.layers[k - 1].session.run(
            None, {"hidden_states": hidden, "attention_mask": mask}
        )
        return out[0]

    def _heads(self, hidden: np.ndarray) -> dict[str, np.ndarray]:
        values = self.exits.session.run(None, {"hidden_states": hidden})
        return dict(zip(self.exits.output_names, values, strict=True))

    def _start(self, feeds: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        if "attention_mask" not in feeds:
            raise AlbertEdgeError(
                f"{self.root}: a dynamic-exit run needs attention_mask (the steps read it); "
                f"given: {sorted(feeds)}"
            )
        hidden = self.embed.run(feeds)["hidden_states_out"]
        mask = np.ascontiguousarray(feeds["attention_mask"], dtype=self._mask_dtype)
        return hidden, mask

    def run(self, feeds: Mapping[str, np.ndarray], policy: ExitPolicy | None = None) -> ExitResult:
        """Run a batch under ``policy`` (None/:class:`Off`: every layer, the full model)."""
        import numpy as np

        policy = policy or Off()
        hidden, mask = self._start(feeds)
        rows = hidden.shape[0]
        state = PolicyState(policy, rows, self.num_exits)
        depth = np.zeros(rows, dtype=np.int64)
        logits: np.ndarray | None = None
        active = np.arange(rows)
        for k in range(1, self.num_exits + 1):
            hidden = self._step(k, hidden, mask)
            if k < self.num_exits and isinstance(policy, Off):
                continue
            head = self._heads(hidden)[self._exit_names[k - 1]]
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

        hidden, mask = self._start(feeds)
        per_exit = []
        for k in range(1, self.num_exits + 1):
            hidden = self._step(k, hidden, mask)
            per_exit.append(self._heads(hidden)[self._exit_names[k - 1]])
        return np.stack(per_exit, axis=1).astype(np.float32)
