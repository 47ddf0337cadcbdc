"""What the TFLite graph-pass tests share: a tiny model given a trained model's LayerNorm γ,
the check that two files give the same outputs, bit for bit, and XNNPACK's partitions of
a file (:func:`litert_partitions`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np


def with_trained_gamma(model: Any) -> Any:
    """``model`` with every layer's LayerNorm γ moved off 1 (seeded), as training leaves it:
    the converter folds γ into the next layer's FCs, and storing each weight once puts one
    MUL by γ in front of Q, K and V, so they read one tensor."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("full_layer_layer_norm.weight"):
                p.add_(torch.randn_like(p) * 0.1)
    return model


def assert_same_bits(without: Path, with_: Path, lengths: tuple[int, ...] = (5, 16, 27)) -> None:
    """LiteRT (XNNPACK) outputs of both files equal bit for bit at each length, on a batch
    of one unpadded and one half-padded row (seeded ids)."""
    from albert_edge.tflite.runtime import LiteRTRunner

    a, b = LiteRTRunner(without), LiteRTRunner(with_)
    rng = np.random.default_rng(0)
    for seq in lengths:
        ids = rng.integers(5, 1000, (2, seq))
        mask = np.ones_like(ids)
        mask[1, seq // 2 :] = 0
        feeds = {"input_ids": ids, "attention_mask": mask}
        x, y = a.run(feeds), b.run(feeds)
        assert x.keys() == y.keys()
        assert all(np.array_equal(x[k], y[k]) for k in x), f"outputs differ at {seq} tokens"


def litert_partitions(path: Path, threads: int) -> dict[str, Any]:
    """XNNPACK's partitions of subgraph 0 and the ops it leaves to TFLite's kernels (moved
    here from the retired ``benchmarks/small_model_profile.py``, issue 53)."""
    from ai_edge_litert.interpreter import Interpreter

    report: dict[str, Any] = {}
    for single in (False, True):
        interp = Interpreter(
            str(path), num_threads=threads, experimental_disable_delegate_node_fusion=single
        )
        interp.allocate_tensors()
        w = interp._interpreter  # the node table (original nodes, then DELEGATE nodes)
        names = [w.NodeName(k) for k in range(w.NumNodes())]
        delegates = [k for k, n in enumerate(names) if n == "DELEGATE"]
        ops = [k for k, n in enumerate(names) if n != "DELEGATE"]
        if not single:
            report.update(
                ops=len(ops), partitions=len(delegates), by_op=Counter(names[k] for k in ops)
            )
            continue
        producer = {int(t): k for k in ops for t in w.NodeOutputs(k)}
        taken = {
            producer[int(t)] for d in delegates for t in w.NodeOutputs(d) if int(t) in producer
        }
        outside = [k for k in ops if k not in taken]
        report.update(
            delegated=len(taken),
            outside=dict(Counter(names[k] for k in outside)),
            outside_nodes=[f"#{k} {names[k]}" for k in outside],
        )
    report["by_op"] = dict(report["by_op"].most_common())
    return report
