"""The work directory and what each stage does, through the levers' public APIs.

Every stage and every candidate writes into its own directory under the work directory,
then a ``stage.json`` (its result and the sha256 of its inputs: files by content, earlier
stages by their records) sealed with :mod:`albert_edge.sealed`. A rerun finds a sealed
record whose inputs match and reads it instead of working; anything else of ours there
(a stage a stop interrupted, a record of other inputs) is removed and done again. Seeds
are fixed and every torch computation here runs on one thread, so a resumed run ends
with the bytes an uninterrupted one writes.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError
from albert_edge.sealed import EvidenceKind, checkpoint_identity, data_identity

RECORD = "stage.json"
WORK_MARK = "optimize-work.json"
STAGE = EvidenceKind(
    "optimize stage", RECORD, "run albert-edge optimize again with the same --work-dir"
)
SEED = 27
THREADS = 1  # every torch and ONNX Runtime computation of a stage: the same bytes anywhere


class OptimizeError(AlbertEdgeError):
    """A stage cannot run, or a work directory is not one optimize made."""


# --- the work directory ----------------------------------------------------------------


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def file_id(path: str | Path | None) -> str | None:
    """Content identity of an input: a checkpoint directory (config and weights) or a file."""
    if path is None:
        return checkpoint_identity(None)
    p = Path(path)
    return checkpoint_identity(p) if p.is_dir() else data_identity(p)


@dataclass(frozen=True)
class Work:
    root: Path

    def check(self) -> None:
        """Refuse a directory optimize did not make (no mark, not empty): never written into."""
        if self.root.exists() or self.root.is_symlink():
            if self.root.is_symlink() or not self.root.is_dir():
                raise OptimizeError(
                    f"{self.root}: --work-dir exists and is not a directory; give a new one"
                )
            if any(self.root.iterdir()) and not (self.root / WORK_MARK).is_file():
                raise OptimizeError(
                    f"{self.root}: --work-dir holds files albert-edge optimize did not write "
                    f"(no {WORK_MARK}); give an empty or new directory"
                )

    def open(self) -> None:
        """Create the directory, or accept one optimize made (its mark); refuse others."""
        mark = self.root / WORK_MARK
        self.check()
        self.root.mkdir(parents=True, exist_ok=True)
        if not mark.is_file():
            mark.write_text(json.dumps({"made_by": "albert-edge optimize"}) + "\n")

    def dir(self, group: str, name: str) -> Path:
        return self.root / group / name

    def cached(self, group: str, name: str, inputs: Mapping[str, Any]) -> dict[str, Any] | None:
        """The sealed record of ``group/name`` made from ``inputs``, else None."""
        from albert_edge.sealed import sealed_reason

        d = self.dir(group, name)
        if not (d / RECORD).is_file() or sealed_reason(d, STAGE) is not None:
            return None
        rec: dict[str, Any] = json.loads((d / RECORD).read_text(encoding="utf-8"))
        return rec if rec.get("inputs_sha256") == digest(inputs) else None

    def begin(self, group: str, name: str) -> Path:
        """A fresh temporary directory for ``group/name`` (what a stop left is removed)."""
        final = self.dir(group, name)
        tmp = final.with_name(f".{name}.tmp")
        for d in (tmp, final):  # ours: an interrupted stage, or one of other inputs
            shutil.rmtree(d, ignore_errors=True)
        tmp.mkdir(parents=True)
        return tmp

    def finish(
        self, group: str, name: str, inputs: Mapping[str, Any], result: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Write the record into the temporary directory, seal it, move it into place."""
        from albert_edge.sealed import seal

        final = self.dir(group, name)
        tmp = final.with_name(f".{name}.tmp")
        rec = {"name": name, "inputs": dict(inputs), "inputs_sha256": digest(inputs), **result}
        rec.pop("cached", None)
        (tmp / RECORD).write_text(json.dumps(rec, indent=2, sort_keys=True, default=str) + "\n")
        seal(tmp, STAGE, {"inputs_sha256": rec["inputs_sha256"]})
        tmp.rename(final)
        rec["cached"] = False
        return rec

    def run(
        self,
        group: str,
        name: str,
        inputs: Mapping[str, Any],
        fn: Callable[[Path], dict[str, Any]],
    ) -> dict[str, Any]:
        """``fn(directory)`` once for these inputs: sealed with its record, or read back."""
        rec = self.cached(group, name, inputs)
        if rec is not None:
            rec["cached"] = True
            return rec
        tmp = self.begin(group, name)
        return self.finish(group, name, inputs, fn(tmp))


