"""Optional dependencies as pip extras, and the one-line error when one is missing.

Why: a user who only converts to ONNX should not install TensorFlow (~600 MB), optimum
or matplotlib. ``pip install albert-edge`` converts to ONNX; the routes that need more
name the extra to install, in one line, before any work starts:

* ``[tflite]`` — tensorflow-cpu, ai-edge-litert, ai-edge-quantizer, litert-torch
  (``--to tflite``, running/inspecting ``.tflite`` files, reading TF1 checkpoints);
* ``[peers]`` — optimum-onnx (the peer comparison in ``benchmarks/``);
* ``[plots]`` — matplotlib (``bench --plot`` and the benchmark figures);
* ``[plots]`` also draws ``optimize``'s front.png (a run without it says so before its
  first stage and writes the report without the figure);
* ``[ray]`` — ray (``--cluster`` only: ``convert --precision auto`` evaluations and
  ``optimize`` builds on an existing Ray cluster; both run on local processes without it);
* ``[all]`` — tflite, peers and plots: every command on one machine. Not ray: a driver
  must run its cluster's own Ray version, which ``[all]`` cannot know.

Only presence is checked (``importlib.util.find_spec``): nothing heavy is imported here.
"""

from __future__ import annotations

import importlib.util

from albert_edge.errors import AlbertEdgeError

# extra -> the import names its packages provide (keep in step with pyproject.toml).
EXTRAS: dict[str, tuple[str, ...]] = {
    "tflite": ("tensorflow", "ai_edge_litert", "ai_edge_quantizer", "litert_torch"),
    "peers": ("optimum",),
    "plots": ("matplotlib",),
    "ray": ("ray",),
}


class MissingExtraError(AlbertEdgeError):
    """A route needs an optional dependency group that is not installed."""


def missing(extra: str, modules: tuple[str, ...] | None = None) -> list[str]:
    """The import names of ``extra`` (or just ``modules`` of it) that cannot be found."""
    out = []
    for name in modules or EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(name)
    return out


def require(extra: str, what: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise :class:`MissingExtraError` naming ``pip install 'albert-edge[extra]'``.

    ``what`` says which route needs it ("--to tflite"); ``modules`` narrows the check to
    the packages that route imports.
    """
    absent = missing(extra, modules)
    if absent:
        raise MissingExtraError(
            f"{what} needs the [{extra}] extra ({', '.join(absent)} not installed); "
            f"pip install 'albert-edge[{extra}]'"
        )
