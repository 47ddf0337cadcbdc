"""Interleaved rounds (albert_edge.bench.interleave) against real resident ORT children:
the visit order, the pooled statistics, and a child that dies or never loads. Nothing
here asserts a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def _spec(model: Path, feeds: dict[int, Path]) -> dict[str, Any]:
    return {
        "mode": "bench",
        "backend": "ort-cpu",
        "format": "onnx",
        "device": "cpu",
        "runner_backend": "cpu",
        "target_path": str(model),
        "threads": 1,
        "shapes": [{"batch": 1, "seq_len": s, "feeds": str(f)} for s, f in feeds.items()],
    }


@pytest.fixture
def feeds(tiny_onnx: Path, tmp_path: Path) -> dict[int, Path]:
    import numpy as np

    from albert_edge.bench.inputs import make_feeds
    from albert_edge.bench.targets import resolve_target

    t = resolve_target(tiny_onnx)
    out = {}
    for seq in (8, 16):
        out[seq] = tmp_path / f"feeds-{seq}.npz"
        np.savez(out[seq], **make_feeds(t, ["a fine film", "dull"], 1, seq))  # type: ignore[arg-type]
    return out


POLICY = {"warmup": 1, "runs": 2}


def test_visits_alternate_and_samples_pool(
    tiny_onnx: Path, feeds: dict[int, Path], tmp_path: Path
) -> None:
    """Two artifacts, two shapes, two rounds: the parent alternates artifacts at every
    shape, the first to go rotating; each row pools both rounds' samples."""
    from albert_edge.bench.interleave import measure_interleaved
    from albert_edge.bench.worker import summarize

    order: list[int] = []
    spec = _spec(tiny_onnx, feeds)
    got = measure_interleaved(
        [(spec, 1), (spec, 1)],
        tmp_path,
        rounds=2,
        policy=POLICY,
        timeout_s=300,
        keep_samples=True,
        gap_s=0.0,
        on_visit=order.append,
    )
    assert order == [0, 1, 1, 0, 0, 1, 1, 0]
    for worker in got:
        assert worker["status"] == "ok" and worker["load_ms"] > 0
        assert [(r["batch"], r["seq_len"]) for r in worker["shapes"]] == [(1, 8), (1, 16)]
        for r in worker["shapes"]:
            assert r["status"] == "ok" and len(r["samples_ms"]) == 4
            assert r["latency_ms"] == summarize(r["samples_ms"])
            assert r["warmup_runs"] == 2 and r["peak_rss_bytes"] > 0


def test_a_child_that_dies_fails_only_its_own_rows(
    tiny_onnx: Path, feeds: dict[int, Path], tmp_path: Path
) -> None:
    """One child loses its input file after its first visit and dies on the next; a file
    that is not a model never loads. Both fail with the child's own reason, no partial
    statistics; the healthy artifact is still timed in every round."""
    import shutil

    from albert_edge.bench.interleave import measure_interleaved

    own = {s: tmp_path / f"own-{s}.npz" for s in feeds}
    for s, f in feeds.items():
        shutil.copyfile(f, own[s])
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx model")

    def on_visit(i: int) -> None:
        if i == 1:
            own[16].unlink(missing_ok=True)

    got = measure_interleaved(
        [(_spec(tiny_onnx, feeds), 1), (_spec(tiny_onnx, own), 1), (_spec(bad, feeds), 1)],
        tmp_path,
        rounds=2,
        policy=POLICY,
        timeout_s=300,
        gap_s=0.0,
        on_visit=on_visit,
    )
    healthy, died, broken = got
    assert [r["status"] for r in healthy["shapes"]] == ["ok", "ok"]
    assert all("samples_ms" not in r for r in healthy["shapes"])  # not asked to keep them
    assert [r["status"] for r in died["shapes"]] == ["failed", "failed"]
    assert all("exited with status" in r["reason"] for r in died["shapes"])
    assert all("latency_ms" not in r for r in died["shapes"])
    assert broken["status"] == "failed" and "load failed" in broken["reason"]
    assert broken["shapes"] == []


def test_the_deadline_is_per_wait_not_per_life(
    tiny_onnx: Path, feeds: dict[int, Path], tmp_path: Path
) -> None:
    """A child that hangs on a visit (its input is a FIFO nobody writes) is killed after
    ``timeout_s`` and fails its rows; the healthy child, alive for longer than
    ``timeout_s`` in all, is not: the deadline bounds each wait, not a resident's life."""
    import os
    import time

    from albert_edge.bench.interleave import measure_interleaved

    fifo = tmp_path / "never-written.npz"
    os.mkfifo(fifo)
    timeout = 12.0
    t0 = time.monotonic()
    hung, healthy = measure_interleaved(
        [(_spec(tiny_onnx, {8: fifo}), 1), (_spec(tiny_onnx, feeds), 1)],
        tmp_path,
        rounds=2,
        policy=POLICY,
        timeout_s=timeout,
        gap_s=0.0,
    )
    assert time.monotonic() - t0 > timeout  # the healthy child outlived one deadline
    assert [r["status"] for r in hung["shapes"]] == ["failed"]
    assert "timed out after 12 s" in hung["shapes"][0]["reason"]
    assert [r["status"] for r in healthy["shapes"]] == ["ok", "ok"]
