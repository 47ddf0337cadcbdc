"""albert-edge: ship a trained ALBERT to the edge without losing what makes it small.

Public API (the CLI is a thin layer over exactly these):

- :func:`load_checkpoint` — HF directory or original TF1 checkpoint → PyTorch model
- :func:`account` — ALBERT structure accounting of a checkpoint (``inspect`` on checkpoints)
- :func:`convert` — checkpoint → ONNX / TFLite artifact directory (``albert_edge.convert``
  is the module, callable as the function: the import system binds the submodule over
  the name, so one object serves ``from albert_edge import convert`` in any import order)
- :func:`verify` — an artifact against its PyTorch reference: the output grid and, with
  data, the task's metric on both (``albert_edge.verify`` is the module, callable as the
  function, as ``convert`` is)
- :class:`AlbertTokenizer` — ALBERT tokenization over sentencepiece
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from albert_edge.version import __version__

__all__ = [
    "AlbertEdgeError",
    "AlbertTokenizer",
    "Checkpoint",
    "ConvertOptions",
    "__version__",
    "account",
    "convert",
    "load_checkpoint",
    "verify",
]

from albert_edge.errors import AlbertEdgeError
from albert_edge.options import ConvertOptions

if TYPE_CHECKING:
    from albert_edge.accounting import account
    from albert_edge.checkpoint import Checkpoint, load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.tokenizer import AlbertTokenizer
    from albert_edge.verify import verify

_LAZY = {
    "account": "albert_edge.accounting",
    "Checkpoint": "albert_edge.checkpoint",
    "load_checkpoint": "albert_edge.checkpoint",
    "convert": "albert_edge.convert",
    "AlbertTokenizer": "albert_edge.tokenizer",
    "verify": "albert_edge.verify",
}


# Public names that are also submodules: the module itself (callable as the function) is
# what the name means, before and after the import system binds it.
_SUBMODULES = {"convert", "verify"}


def __getattr__(name: str) -> Any:
    """Import public names lazily so ``import albert_edge`` stays instant (no torch/TF)."""
    if name in _LAZY:
        import importlib

        module = importlib.import_module(_LAZY[name])
        return module if name in _SUBMODULES else getattr(module, name)
    raise AttributeError(f"module 'albert_edge' has no attribute {name!r}")
