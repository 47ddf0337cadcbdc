"""The albert-edge version, in a module of its own.

Why its own module: the manifest, the model card, the TFLite metadata and the ONNX
exporter stamp the version into what they write; importing it from the package face
(``albert_edge/__init__.py``, which names the checkpoint, convert and accounting APIs)
would put every one of them in a circle with those APIs. pyproject.toml reads the
version from here too (``[tool.setuptools.dynamic]``).
"""

from __future__ import annotations

__version__ = "0.1.0"
