"""Small task models the client tests build for themselves: a tiny ALBERT briefly trained
on the committed SQuAD sample (question answering) or on synthetic CoNLL-style sentences
(entity tagging), so that its logits have clear peaks and a client's answer can be held
to PyTorch's span by span (a random head scores every span nearly alike, and a last-digit
difference could pick another span).

CoNLL-2003 text may not ship with the tests, so the tagging data is generated here from
templates: names, places, organisations and adjectives in short news-like sentences, in
the CoNLL layout (``WORD POS CHUNK TAG``, IOB2 tags, a blank line after each sentence).
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SQUAD_SAMPLE = ROOT / "tests" / "data" / "squad" / "dev-v1.1-sample.json"

PER = ["John Smith", "Maria Garcia", "Ahmed Khan", "Olga Petrova", "Peter Brown", "Yuki Tanaka"]
PER += ["David Miller", "Fatima Bello", "Carlos Ruiz", "Helen Clark", "Ivan Horvat", "Amy Chen"]
LOC = ["London", "Paris", "New York", "Nairobi", "Berlin", "Tokyo", "Cairo", "Lima", "Oslo"]
LOC += ["Madrid", "Sydney", "Hong Kong", "Buenos Aires", "Moscow"]
ORG = ["Google", "Reuters", "Siemens", "Barclays", "Toyota", "UNICEF", "Real Madrid", "Nokia"]
ORG += ["General Motors", "Deutsche Bank", "Interpol", "Ajax Amsterdam"]
MISC = ["German", "French", "Olympic", "Japanese", "Kenyan", "Brazilian", "Russian", "Dutch"]
TEMPLATES = [
    "{PER} flew to {LOC} on Monday .",
    "{ORG} said {PER} will visit {LOC} next week .",
    "The {MISC} minister met {PER} in {LOC} .",
    "{PER} , a spokesman for {ORG} , declined to comment .",
    "Shares of {ORG} rose 3 percent in {LOC} trading .",
    "{MISC} officials told {ORG} that {PER} had resigned .",
    "In {LOC} , {PER} signed a contract with {ORG} .",
    "{ORG} beat {ORG} 2-1 in the {MISC} cup final .",
]


def conll_sentences(n: int, seed: int) -> list[list[tuple[str, str]]]:
    """``n`` sentences of (word, IOB2 tag), drawn from :data:`TEMPLATES` with ``seed``."""
    rng = random.Random(seed)
    pools = {"PER": PER, "LOC": LOC, "ORG": ORG, "MISC": MISC}
    out = []
    for _ in range(n):
        words: list[tuple[str, str]] = []
        for token in rng.choice(TEMPLATES).split():
            kind = token[1:-1] if token.startswith("{") else None
            if kind is None:
                words.append((token, "O"))
                continue
            for i, w in enumerate(rng.choice(pools[kind]).split()):
                words.append((w, f"{'B' if i == 0 else 'I'}-{kind}"))
        out.append(words)
    return out


def write_conll(path: Path, sentences: list[list[tuple[str, str]]]) -> Path:
    """The CoNLL-2003 layout: a ``-DOCSTART-`` line, then ``WORD POS CHUNK TAG`` lines."""
    lines = ["-DOCSTART- -X- -X- O", ""]
    for sent in sentences:
        for word, tag in sent:
            pos = "NNP" if tag != "O" else "NN"
            lines.append(f"{word} {pos} {'I-NP' if tag != 'O' else 'O'} {tag}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


def train_briefly(
    out: Path,
    data_file: Path,
    head: str,
    *,
    max_position_embeddings: int = 128,
    max_len: int = 128,
    steps: int = 100,
    batch_size: int = 8,
    lr: float = 3e-3,
) -> Path:
    """A tiny ALBERT with ``head`` trained ``steps`` AdamW steps on ``data_file`` (read
    and encoded by :mod:`albert_edge.tasks`, as ``albert-edge train`` reads it), saved as
    a Hugging Face checkpoint with its spiece.model and, for tagging, the data's label
    names as ``id2label``. Deterministic: seeded, one thread."""
    import numpy as np
    import torch

    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.configs import make_config
    from albert_edge.heads import head_by_name
    from albert_edge.tasks import encode, read_task_file
    from albert_edge.tokenizer import AlbertTokenizer

    spiece = DEFAULT_MODEL / "spiece.model"
    data = read_task_file(data_file)
    features = encode(data, AlbertTokenizer(spiece), max_len, stride=max_len // 2)
    cfg = make_config("tiny", max_position_embeddings=max_position_embeddings)
    cfg.architectures = [head_by_name(head).hf_class]
    if head == "token-classification":
        cfg.num_labels = len(data.label_names)
        cfg.id2label = dict(enumerate(data.label_names))
        cfg.label2id = {name: i for i, name in enumerate(data.label_names)}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        from albert_edge.checkpoint import build_model

        model = build_model(cfg, head_by_name(head))
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
        rng = np.random.default_rng(0)
        for _ in range(steps):
            batch = sorted(rng.choice(len(features), min(batch_size, len(features)), False))
            feeds = {k: torch.as_tensor(v) for k, v in features.feeds(batch).items()}
            labels: dict[str, Any]
            if head == "question-answering":
                spans = torch.as_tensor([features.labels[i] for i in batch])
                labels = {"start_positions": spans[:, 0], "end_positions": spans[:, 1]}
            else:
                width = feeds["input_ids"].shape[1]
                rows = [
                    features.labels[i] + [-100] * (width - len(features.labels[i])) for i in batch
                ]
                labels = {"labels": torch.as_tensor(rows)}
            loss = model(**feeds, **labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    shutil.copyfile(spiece, out / "spiece.model")
    return out
