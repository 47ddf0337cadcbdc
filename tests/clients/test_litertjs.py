"""LiteRT.js (``@litertjs/core`` from npm, pinned in js/package-lock.json) runs the TFLite
artifact as written — metadata and zip tail included — in headless Chromium (Debian
``chromium``), on the wasm (XNNPACK) accelerator; logits are compared with PyTorch and with
ai-edge-litert's interpreter on the same padded inputs: fp32 in the default run, the
int8-dynamic artifact with ``-m slow`` (one more conversion).

The page needs only static files: LiteRT.js' wasm directory, served from node_modules, and
an import map for its one bare import. A browser run takes a few seconds (default run)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.clients.test_browser import CHROMIUM, _chromium_page, _serve
from tests.clients.test_node_clients import NODE_MODULES

JS = Path(__file__).parent / "js"
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (.ci/setup.sh)"),
    pytest.mark.skipif(
        not (NODE_MODULES / "@litertjs" / "core" / "wasm").is_dir(),
        reason="tests/clients/js/node_modules missing @litertjs/core: run .ci/setup.sh (npm ci)",
    ),
]
# LiteRT.js' XNNPACK wasm kernels vs the Python interpreter's XNNPACK, and vs PyTorch
# (int8-dynamic: the quantization error, as in tests/clients/test_node_clients.py).
TOL_VS_INTERPRETER = {"fp32": 1e-5, "int8": 1e-4}
TOL_VS_TORCH = {"fp32": 1e-4, "int8": 0.05}


@pytest.mark.parametrize("kind", ["fp32", pytest.param("int8", marks=pytest.mark.slow)])
def test_litertjs_in_chromium(request, kind, sentences, torch_logits, tmp_path) -> None:
    from albert_edge.tflite.runtime import LiteRTRunner
    from albert_edge.tokenizer import AlbertTokenizer

    fixture = {"fp32": "tflite_artifact", "int8": "tflite_int8_artifact"}[kind]
    tflite_artifact = request.getfixturevalue(fixture)
    manifest = json.loads((tflite_artifact / "manifest.json").read_text())
    (sig,) = manifest["signatures"]
    seq_len = int(sig["seq_len"])
    tok = AlbertTokenizer(tflite_artifact / "spiece.model")
    feeds = [
        {k: [int(x) for x in v[0]] for k, v in vars(tok.encode(t, padding="none")).items()}
        for _, t in sentences
    ]
    request = json.dumps(
        {
            "model_file": manifest["model_file"],
            "signature": sig["name"],
            "seq_len": seq_len,
            "output": "logits",
            "feeds": feeds,
        }
    ).encode()
    result: list[bytes] = []
    server = _serve(
        {"/node_modules/": NODE_MODULES, "/models/": tflite_artifact, "/page/": JS},
        request,
        result,
    )
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/page/litert_page.html"
        code = _chromium_page(url, tmp_path / "profile", result, seconds=180)
    finally:
        server.shutdown()
    assert result, f"the page posted no result (chromium exit {code})"
    out = json.loads(result[0])["litertjs"]
    assert "error" not in out, out["error"][:2000]
    assert out["signatures"] == [sig["name"]]
    assert {d["name"]: (d["shape"], d["dtype"]) for d in out["details"]} == {
        n: ([1, seq_len], "int32") for n in ("input_ids", "attention_mask", "token_type_ids")
    }
    got = np.asarray(out["logits"])

    # The same padded inputs through ai-edge-litert's interpreter, and PyTorch unpadded.
    runner = LiteRTRunner(tflite_artifact / manifest["model_file"], threads=1)
    ref = np.concatenate(
        [
            runner.run({k: np.asarray([v], dtype=np.int64) for k, v in f.items()})["logits"]
            for f in feeds
        ]
    )
    np.testing.assert_allclose(got, ref, atol=TOL_VS_INTERPRETER[kind])
    np.testing.assert_allclose(got, np.asarray(torch_logits), atol=TOL_VS_TORCH[kind])
    print(
        f"LiteRT.js {kind} max |Δ| vs interpreter {np.abs(got - ref).max():.2e}, "
        f"vs PyTorch {np.abs(got - np.asarray(torch_logits)).max():.2e}"
    )
