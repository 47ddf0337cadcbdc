"""Headless Chromium (Debian ``chromium``) runs transformers.js and onnxruntime-web (wasm)
on the fp32 and int8 artifacts as written, from a page served on localhost; labels and
logits are compared with PyTorch. Slow (a browser start plus wasm compilation): -m slow."""

from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.clients.test_node_clients import LOGIT_TOL, NODE_MODULES, _softmax

JS = Path(__file__).parent / "js"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (.ci/setup.sh)"),
    pytest.mark.skipif(
        not (NODE_MODULES / "@huggingface" / "transformers").is_dir(),
        reason="tests/clients/js/node_modules missing: run .ci/setup.sh (npm ci)",
    ),
]
TYPES = {
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".wasm": "application/wasm",
    ".json": "application/json",
    ".html": "text/html",
}


def _serve(routes: dict[str, Path], request: bytes, result: list[bytes]) -> http.server.HTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, body: bytes, ctype: str, code: int = 200) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path == "/request.json":
                return self._send(request, "application/json")
            for prefix, root in routes.items():
                if path.startswith(prefix):
                    f = (root / path[len(prefix) :]).resolve()
                    if f.is_file() and root.resolve() in f.parents:
                        return self._send(
                            f.read_bytes(), TYPES.get(f.suffix, "application/octet-stream")
                        )
            self._send(b"not found", "text/plain", 404)

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length", "0"))
            result.append(self.rfile.read(n))
            self._send(b"ok", "text/plain")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _chromium_page(url: str, profile: Path, result: list[bytes], seconds: float) -> int | None:
    """Open ``url`` in headless Chromium until the page posts into ``result``, Chromium
    exits, or ``seconds`` pass; return Chromium's exit status. Shared by this page and
    the LiteRT.js one (test_litertjs.py)."""
    assert CHROMIUM is not None
    proc = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            f"--user-data-dir={profile}",
            url,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(int(seconds * 10)):
            if result or proc.poll() is not None:
                break
            threading.Event().wait(0.1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.returncode


def test_chromium_transformers_js_and_ort_web(client_artifacts, sentences, torch_logits, tmp_path):
    from albert_edge.tokenizer import AlbertTokenizer

    models = tmp_path / "models"
    models.mkdir()
    artifacts = []
    # The default int8 artifact, quantized word table included: its table is read by
    # standard ops, which transformers.js' bundled onnxruntime-web (1.31-dev) has; the
    # contrib GatherBlockQuantized that earlier versions wrote did not load there.
    for kind, art in client_artifacts.items():
        manifest = json.loads((art / "manifest.json").read_text())
        if kind == "int8":
            assert manifest["quantization"]["embeddings"]["bits"] == 8  # as convert wrote it
        shutil.copytree(art, models / art.name)  # as written; served under /models/
        artifacts.append({"kind": kind, "name": art.name, "model_file": manifest["model_file"]})
    tok = AlbertTokenizer(client_artifacts["fp32"] / "spiece.model")
    feeds = [
        {k: v[0] for k, v in vars(tok.encode(t, padding="none")).items()} for _, t in sentences
    ]
    request = json.dumps(
        {"artifacts": artifacts, "sentences": [t for _, t in sentences], "feeds": feeds}
    ).encode()
    result: list[bytes] = []
    server = _serve(
        {"/node_modules/": NODE_MODULES, "/models/": models, "/page/": JS}, request, result
    )
    url = f"http://127.0.0.1:{server.server_address[1]}/page/page.html"
    try:
        code = _chromium_page(url, tmp_path / "profile", result, seconds=300)
    finally:
        server.shutdown()
    assert result, f"the page posted no result (chromium exit {code})"
    out = json.loads(result[0])
    for key, res in out.items():
        assert "error" not in res, f"{key}: {res['error'][:1500]}"
    config = json.loads((client_artifacts["fp32"] / "config.json").read_text())
    for a in artifacts:
        tol = LOGIT_TOL[a["kind"]]
        got = np.asarray(out["onnxruntime-web:" + a["kind"]]["logits"])
        np.testing.assert_allclose(got, np.asarray(torch_logits), atol=tol)
        tjs = out["transformers.js:" + a["kind"]]
        for i, ref in enumerate(torch_logits):
            if abs(ref[0] - ref[1]) > 2 * tol:
                assert tjs["labels"][i] == config["id2label"][str(int(np.argmax(ref)))]
            assert abs(tjs["scores"][i] - max(_softmax(ref))) <= tol
