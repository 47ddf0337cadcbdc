"""Hostile batch sizes to ``bench`` (issue 26): a batch × length whose activations no
machine can hold is refused before anything is tokenized, loaded or timed, in one line
naming the batch, the length and the GiB (tests/hostile/judge.py says what each case
asserts besides).

Before the bound, ``bench --batch 1000000000`` died of a MemoryError traceback while
tokenizing a billion sentences; a batch the parent could still tokenize would have grown
its child until the kernel killed it. ``no_import`` proves "before the model loads" as a
fact (no runtime was imported), the 30 s timeout that it is refused quickly.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.hostile.files import MAKERS
from tests.hostile.judge import Case, params, run_case

B = ("bench", "{art}", "--backend", "ort-cpu", "--runs", "2", "--warmup", "0")
# 10**15 sequences of 128 tokens: zettabytes of activations for even the tiny model, so
# the case holds on any machine; the 1 beside it must not hide the largest point.
HUGE = str(10**15)
RUNTIMES = ("torch", "onnxruntime", "transformers")

CASES = [
    Case(
        "bench:batch-beyond-memory",
        (*B, "--batch", f"1,{HUGE}"),
        2,
        rf"batch {HUGE} at sequence length 128 needs at least [\d,.]+ GiB of memory "
        r"for activations, [\d.]+ GiB is available; use a smaller --batch",
        no_import=RUNTIMES,
        timeout=30,
    ),
    Case(
        "bench:batch-beyond-memory-longest-length",
        (*B, "--batch", HUGE, "--seq-lens", "8,64"),
        2,
        rf"batch {HUGE} at sequence length 64 needs",
        no_import=RUNTIMES,
        timeout=30,
    ),
    Case(
        "bench:batch-beyond-memory-rounds",
        (*B, "--batch", HUGE, "--rounds", "2"),
        2,
        rf"batch {HUGE} at sequence length 128 needs",
        no_import=RUNTIMES,
        timeout=30,
    ),
]


@pytest.mark.parametrize("case", params(CASES))
def test_bench_refuses_a_batch_no_memory_holds(
    case: Case, tmp_path: Path, hostile_shared: dict[str, Path]
) -> None:
    start = time.monotonic()
    run_case(case, tmp_path, hostile_shared, MAKERS)
    # the bound is read from config.json: a second, however loaded the machine, not the
    # minutes a tokenizer or a child process would take to fail
    assert time.monotonic() - start < 20


def test_past_the_positions_a_huge_batch_is_a_skipped_row_not_a_crash(
    tmp_path: Path, hostile_shared: dict[str, Path]
) -> None:
    """Lengths past the model's positions are skipped rows: never bounded, tokenized or
    given a roofline GEMM (a 10**15-row token array, or a GEMM of 10**20 rows, used to
    crash the parent or the roofline child). Nothing is measured: exit 1, one line."""
    case = Case(
        "bench:batch-huge-length-past-positions",
        (*B, "--batch", HUGE, "--seq-lens", "100000"),
        1,
        "nothing was measured",
        no_import=("torch", "transformers"),
        timeout=60,
    )
    run_case(case, tmp_path, hostile_shared, MAKERS)
