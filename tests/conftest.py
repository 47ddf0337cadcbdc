"""Shared fixtures: paths to the test data, tiny random checkpoints, the trained model.

Everything a test reads ships in the repository (a user's clone has nothing beside it):
SST-2 under ``tests/data/sst2`` (provenance and licence: its README) and ALBERT's
SentencePiece model, which the embedded model carries as its ``spiece.model`` (the original
release's ``30k-clean.model``, byte for byte). No test reads ``../shared``: ``.ci/run``
runs the suite with it hidden.

Area-specific fixtures live in the test modules (or a conftest in a sub-folder) of the
area that needs them, so that parallel work on separate areas never edits this file.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
TRAINED = ROOT / "albert_edge" / "models" / "sst2-albert-tiny"
# ALBERT's 30k-clean.model (sha256 fefb02b6...0336): the embedded model ships it.
SPIECE = TRAINED / "spiece.model"
SST2_DEV = DATA / "sst2" / "dev.tsv"
SST2_TRAIN = DATA / "sst2" / "train.tsv"

# Keep test processes from oversubscribing the 2-core machines they run on.
os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture(scope="session")
def spiece_path() -> Path:
    assert SPIECE.is_file(), f"missing {SPIECE}: the embedded model's SentencePiece model"
    return SPIECE


@pytest.fixture(scope="session")
def sst2_dev() -> Path:
    assert SST2_DEV.is_file(), f"missing {SST2_DEV}: SST-2 dev ships in tests/data/sst2"
    return SST2_DEV


@pytest.fixture(scope="session")
def sst2_train() -> Path:
    assert SST2_TRAIN.is_file(), f"missing {SST2_TRAIN}: SST-2 train ships in tests/data/sst2"
    return SST2_TRAIN


@pytest.fixture(scope="session")
def trained_checkpoint() -> Path:
    assert (TRAINED / "config.json").is_file(), f"the trained fixture {TRAINED} is missing"
    return TRAINED


@pytest.fixture(scope="session")
def make_checkpoint(
    tmp_path_factory: pytest.TempPathFactory, spiece_path: Path
) -> Callable[..., Path]:
    """Factory: ``make_checkpoint(config="tiny", head="sequence-classification", **kw)``.

    Cached per argument set for the session, so many tests can share one random model.
    Never modify what it returns: copy it first.
    """
    from albert_edge.configs import make_random_checkpoint

    cache: dict[tuple[object, ...], Path] = {}

    def factory(config: str = "tiny", head: str = "sequence-classification", **kw: object) -> Path:
        key = (config, head, tuple(sorted(kw.items())))
        if key not in cache:
            out = tmp_path_factory.mktemp(f"ckpt-{config}-{head}")
            cache[key] = make_random_checkpoint(
                out,
                config,
                head=head,
                spiece_model=spiece_path,
                **kw,  # type: ignore[arg-type]
            )
        return cache[key]

    return factory


@pytest.fixture
def signals_not_ignored() -> Iterator[None]:
    """Under ``nohup`` or as a background job, SIGHUP / SIGINT arrive here ignored and the
    CLI would inherit that (and rightly keep it). A Python handler in this process is
    reset to the default in each child at exec, so the children see them as a user's
    shell would deliver them."""
    saved = {}
    for sig in (signal.SIGHUP, signal.SIGINT):
        if signal.getsignal(sig) == signal.SIG_IGN:
            saved[sig] = signal.signal(sig, lambda signum, frame: None)
    try:
        yield
    finally:
        for sig, previous in saved.items():
            signal.signal(sig, previous)


@pytest.fixture
def cpu_hog() -> Iterator[None]:
    """One busy-looping process per usable CPU for the test's length: start-up imports
    slow down as they do on a loaded machine, where a signal lands inside an import (what
    made the SIGTERM test of ``python -m albert_edge.train`` flaky)."""
    import subprocess
    import sys

    from albert_edge.options import usable_cpus

    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(usable_cpus())
    ]
    try:
        yield
    finally:
        for h in hogs:
            h.kill()
            h.wait()


@pytest.fixture(scope="session")
def pruned_checkpoint(
    tmp_path_factory: pytest.TempPathFactory, spiece_path: Path
) -> Callable[..., Path]:
    """Factory: ``pruned_checkpoint(config="tiny-groups", heads={flat layer: [removed]},
    ffn_keep=F, head="sequence-classification", **config_overrides)`` — a random checkpoint
    pruned by transformers itself into issue 54's contract (``tests/prune_utils.py``).

    Cached per argument set for the session. Never modify what it returns: copy it first.
    """
    from albert_edge.configs import make_config, make_random_checkpoint
    from tests.prune_utils import prune_checkpoint

    cache: dict[tuple[object, ...], Path] = {}

    def factory(
        config: str = "tiny-groups",
        heads: dict[int, list[int]] | None = None,
        ffn_keep: int | None = None,
        head: str = "sequence-classification",
        **overrides: object,
    ) -> Path:
        key = (
            config,
            tuple(sorted((k, tuple(v)) for k, v in (heads or {}).items())),
            ffn_keep,
            head,
            tuple(sorted(overrides.items())),
        )
        if key not in cache:
            root = tmp_path_factory.mktemp(f"pruned-{config}-{head}")
            src = make_random_checkpoint(
                root / "unpruned",
                make_config(config, **overrides),
                head=head,
                spiece_model=spiece_path,
            )
            cache[key] = prune_checkpoint(src, root / "pruned", heads, ffn_keep)
        return cache[key]

    return factory
