"""Process-wide framework settings every entry point (CLI, bench worker) applies first.

Why its own module: the bench worker process needs the same settings as the CLI, and a
worker importing the CLI put the bottom layer on top of the top one.
"""

from __future__ import annotations


def quiet_frameworks() -> None:
    """Keep transformers from importing TensorFlow (it does whenever TF is installed).

    albert-edge never uses transformers' TF classes (its TF route builds Keras layers
    itself), and importing TF costs seconds and a screen of C++ log lines per process.
    ``setdefault``: a user's explicit ``USE_TF``/``TF_CPP_MIN_LOG_LEVEL`` wins.
    """
    import logging
    import os
    import warnings

    os.environ.setdefault("USE_TF", "0")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Import-time chatter of transformers' optional torchao integration (CUDA kernels
    # that a CPU build cannot load) and of torch's pytree deprecations: not actionable.
    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=r".*LeafSpec.*", category=FutureWarning)
