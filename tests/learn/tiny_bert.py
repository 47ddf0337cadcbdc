"""A tiny random BERT teacher with its own WordPiece vocabulary, built by the tests
themselves (never a downloaded model): ``BertConfig`` of 2 layers of width 32 and a
``vocab.txt`` of special tokens, characters, their ``##`` continuations and given words,
saved with ``BertTokenizerFast`` as transformers saves a fine-tuned teacher."""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence
from pathlib import Path

HEAD_CLASS = {
    "none": "BertModel",  # a pretrained encoder without a head, as MiniLM ships
    "sequence-classification": "BertForSequenceClassification",
    "token-classification": "BertForTokenClassification",
    "question-answering": "BertForQuestionAnswering",
}


def write_vocab(path: Path, words: Iterable[str] = ()) -> list[str]:
    """A WordPiece vocabulary that tokenizes any lower-case ASCII text."""
    chars = string.ascii_lowercase + string.digits
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *".,'!?-():;\"&/"]
    vocab += ["##" + c for c in chars]
    vocab += sorted({w.lower() for w in words})
    vocab = list(dict.fromkeys(vocab))
    path.write_text("\n".join(vocab) + "\n")
    return vocab


def tiny_bert(
    d: Path,
    head: str,
    labels: Sequence[str] = (),
    words: Iterable[str] = (),
    seed: int = 0,
    tokenizer: bool = True,
) -> Path:
    """``d`` holding a random tiny BERT for ``head`` (``labels`` in id order; QA: none)
    and, with ``tokenizer``, its tokenizer files."""
    import torch
    import transformers

    d.mkdir(parents=True, exist_ok=True)
    vocab = write_vocab(d / "vocab.txt", words)
    if tokenizer:
        tok = transformers.BertTokenizerFast(vocab_file=str(d / "vocab.txt"), do_lower_case=True)
        tok.save_pretrained(str(d))
    else:
        (d / "vocab.txt").unlink()
    n = 2 if head in ("question-answering", "none") else len(labels)
    kw = {} if head in ("question-answering", "none") else {"id2label": dict(enumerate(labels))}
    cfg = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=n,
        **kw,
    )
    torch.manual_seed(seed)
    getattr(transformers, HEAD_CLASS[head])(cfg).save_pretrained(str(d))
    return d
