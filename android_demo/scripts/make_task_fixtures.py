"""JSON fixtures for albert-core's task decoders (``SpanDecoder``, ``EntityDecoder``).

Two tiny random-weight ALBERT checkpoints (a question-answering head and a 9-tag CoNLL
token-classification head, seeded) are run by PyTorch on real SQuAD v1.1 dev questions
(``tests/data/squad_js/dev-sample.json``, CC BY-SA 4.0) and on synthetic CoNLL-style
sentences (CoNLL-2003's own text may not ship). Each fixture holds the model inputs as
``albert_edge.tasks`` encodes them (SQuAD windows with a document stride; sentences cut
into windows at word boundaries), the logits, and what ``albert_edge.tasks`` decodes from
those logits: per question the best span's text, score and null score
(``squad.best_spans`` at two settings of n-best and maximum answer length), per sentence
the tag of each word (``tokens.predict_tags``) and its IOB2 entities as seqeval extracts
them. The JUnit test ``TaskDecodersTest`` reads them and must reproduce every field.

Logits are written as the shortest decimal that reads back to the same float32, so Java's
``Float.parseFloat`` sees the values Python decoded from.

usage (from the repository root, its virtualenv active):
    python android_demo/scripts/make_task_fixtures.py OUT_DIR
writes OUT_DIR/squad_spans.json and OUT_DIR/conll_entities.json. The committed copies
live in android_demo/albert-core/src/test/resources/tasks/ (tests/test_android_java_tasks.py
regenerates them in a temporary directory on every run and checks the committed ones).
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SQUAD_SAMPLE = REPO / "tests" / "data" / "squad_js" / "dev-sample.json"
SPIECE = REPO / "albert_edge" / "models" / "sst2-albert-tiny" / "spiece.model"
CONLL_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")

# QA windows: short enough that most SQuAD paragraphs span several windows.
QA_MAX_LEN = 96
QA_STRIDE = 32
# (n_best, max_answer_length) pairs the spans are decoded at: squad.py's defaults and two
# that prune (fewer candidates, shorter answers; some questions left without a span).
QA_SETTINGS = ((20, 30), (10, 8), (5, 10))
# NER windows: short enough that the longer sentences are cut at a word boundary.
NER_MAX_LEN = 24
O_BIAS = 0.22

_PER = ("John Smith", "Maria Garcia", "Lee", "Ahmed Khan", "O'Neill", "Anna-Lena Berg")
_ORG = ("Reuters", "European Union", "Bayer AG", "United Nations", "Ajax Amsterdam")
_LOC = ("London", "New York", "Sao Paulo", "Germany", "Lake Geneva", "Zurich")
_MISC = ("German", "Olympic", "Dutch", "Euro 96", "Nobel Prize")
_FILL = (
    "said", "on", "Tuesday", "the", "in", "talks", "with", "will", "visit", "beat",
    "1-0", "after", "a", "statement", "shares", "rose", "3.5", "percent", "to", "from",
    "1996", "(", ")", ",", "'s", "--", "officials", "told",
)  # fmt: skip


def synthetic_conll(
    n: int = 40, seed: int = 7, full_stop: bool = True
) -> list[tuple[list[str], list[str]]]:
    """``n`` CoNLL-style sentences (words and IOB2 tags), drawn from invented word lists:
    entities of all four types, multi-word and adjacent ones, punctuation and numbers;
    each ends with a full stop unless ``full_stop`` is false."""
    rng = random.Random(seed)
    kinds = (("PER", _PER), ("ORG", _ORG), ("LOC", _LOC), ("MISC", _MISC))
    out = []
    for _ in range(n):
        words: list[str] = []
        tags: list[str] = []
        for _ in range(rng.randint(2, 7)):
            if rng.random() < 0.45:
                kind, names = rng.choice(kinds)
                for k, w in enumerate(rng.choice(names).split()):
                    words.append(w)
                    tags.append(("B-" if k == 0 else "I-") + kind)
            else:
                for _ in range(rng.randint(1, 3)):
                    words.append(rng.choice(_FILL))
                    tags.append("O")
        if full_stop:
            words.append(".")
            tags.append("O")
        out.append((words, tags))
    return out


def conll_text(sentences: list[tuple[list[str], list[str]]]) -> str:
    """The sentences as a CoNLL-2003 file (``WORD POS CHUNK NER``, IOB2 tags)."""
    blocks = ["-DOCSTART- -X- -X- O\n"]
    for words, tags in sentences:
        blocks.append("".join(f"{w} NN I-NP {t}\n" for w, t in zip(words, tags, strict=True)))
    return "\n".join(blocks)


def make_qa_checkpoint(root: Path, max_positions: int = 128) -> Path:
    """A tiny random ALBERT with a question-answering head (seeded), reading
    ``max_positions`` tokens."""
    from albert_edge.configs import make_config, make_random_checkpoint

    cfg = make_config("tiny")
    cfg.max_position_embeddings = max_positions
    return make_random_checkpoint(
        root / "qa", cfg, head="question-answering", spiece_model=SPIECE, seed=3
    )


def make_ner_checkpoint(root: Path) -> Path:
    """A tiny random ALBERT with a 9-tag token-classification head (seeded), its config
    naming the CoNLL tags."""
    from albert_edge.configs import make_random_checkpoint

    ner = make_random_checkpoint(
        root / "ner",
        "tiny",
        head="token-classification",
        spiece_model=SPIECE,
        seed=5,
        num_labels=len(CONLL_TAGS),
    )
    cfg = json.loads((ner / "config.json").read_text())
    cfg["id2label"] = {str(i): t for i, t in enumerate(CONLL_TAGS)}
    cfg["label2id"] = {t: i for i, t in enumerate(CONLL_TAGS)}
    (ner / "config.json").write_text(json.dumps(cfg, indent=2))
    # A random head's logits are nearly flat and rarely pick O; raising O's bias makes
    # about half the words O, so the entities have gaps, ends and single words.
    from safetensors.torch import load_file, save_file

    weights = load_file(ner / "model.safetensors")
    weights["classifier.bias"][0] += O_BIAS
    save_file(weights, ner / "model.safetensors", metadata={"format": "pt"})
    return ner


def f32s(values: Any) -> list[float]:
    """The float32 values as the shortest decimals that read back to them (a double
    holding that decimal: json writes it as is, and Java's ``Float.parseFloat`` of it is
    the float32 value)."""
    import numpy as np

    return [float(np.format_float_scientific(np.float32(v), unique=True)) for v in values]


def _torch_outputs(checkpoint: Path, feats: Any) -> dict[str, list[Any]]:
    import numpy as np
    import torch

    from albert_edge.checkpoint import load_checkpoint

    model = load_checkpoint(checkpoint).model.eval()
    out: dict[str, list[Any]] = {}
    with torch.no_grad():
        for i in range(len(feats)):
            feeds = {k: torch.from_numpy(v) for k, v in feats.feeds([i]).items()}
            res = model(**feeds)
            for name in ("start_logits", "end_logits", "logits"):
                if getattr(res, name, None) is not None:
                    out.setdefault(name, []).append(
                        getattr(res, name)[0].numpy().astype(np.float32)
                    )
    return out


def _float(x: float) -> float | None:
    import math

    return float(x) if math.isfinite(x) else None


def squad_fixture(checkpoint: Path, squad: Path = SQUAD_SAMPLE) -> dict[str, Any]:
    from albert_edge.tasks import encode, read_task_file
    from albert_edge.tasks.squad import best_spans
    from albert_edge.tokenizer import AlbertTokenizer

    data = read_task_file(squad)
    tok = AlbertTokenizer(checkpoint / "spiece.model")
    feats = encode(data, tok, QA_MAX_LEN, stride=QA_STRIDE)
    outs = _torch_outputs(checkpoint, feats)
    features: list[dict[str, Any]] = []
    for f in range(len(feats)):
        n = len(feats.input_ids[f])
        features.append(
            {
                "example": feats.example_index[f],
                "input_ids": feats.input_ids[f],
                "token_type_ids": feats.token_type_ids[f],
                "word_ids": feats.word_ids[f],
                "max_context": [int(b) for b in feats.max_context[f]],
                "start_logits": f32s(outs["start_logits"][f][:n]),
                "end_logits": f32s(outs["end_logits"][f][:n]),
            }
        )
    # decode from the float32 values the fixture holds (what Java reads)
    read_back = {
        k: [[float(x) for x in feat[k]] for feat in features]
        for k in ("start_logits", "end_logits")
    }
    import numpy as np

    outputs = {k: [np.asarray(v, np.float32) for v in vs] for k, vs in read_back.items()}
    expected = []
    for n_best, max_answer in QA_SETTINGS:
        spans = best_spans(data, feats, outputs, n_best=n_best, max_answer_length=max_answer)
        expected.append(
            {
                "n_best": n_best,
                "max_answer_length": max_answer,
                "answers": [
                    {"text": t, "score": _float(s), "null_score": _float(z)} for t, s, z in spans
                ],
            }
        )
    return {
        "source": "tests/data/squad_js/dev-sample.json (SQuAD v1.1 dev, CC BY-SA 4.0)",
        "max_len": QA_MAX_LEN,
        "stride": QA_STRIDE,
        "examples": [
            {"id": ex.id, "question": ex.question, "context": ex.context} for ex in data.examples
        ],
        "features": features,
        "expected": expected,
    }


def conll_fixture(checkpoint: Path, work: Path) -> dict[str, Any]:
    import numpy as np
    from seqeval.metrics.sequence_labeling import get_entities

    from albert_edge.tasks import encode, read_task_file
    from albert_edge.tasks.tokens import iob1_to_iob2, predict_tags
    from albert_edge.tokenizer import AlbertTokenizer

    path = work / "synthetic.conll"
    path.write_text(conll_text(synthetic_conll()))
    data = read_task_file(path, label2id={t: i for i, t in enumerate(CONLL_TAGS)})
    tok = AlbertTokenizer(checkpoint / "spiece.model")
    feats = encode(data, tok, NER_MAX_LEN)
    outs = _torch_outputs(checkpoint, feats)
    features: list[dict[str, Any]] = []
    for f in range(len(feats)):
        n = len(feats.input_ids[f])
        features.append(
            {
                "example": feats.example_index[f],
                "input_ids": feats.input_ids[f],
                "word_ids": feats.word_ids[f],
                "logits": [f32s(row) for row in outs["logits"][f][:n]],
            }
        )
    logits = [
        np.asarray([[float(x) for x in r] for r in feat["logits"]], np.float32) for feat in features
    ]
    tags = predict_tags(data, feats, {"logits": logits})
    expected = []
    for t in tags:
        iob2 = iob1_to_iob2(t)
        expected.append({"tags": t, "entities": [list(e) for e in get_entities(list(iob2))]})
    return {
        "source": "synthetic CoNLL-2003-style sentences (android_demo/scripts/make_task_fixtures.py)",
        "labels": list(data.label_names),
        "max_len": NER_MAX_LEN,
        "sentences": [list(ex.words) for ex in data.examples],
        "features": features,
        "expected": expected,
    }


def write_fixtures(out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="albert-core-fixtures-") as tmp:
        qa, ner = make_qa_checkpoint(Path(tmp)), make_ner_checkpoint(Path(tmp))
        squad = squad_fixture(qa)
        conll = conll_fixture(ner, Path(tmp))
    paths = (out / "squad_spans.json", out / "conll_entities.json")
    for p, obj in zip(paths, (squad, conll), strict=True):
        p.write_text(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    for p in write_fixtures(Path(sys.argv[1])):
        print(p)
