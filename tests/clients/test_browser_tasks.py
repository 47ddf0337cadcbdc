"""Headless Chromium runs transformers.js' question-answering pipeline and its
TokenClassificationPipeline (wasm) on the QA and NER artifacts as written, from a page
served on localhost; the answers, tags and entities are checked as in Node
(tests/clients/test_node_tasks.py: albert_edge.tasks on ONNX Runtime's logits of the same
file and ids). Slow (a browser start plus wasm compilation): -m slow."""

from __future__ import annotations

import json

import pytest

from tests.clients.test_browser import CHROMIUM, _chromium_page, _serve
from tests.clients.test_node_clients import NODE_MODULES
from tests.clients.test_node_tasks import (
    JS,
    check_ner,
    check_qa,
    conll_data,  # noqa: F401 (fixture)
    ner_request,
    qa_request,
    squad_data,  # noqa: F401 (fixture)
    task_artifact,  # noqa: F401 (fixture)
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (.ci/setup.sh)"),
    pytest.mark.skipif(
        not (NODE_MODULES / "@huggingface" / "transformers").is_dir(),
        reason="tests/clients/js/node_modules missing: run .ci/setup.sh (npm ci)",
    ),
]


@pytest.mark.parametrize("kind", ["fp32", "int8"])
def test_chromium_transformers_js_qa_and_ner(
    task_artifact,  # noqa: F811
    squad_data,  # noqa: F811
    conll_data,  # noqa: F811
    kind,
    tmp_path,
):
    qa, ner = task_artifact("qa", kind), task_artifact("ner", kind)
    request = json.dumps(
        {"qa": qa_request(qa.name, squad_data), "ner": ner_request(ner.name, conll_data)}
    ).encode()
    result: list[bytes] = []
    server = _serve(
        {"/node_modules/": NODE_MODULES, "/models/": qa.parent, "/page/": JS}, request, result
    )
    url = f"http://127.0.0.1:{server.server_address[1]}/page/tasks_page.html"
    try:
        code = _chromium_page(url, tmp_path / "profile", result, seconds=300)
    finally:
        server.shutdown()
    assert result, f"the page posted no result (chromium exit {code})"
    out = json.loads(result[0])
    assert "error" not in out, out.get("error", "")[:1500]
    qa_counts = check_qa(qa, squad_data, out["qa"])
    assert qa_counts["questions"] == 18
    ner_counts = check_ner(ner, conll_data, out["ner"])
    assert ner_counts["sentences_whole"] >= 8 and ner_counts["entities"] >= 20, ner_counts
