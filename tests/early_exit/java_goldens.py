"""Golden per-exit logits and Python's exit decisions, for the Java core's parity check.

Python's side of ``EarlyExitParity.java`` (run by ``tests/test_android_java.py``): the
embedded trained model's dynamic-exit artifact (ONNX Runtime, fp32) gives every exit's
logits for every sentence, and the policy code the decisions Java must reproduce (the
runner's own loop is checked to take them on the first batches here, and on every row in
``tests/early_exit/test_onnx_early_exit.py``).
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
from albert_edge.tokenizer import AlbertTokenizer

POLICIES = ("off", "confidence:0.9", "confidence:0.99", "patience:1", "patience:2")
BATCH = 16


def build_trained_artifact(out: Path, train: Path, rows: int = 128) -> Path:
    """The embedded model with exit heads fitted on the first ``rows`` training rows."""
    ckpt = load_checkpoint(DEFAULT_MODEL)
    data = read_sst2(train)[:rows]
    heads = fit_exit_heads(ckpt, [t for _, t in data], [y for y, _ in data])
    build_early_exit_artifact(ckpt, out, heads, verify=False)  # verify: the ONNX tests
    return out


def write_goldens(artifact: Path, texts: list[str], golden: Path) -> dict[str, float]:
    """Write ``golden``; returns the mean depth per policy (so the test can check that the
    policies really exit early on some sentences)."""
    runner = EarlyExitRunner(artifact)
    tok = AlbertTokenizer(artifact / "spiece.model")
    batches = [tok.encode(texts[i : i + BATCH]).as_numpy() for i in range(0, len(texts), BATCH)]
    per_exit = np.concatenate([runner.all_exits(b) for b in batches])
    rows, exits, labels = per_exit.shape
    lines = [f"exits\t{exits}\t{labels}"]
    for r in range(rows):
        bits = struct.unpack(f"<{exits * labels}I", per_exit[r].astype("<f4").tobytes())
        lines.append("row\t" + ",".join(f"{b:08x}" for b in bits))
    means = {}
    check = batches[:4]  # the runner's own loop on a share of the batches: same decisions
    for spec in POLICIES:
        policy = parse_policy(spec)
        depth, logits = simulate(per_exit, policy)
        if not spec.startswith("confidence"):  # a fixed threshold may sit within float
            # noise of a row's probability; test_onnx_early_exit checks it at clear ones
            ran = np.concatenate([runner.run(b, policy).depth for b in check])
            assert ran.tolist() == depth[: len(ran)].tolist(), spec
        label = logits.argmax(axis=1)
        lines.append(f"policy\t{spec}\t{','.join(map(str, depth))}\t{','.join(map(str, label))}")
        means[spec] = float(depth.mean())
    golden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return means
