"""The comparisons a user reruns, one importable package (``python -m benchmarks.<name>``).

Each module times through :func:`albert_edge.bench.bench` (via :mod:`benchmarks.script_report`)
and writes JSON + Markdown into ``benchmarks/results/``; optimum peers come from one builder,
:func:`benchmarks.peers.build_optimum`. Finished investigations are frozen in
``benchmarks/studies/`` (see its README); CI machinery lives in ``tools/``. The set-up every
script shares (environment, data paths) is :mod:`benchmarks._setup`, imported here first.
"""

from benchmarks import _setup as _setup
