"""Golden per-exit logits and Python's exit decisions, for the Java core's parity check.

Python's side of ``EarlyExitParity.java`` (run by ``tests/test_android_java.py``): the
embedded trained model's dynamic-exit artifact (ONNX Runtime, fp32) gives every exit's
logits for every sentence; the runner's own loop gives the decisions Java must reproduce.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from albert_edge.checkpoint import DEFAULT_MODEL, load_checkpoint
from albert_edge.data import read_sst2
from albert_edge.early_exit import (
    EarlyExitRunner,
    build_early_exit_artifact,
    fit_exit_heads,
    parse_policy,
    simulate,
)

POLICIES = ("off", "confidence:0.9", "confidence:0.99", "patience:1", "patience:2")
BATCH = 16


def build_trained_artifact(out: Path, train: Path, rows: int = 128) -> Path:
    """The embedded model with exit heads fitted on the first ``rows`` training rows."""
    ckpt = load_checkpoint(DEFAULT_MODEL)
    data = read_sst2(train)[:rows]
    heads = fit_exit_heads(ckpt, [t for _, t in data], [y for y, _ in data])
    build_early_exit_artifact(ckpt, out, heads)
    return out


def write_goldens(artifact: Path, texts: list[str], golden: Path) -> dict[str, float]:
    """Write ``golden``; returns the mean depth per policy (so the test can check that the
    policies really exit early on some sentences)."""
    runner = EarlyExitRunner(artifact)
    tok = load_checkpoint(DEFAULT_MODEL).tokenizer()
    batches = [tok.encode(texts[i : i + BATCH]).as_numpy() for i in range(0, len(texts), BATCH)]
    per_exit = np.concatenate([runner.all_exits(b) for b in batches])
    rows, exits, labels = per_exit.shape
    lines = [f"exits\t{exits}\t{labels}"]
    for r in range(rows):
        bits = struct.unpack(f"<{exits * labels}I", per_exit[r].astype("<f4").tobytes())
        lines.append("row\t" + ",".join(f"{b:08x}" for b in bits))
    means = {}
    for spec in POLICIES:
        policy = parse_policy(spec)
        results = [runner.run(b, policy) for b in batches]  # the runner's own loop
        depth = np.concatenate([r.depth for r in results])
        label = np.concatenate([r.logits.argmax(axis=1) for r in results])
        want_depth, want_logits = simulate(per_exit, policy)  # same decisions, offline
        assert depth.tolist() == want_depth.tolist(), spec
        assert label.tolist() == want_logits.argmax(axis=1).tolist(), spec
        lines.append(f"policy\t{spec}\t{','.join(map(str, depth))}\t{','.join(map(str, label))}")
        means[spec] = float(depth.mean())
    golden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return means
