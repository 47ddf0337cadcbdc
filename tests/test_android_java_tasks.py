"""albert-core's task decoders (``SpanDecoder``, ``EntityDecoder``) against
``albert_edge.tasks``, through the JUnit test ``TaskDecodersTest``.

The Python side writes the fixtures during the run (``android_demo/scripts/
make_task_fixtures.py``: a tiny random QA and NER checkpoint, PyTorch logits on the real
SQuAD dev questions of ``tests/data/squad_js`` and on synthetic CoNLL-style sentences, and
what ``albert_edge.tasks`` decodes from them); Java must reproduce every window, span text,
score, null score, tag and entity. The committed copies (what ``gradle :albert-core:test``
reads) are checked to be what ``albert_edge.tasks`` makes of their own logits.

Built as tests/test_android_java.py builds the core: javac --release 8 and Debian's junit4.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests import test_android_java
from tests.test_android_java import CORE, _java

# the compiled core, shared with tests/test_android_java.py (compiled once per source state)
java_build = test_android_java.java_build

SCRIPT = CORE.parent / "scripts" / "make_task_fixtures.py"
COMMITTED = CORE / "src" / "test" / "resources" / "tasks"


def _fixtures_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_task_fixtures", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _junit(build: dict, spiece: Path, fixtures: Path) -> str:
    assert build["junit"], "Debian's junit4 package is needed (apt-get install junit4)"
    r = _java(
        build,
        f"-Dalbert.spiece={spiece}",
        f"-Dalbert.tasks.fixtures={fixtures}",
        "org.junit.runner.JUnitCore",
        "dev.albertedge.core.TaskDecodersTest",
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "OK (" in out, out[-6000:]
    ran = re.search(r"OK \((\d+) tests?\)", out)
    assert ran is not None and int(ran.group(1)) == 7, out[-2000:]
    return out


@pytest.mark.slow  # two checkpoints and PyTorch runs: ~20 s of CPU
def test_java_decoders_match_python_on_fresh_fixtures(java_build, spiece_path, tmp_path):
    """Fixtures written now, from PyTorch on this machine: Java decodes them as Python did,
    and its windows (real SentencePiece model) are Python's."""
    squad, conll = _fixtures_module().write_fixtures(tmp_path / "fixtures")
    s = json.loads(squad.read_text())
    assert len(s["examples"]) == 18 and len(s["features"]) > len(s["examples"])
    assert len(json.loads(conll.read_text())["sentences"]) == 40
    _junit(java_build, spiece_path, tmp_path / "fixtures")


def test_java_decoders_match_python_on_committed_fixtures(java_build, spiece_path):
    _junit(java_build, spiece_path, COMMITTED)


def test_committed_fixtures_are_what_albert_edge_tasks_decodes(spiece_path, tmp_path):
    """The committed fixtures (read by ``gradle :albert-core:test``) hold albert_edge.tasks'
    windows of their texts and its decoding of their own logits."""
    from seqeval.metrics.sequence_labeling import get_entities

    from albert_edge.tasks import encode, read_task_file
    from albert_edge.tasks.squad import best_spans
    from albert_edge.tasks.tokens import iob1_to_iob2, predict_tags
    from albert_edge.tokenizer import AlbertTokenizer

    mod = _fixtures_module()
    tok = AlbertTokenizer(spiece_path)
    fx = json.loads((COMMITTED / "squad_spans.json").read_text())
    data = read_task_file(mod.SQUAD_SAMPLE)
    assert [e["id"] for e in fx["examples"]] == [e.id for e in data.examples]
    feats = encode(data, tok, fx["max_len"], stride=fx["stride"])
    assert [f["input_ids"] for f in fx["features"]] == feats.input_ids
    assert [f["word_ids"] for f in fx["features"]] == feats.word_ids
    outs = {
        k: [np.asarray(f[k], np.float32) for f in fx["features"]]
        for k in ("start_logits", "end_logits")
    }
    for setting in fx["expected"]:
        spans = best_spans(
            data,
            feats,
            outs,
            n_best=setting["n_best"],
            max_answer_length=setting["max_answer_length"],
        )
        assert [a["text"] for a in setting["answers"]] == [t for t, _, _ in spans]
        for a, (_, score, null) in zip(setting["answers"], spans, strict=True):
            assert a["score"] == (score if np.isfinite(score) else None)
            assert a["null_score"] == null
    fx = json.loads((COMMITTED / "conll_entities.json").read_text())
    path = tmp_path / "synthetic.conll"
    path.write_text(mod.conll_text(mod.synthetic_conll()))
    data = read_task_file(path, label2id={t: i for i, t in enumerate(fx["labels"])})
    assert fx["sentences"] == [list(ex.words) for ex in data.examples]
    feats = encode(data, tok, fx["max_len"])
    assert [f["input_ids"] for f in fx["features"]] == feats.input_ids
    logits = [np.asarray(f["logits"], np.float32) for f in fx["features"]]
    tags = predict_tags(data, feats, {"logits": logits})
    assert [e["tags"] for e in fx["expected"]] == tags
    assert [e["entities"] for e in fx["expected"]] == [
        [list(x) for x in get_entities(iob1_to_iob2(t))] for t in tags
    ]


APP = CORE.parent / "app" / "src" / "main"


def test_app_sources_reference_what_exists():
    """No Android SDK here, so the app does not compile here (android_demo/README.md): the
    Kotlin sources' R.string / R.id / R.layout names exist in res/, every @string in the
    XML exists, every activity in the manifest is a class, the question-answering screen
    is reachable from the main one and decodes with SpanDecoder, and its asset names are
    the ones scripts/prepare_qa_assets.sh writes."""
    kotlin = {p.name: p.read_text() for p in (APP / "java").rglob("*.kt")}
    code = "\n".join(kotlin.values())
    xml = "\n".join(
        p.read_text() for p in [APP / "AndroidManifest.xml", *(APP / "res").rglob("*.xml")]
    )
    defined = {
        "string": set(re.findall(r'<string name="(\w+)"', xml)),
        "id": set(re.findall(r"@\+id/(\w+)", xml)),
        "layout": {p.stem for p in (APP / "res" / "layout").glob("*.xml")},
    }
    for kind, names in defined.items():
        used = set(re.findall(rf"(?<!android\.)\bR\.{kind}\.(\w+)", code))
        assert used and used <= names, (kind, sorted(used - names))
    assert set(re.findall(r"@string/(\w+)", xml)) <= defined["string"]
    for activity in re.findall(r'<activity\s+android:name="\.(\w+)"', xml):
        assert re.search(rf"\bclass {activity}\b", code), activity
    assert "QuestionAnswerActivity" in re.findall(r'android:name="\.(\w+)"', xml)
    assert "QuestionAnswerActivity::class.java" in kotlin["MainActivity.kt"]
    qa = kotlin["LiteRtQuestionAnswerer.kt"]
    assert "SpanDecoder.windows(" in qa and "SpanDecoder.best(" in qa
    script = (CORE.parent / "scripts" / "prepare_qa_assets.sh").read_text()
    for name in re.findall(r'const val \w+ = "(qa_[\w.]+)"', qa):
        assert name in script, name
    assert len(re.findall(r'const val \w+ = "(qa_[\w.]+)"', qa)) == 3
