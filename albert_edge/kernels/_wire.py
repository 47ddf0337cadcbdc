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
from collections.abc import Callable
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


def serve(hello: dict[str, Any], run: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """A child's whole life after loading: print ``hello``, then answer one request line
    at a time (feeds in, ``run(feeds)`` out) until stdin closes. A failed run is answered
    with an ``error`` line, which the host raises as a typed error."""
    import sys

    print(dumps(hello), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        folder = Path(req["dir"])
        try:
            outs = run(read_arrays(folder, req["feeds"]))
            print(dumps({"outputs": write_arrays(folder, outs, "out")}), flush=True)
        except Exception as exc:  # reported to the host, which raises a typed error
            print(dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
    return 0
