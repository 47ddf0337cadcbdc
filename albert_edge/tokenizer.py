"""ALBERT tokenization over the ``sentencepiece`` model file, matching ``AlbertTokenizerFast``.

Why not transformers' tokenizer: the artifacts we ship must be usable without
transformers (a phone, a server with only onnxruntime), and the Android demo re-implements
exactly this algorithm in Java. Keeping it whole in one short file is what makes that
port checkable. Parity with ``AlbertTokenizerFast`` is tested on every sentence of SST-2 dev.

Why not plain ``sp.encode``: transformers' fast ALBERT tokenizer, which fine-tuned
checkpoints were trained with, differs from SentencePiece in three documented ways, and a
model must see at inference the ids it saw in training:

1. the model's USER_DEFINED pieces (``( ) " - . – £ €`` in 30k-clean.model) and the special
   tokens are split out of the raw text first, so each following segment gets its own
   ``▁`` prefix ("k-19" → ``▁k - ▁19``, where SentencePiece gives ``▁k - 19``);
2. whitespace is not stripped: a trailing space becomes a lone ``▁`` piece;
3. pieces ending in a digit and a comma ("▁1,") are penalised by 100, mirroring the slow
   tokenizer's digit-comma split.

Pipeline per text: split on added tokens (leftmost-longest) → per segment: ``''``/``````→'"',
NFKD, drop combining marks, lower-case, SentencePiece's own precompiled charsmap (via
``SentencePieceNormalizer`` with nothing else enabled), collapse runs of spaces → Metaspace
(spaces → ``▁``, prepend ``▁`` unless present, split before each ``▁``) → Unigram Viterbi per
word over the model's pieces and scores (unknown characters: ``<unk>`` scored
min_score − 10, consecutive unknowns fused).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert_edge.errors import TokenizerError

PAD, UNK, CLS, SEP, MASK = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"


@dataclass(frozen=True)
class Encoding:
    """A padded batch: lists of equal-length int lists, ready for ``np.asarray``."""

    input_ids: list[list[int]]
    attention_mask: list[list[int]]
    token_type_ids: list[list[int]]

    def as_numpy(self, dtype: str = "int64") -> dict[str, Any]:
        import numpy as np

        return {
            "input_ids": np.asarray(self.input_ids, dtype=dtype),
            "attention_mask": np.asarray(self.attention_mask, dtype=dtype),
            "token_type_ids": np.asarray(self.token_type_ids, dtype=dtype),
        }


class AlbertTokenizer:
    """SentencePiece + ALBERT's normalisation and special tokens."""

    def __init__(
        self,
        model_file: str | Path,
        *,
        do_lower_case: bool = True,
        keep_accents: bool = False,
    ) -> None:
        import sentencepiece as spm

        path = Path(model_file)
        if not path.is_file():
            raise TokenizerError(
                f"{path}: SentencePiece model not found; put the checkpoint's spiece.model "
                "(30k-clean.model in original ALBERT releases) beside its config"
            )
        sp = spm.SentencePieceProcessor()
        try:
            ok = sp.Load(str(path))
        except Exception as exc:  # sentencepiece raises OSError/RuntimeError variously
            raise TokenizerError(
                f"{path}: not a readable SentencePiece model ({exc}); replace it with the "
                "checkpoint's original spiece.model"
            ) from None
        if not ok:
            raise TokenizerError(f"{path}: SentencePiece refused to load this file")
        self.path = path
        self.sp = sp
        self.do_lower_case = do_lower_case
        self.keep_accents = keep_accents
        self.vocab_size = int(sp.GetPieceSize())
        ids = {name: sp.PieceToId(name) for name in (PAD, UNK, CLS, SEP, MASK)}
        missing = [name for name, i in ids.items() if sp.IdToPiece(i) != name]
        if missing:
            raise TokenizerError(
                f"{path}: SentencePiece model lacks ALBERT's special pieces {missing}; "
                "is this an ALBERT spiece.model?"
            )
        self.pad_id, self.unk_id = ids[PAD], ids[UNK]
        self.cls_id, self.sep_id, self.mask_id = ids[CLS], ids[SEP], ids[MASK]
        self._charsmap = spm.SentencePieceNormalizer(
            model_file=str(path),
            add_dummy_prefix=False,
            escape_whitespaces=False,
            remove_extra_whitespaces=False,
        )
        self._build_vocab()

    def _build_vocab(self) -> None:
        import importlib

        # generated protobuf module: typed as Any (its stubs vary across protobuf releases)
        pb: Any = importlib.import_module("sentencepiece.sentencepiece_model_pb2")
        proto = pb.ModelProto()
        proto.ParseFromString(self.path.read_bytes())
        self._scores: dict[str, tuple[int, float]] = {}
        added: list[str] = []
        for i, p in enumerate(proto.pieces):
            score = p.score
            if len(p.piece) >= 2 and p.piece[-1] == "," and p.piece[-2].isdigit():
                score -= 100.0
            self._scores.setdefault(p.piece, (i, score))
            if p.type == pb.ModelProto.SentencePiece.USER_DEFINED:
                added.append(p.piece)
        self._unk_score = min(s for _, s in self._scores.values()) - 10.0
        self._max_piece_len = max(len(p) for p in self._scores)
        specials = [PAD, UNK, CLS, SEP, MASK]
        self._added_ids = {tok: self._scores[tok][0] for tok in specials + added}
        # Leftmost-longest: at equal start, the regex alternation tries longer tokens first.
        alternatives = sorted(self._added_ids, key=len, reverse=True)
        self._added_re = re.compile(
            "|".join(r"\s*" + re.escape(t) if t == MASK else re.escape(t) for t in alternatives)
        )

    def check_vocab_size(self, vocab_size: int, config_path: str | Path) -> None:
        if self.vocab_size != vocab_size:
            raise TokenizerError(
                f"{self.path}: SentencePiece model has {self.vocab_size} pieces but "
                f"{config_path} says vocab_size={vocab_size}; use the spiece.model the "
                "checkpoint was trained with"
            )

    def normalize(self, segment: str) -> str:
        """Normalise one segment (text between added tokens), as the fast tokenizer does."""
        text = segment.replace("``", '"').replace("''", '"')
        if not self.keep_accents:
            text = unicodedata.normalize("NFKD", text)
            text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        if self.do_lower_case:
            text = text.lower()
        text = self._charsmap.normalize(text)
        return re.sub(" {2,}", " ", text)

    def _viterbi(self, word: str) -> list[int]:
        """Best segmentation of one ``▁``-prefixed word under the unigram scores."""
        n = len(word)
        best: list[float | None] = [0.0] + [None] * n
        back: list[tuple[int, int]] = [(0, -1)] * (n + 1)
        for start in range(n):
            base = best[start]
            if base is None:
                continue
            single = False
            for end in range(start + 1, min(n, start + self._max_piece_len) + 1):
                hit = self._scores.get(word[start:end])
                if hit is None:
                    continue
                single = single or end == start + 1
                cand = base + hit[1]
                cur = best[end]
                if cur is None or cand > cur:
                    best[end], back[end] = cand, (start, hit[0])
            if not single:
                cand = base + self._unk_score
                cur = best[start + 1]
                if cur is None or cand > cur:
                    best[start + 1], back[start + 1] = cand, (start, self.unk_id)
        ids: list[int] = []
        end = n
        while end > 0:
            start, piece = back[end]
            if not (piece == self.unk_id and ids and ids[-1] == self.unk_id):
                ids.append(piece)
            end = start
        return ids[::-1]

    def tokenize_ids(self, text: str) -> list[int]:
        """Piece ids of one text, without [CLS]/[SEP]."""
        ids: list[int] = []
        pos = 0
        for m in self._added_re.finditer(text):
            ids += self._segment_ids(text[pos : m.start()])
            ids.append(self._added_ids[m.group().lstrip()])
            pos = m.end()
        ids += self._segment_ids(text[pos:])
        return ids

    def _segment_ids(self, segment: str) -> list[int]:
        if not segment:
            return []
        text = self.normalize(segment).replace(" ", "\u2581")
        if not text:
            return []
        if not text.startswith("\u2581"):
            text = "\u2581" + text
        ids: list[int] = []
        for word in re.findall("\u2581[^\u2581]*", text):
            ids += self._viterbi(word)
        return ids

    def build(
        self, first: Sequence[int], second: Sequence[int] | None = None
    ) -> tuple[list[int], list[int]]:
        """``[CLS] a [SEP] (b [SEP])`` and its token types."""
        ids = [self.cls_id, *first, self.sep_id]
        types = [0] * len(ids)
        if second is not None:
            ids += [*second, self.sep_id]
            types += [1] * (len(second) + 1)
        return ids, types

    def encode(
        self,
        texts: str | Sequence[str],
        pairs: str | Sequence[str] | None = None,
        *,
        max_length: int | None = 512,
        truncation: bool = True,
        padding: str = "longest",
    ) -> Encoding:
        """Tokenize a batch.

        ``padding``: "longest" (to the longest in the batch), "max_length", or "none"
        (only valid for a single text). Truncation follows transformers'
        "longest_first": drop tokens from the longer of the two segments.
        """
        if isinstance(texts, str):
            texts = [texts]
        if isinstance(pairs, str):
            pairs = [pairs]
        if pairs is not None and len(pairs) != len(texts):
            raise TokenizerError(f"{len(texts)} texts but {len(pairs)} pair texts")
        rows: list[tuple[list[int], list[int]]] = []
        for i, text in enumerate(texts):
            a = self.tokenize_ids(text)
            b = self.tokenize_ids(pairs[i]) if pairs is not None else None
            if max_length is not None:
                budget = max_length - (3 if b is not None else 2)
                if budget < 0:
                    raise TokenizerError(f"max_length={max_length} leaves no room for a token")
                over = len(a) + (len(b) if b is not None else 0) - budget
                if over > 0 and not truncation:
                    raise TokenizerError(
                        f"text {i} is {over + budget + 2} tokens, longer than max_length="
                        f"{max_length}; shorten it or allow truncation"
                    )
                while over > 0:
                    if b is not None and len(b) > len(a):
                        b.pop()
                    else:
                        a.pop()
                    over -= 1
            rows.append(self.build(a, b))
        if padding == "max_length":
            if max_length is None:
                raise TokenizerError("padding='max_length' needs max_length")
            width = max_length
        elif padding == "longest":
            width = max(len(ids) for ids, _ in rows)
        elif padding == "none":
            if len(rows) != 1:
                raise TokenizerError("padding='none' needs a single text")
            width = len(rows[0][0])
        else:
            raise TokenizerError(f"unknown padding {padding!r}")
        enc = Encoding([], [], [])
        for ids, types in rows:
            pad = width - len(ids)
            enc.input_ids.append(ids + [self.pad_id] * pad)
            enc.attention_mask.append([1] * len(ids) + [0] * pad)
            enc.token_type_ids.append(types + [0] * pad)
        return enc
