"""What every benchmark script shares: the environment it runs in and where its data are.

Why one module: the same set-up was pasted into each script (TensorFlow off for the
transformers import, its log quiet, the Hugging Face hub offline, the SST-2 and
SentencePiece paths under ``../shared``); a change to one now reaches all. The package's
``__init__`` imports it, so ``python -m benchmarks.<name>`` sets the environment before
the script's own imports run.

The data (never read by tests) live under ``$ALBERT_EDGE_SHARED`` (default: ``shared/``
beside the repository): ``data/sst2/{train,dev}.tsv`` and
``data/albert/30k-clean.model``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("USE_TF", "0")  # transformers must not import TensorFlow
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every model here is local
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SHARED = Path(os.environ.get("ALBERT_EDGE_SHARED", ROOT.parent / "shared"))
DATA = SHARED / "data"
TRAIN = DATA / "sst2" / "train.tsv"
DEV = DATA / "sst2" / "dev.tsv"
SPIECE = DATA / "albert" / "30k-clean.model"
TRAINED = ROOT / "albert_edge" / "models" / "sst2-albert-tiny"  # the embedded model


def log(msg: str) -> None:
    """One progress line on stderr, with the wall-clock time."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_flag() -> str:
    """What ``grep -o -m1 'avx512_vnni\\|avx2' /proc/cpuinfo`` prints, one line: the flags of
    the two this CPU has, in the kernel's flag order ("avx2 avx512_vnni" on a VNNI machine,
    "avx2" on an AVX2-only one; "unknown" where neither or no /proc/cpuinfo). The name every
    figure's CPU class is given by, the same in every benchmark's report; the flags are
    read by :func:`albert_edge.kernels.host_cpu_flags`, as the library reads them."""
    from albert_edge.kernels import host_cpu_flags

    flags = host_cpu_flags()
    return " ".join(f for f in ("avx2", "avx512_vnni") if f in flags) or "unknown"