# --- split -------------------------------------------------------------------------------


def read_rows(data: Path, checkpoint: Path | None) -> Any:
    """``data`` through the task layer, checked against the model (single sentences or
    pairs with class labels): the depth and exit levers serve sequence classifiers."""
    from albert_edge.early_exit.command import read_rows as read

    return read(data, checkpoint, command="optimize")


def split_sizes(n: int) -> tuple[int, int, int]:
    """(fit, choose, report): a quarter each (at most 2,000) to choose and to report, the
    rest to fit (fine-tune, depth heads, exit heads)."""
    held = min(2000, n // 4)
    return n - 2 * held, held, held


MIN_HELD = 30  # every paired interval needs 30 rows (docs/depth.md, "Minimums")
MIN_FIT = 64  # train --init refuses fewer


def check_rows(n: int, data: Path) -> None:
    fit, held, _ = split_sizes(n)
    if held < MIN_HELD or fit < MIN_FIT:
        raise OptimizeError(
            f"{data}: {n} labelled rows; optimize chooses on a quarter and reports on "
            f"another (each at least {MIN_HELD} rows) and fits on the rest (at least "
            f"{MIN_FIT}): give at least {max(4 * MIN_HELD, 2 * MIN_HELD + MIN_FIT + 2)} rows"
        )


def write_subset(src: Path, rows: Any, indices: Sequence[int], out: Path) -> None:
    """The lines of ``src`` holding ``indices`` (in that order), after its header lines:
    the same format the task layer read, so every lever reads the split as the file."""
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    first = min(ex.line for ex in rows.examples)
    body = [lines[rows.examples[i].line - 1] for i in indices]
    body = [b if b.endswith("\n") else b + "\n" for b in body]
    out.write_text("".join(lines[: first - 1] + body), encoding="utf-8")


def split_stage(
    data: Path, checkpoint: Path | None, max_len: int
) -> Callable[[Path], dict[str, Any]]:
    def run(d: Path) -> dict[str, Any]:
        rows = read_rows(data, checkpoint)
        n = len(rows.examples)
        check_rows(n, data)
        order = list(range(n))
        random.Random(SEED).shuffle(order)
        _, held, _ = split_sizes(n)
        parts = {
            "choose": order[:held],
            "report": order[held : 2 * held],
            "fit": order[2 * held :],
        }
        for name, idx in parts.items():
            write_subset(data, rows, idx, d / f"{name}.tsv")
        for name in ("choose", "report"):
            held_rows = read_rows(d / f"{name}.tsv", checkpoint)
            reference_logits(checkpoint, held_rows, max_len, d / f"reference-{name}.npy")
        return {"rows": {k: len(v) for k, v in parts.items()}, "seed": SEED}

    return run


# --- the levers ----------------------------------------------------------------------------


def finetune_stage(
    checkpoint: Path | None, fit: Path, rows: int
) -> Callable[[Path], dict[str, Any]]:
    """``train --init CKPT --exit-loss pabee --distil`` on the fit rows (teacher: CKPT)."""

    def run(d: Path) -> dict[str, Any]:
        from albert_edge.layout import DEFAULT_MODEL
        from albert_edge.learn import FineTune, HeldOut, fine_tune

        # the epoch is chosen on a tenth of the fit rows, at least the 32 its interval needs
        n = min(rows, len(read_rows(fit, checkpoint).examples))
        ft = FineTune(
            init=Path(checkpoint) if checkpoint is not None else DEFAULT_MODEL,
            out=d / "model",
            train=fit,
            epochs=1,
            max_train_rows=rows,
            exit_loss="pabee",
            distil=True,
            held_out=HeldOut(fraction=min(0.5, max(0.1, 33 / max(1, n)))),
            threads=THREADS,
            device="cpu",
            command="albert-edge optimize (fine-tune with exits and distillation)",
        )
        summary = fine_tune(ft)
        return {"checkpoint": "model", "evidence": summary.get("evidence")}

    return run


def depth_stage(checkpoint: Path | None, fit: Path) -> Callable[[Path], dict[str, Any]]:
    def run(d: Path) -> dict[str, Any]:
        from albert_edge.depth import save_search, search_depths
        from albert_edge.verify import torch_threads

        with torch_threads(THREADS):
            search = search_depths(checkpoint, fit)
        save_search(search, d / "search")
        return {
            "search": "search",
            "scores": [
                {"depth": s.depth, "head": s.head, "delta": s.delta, "low": s.delta_low}
                for s in search.scores
            ],
        }

    return run


def trim_stage(checkpoint: Path | None, corpus: Path) -> Callable[[Path], dict[str, Any]]:
    def run(d: Path) -> dict[str, Any]:
        from albert_edge.vocab.trim import trim_checkpoint

        rec = trim_checkpoint(checkpoint, corpus, d / "model")
        return {"checkpoint": "model", "trim": rec}

    return run


def heal_stage(
    trimmed: Path, teacher: Path | None, data: Path, steps: int
) -> Callable[[Path], dict[str, Any]]:
    """The healing fine-tune of :mod:`albert_edge.vocab` (distillation from the untrimmed
    model on the trimmed segmentation) on the fit rows' text."""

    def run(d: Path) -> dict[str, Any]:
        from albert_edge.vocab.heal import heal  # type: ignore[import-not-found,unused-ignore]

        heal(trimmed, teacher, data, d / "model", steps=steps, seed=13, threads=THREADS)
        return {"checkpoint": "model", "steps": steps}

    return run


# --- scoring -------------------------------------------------------------------------------


def task_rows(split: Path, checkpoint: Path | None) -> Any:
    return read_rows(split, checkpoint)


def reference_logits(checkpoint: Path | None, rows: Any, max_len: int, out: Path) -> None:
    """The given model's logits in PyTorch on ``rows``, saved once (``out``, .npy): what
    every candidate is paired against."""
    import numpy as np

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.tasks import encode, run_features
    from albert_edge.verify import run_reference, torch_threads

    ckpt = load_checkpoint(checkpoint)
    feats = encode(rows, ckpt.tokenizer(), max_len)
    with torch_threads(THREADS):
        outs = run_features(feats, lambda feeds: {"logits": run_reference(ckpt, feeds)["logits"]})
    np.save(out, np.stack([np.asarray(x, dtype=np.float32) for x in outs["logits"]]))


def reference_metrics(checkpoint: Path | None, rows: Any, max_len: int, saved: Path) -> Any:
    """The metrics of the saved reference logits on ``rows``."""
    import numpy as np

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.tasks import encode, score

    feats = encode(rows, load_checkpoint(checkpoint).tokenizer(), max_len)
    logits = np.load(saved)
    return score(rows, feats, {"logits": list(logits)})


def artifact_metrics(artifact: Path, rows: Any, max_len: int) -> Any:
    """The artifact as shipped (its own tokenizer, its recorded exit policy) on ``rows``."""
    from albert_edge.early_exit.runner import open_any_runner
    from albert_edge.tasks import encode, run_features, score
    from albert_edge.verify import artifact_tokenizer

    runner = open_any_runner(artifact, threads=THREADS)
    try:
        names = set(runner.input_names)
        feats = encode(rows, artifact_tokenizer(artifact), min(max_len, int(runner.max_seq_len)))

        def fn(feeds: Any) -> Any:
            return {"logits": runner.run({k: v for k, v in feeds.items() if k in names})["logits"]}

        outs = run_features(feats, fn)
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            close()
    return score(rows, feats, outs)


def compare(candidate: Any, reference: Any) -> dict[str, Any]:
    """The candidate's primary metric minus the reference's, paired 95 % interval, points."""
    from albert_edge.tasks import paired_metric_interval

    iv = paired_metric_interval(candidate, reference)
    return {
        "metric": reference.primary,
        "value": float(candidate.value),
        "reference": float(reference.value),
        "delta": float(iv.delta),
        "low": float(iv.low),
        "high": float(iv.high),
        "rows": int(reference.examples),
    }
