"""The wire format between a host and an emulated-kernel child: raw arrays + JSON lines.

Kept dependency-free (numpy only) because the same file is imported by the child
interpreter, which may be an aarch64 Python under qemu with nothing but numpy and
onnxruntime on its path. A request is one JSON line naming a directory that holds one
``<name>.bin`` per array; the answer is one JSON line naming the output arrays written
to the same directory. Raw little-endian buffers (not .npz) so that the Node child can
read them with typed arrays.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DTYPES = ("int64", "int32", "int8", "uint8", "bool", "float32", "float16")


def write_arrays(folder: Path, arrays: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Write each array to ``folder/<prefix><i>.bin``; return its JSON description."""
    import numpy as np

    described: dict[str, Any] = {}
    for i, (name, value) in enumerate(arrays.items()):
        arr = np.ascontiguousarray(value)
        if arr.dtype.name not in DTYPES:
            raise ValueError(f"array {name!r} has unsupported dtype {arr.dtype.name}")
        file = f"{prefix}{i}.bin"
        arr.astype(arr.dtype.newbyteorder("<"), copy=False).tofile(folder / file)
        described[name] = {"dtype": arr.dtype.name, "shape": list(arr.shape), "file": file}
    return described


def read_arrays(folder: Path, described: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    out = {}
    for name, d in described.items():
        if d["dtype"] not in DTYPES:
            raise ValueError(f"array {name!r} has unsupported dtype {d['dtype']}")
        data = np.fromfile(folder / d["file"], dtype=np.dtype(d["dtype"]).newbyteorder("<"))
        out[name] = data.reshape(d["shape"])
    return out


def dumps(message: dict[str, Any]) -> str:
    return json.dumps(message, separators=(",", ":"))
