"""A teacher with its own tokenizer: any Hugging Face encoder fine-tuned for the task
(BERT family at least), read with transformers' ``AutoTokenizer`` / ``AutoModelFor...``
from its directory (local files only, never remote code).

Why not the ALBERT path of :mod:`albert_edge.learn.distil`: that teacher reads the
student's token ids, so it must share the student's SentencePiece vocabulary. A teacher
with another tokenizer reads the *raw text* in its own pieces, and its outputs are moved
to the student's pieces at the level both share:

* sequence classification (single and pair): the logits, one vector per row;
* token classification: one distribution per *word* (the teacher's first piece of each
  word), put on the student's first piece of the same word (:func:`word_targets`);
* question answering: start/end distributions over the context's *characters* (each
  teacher piece's probability at the character it starts / ends at), summed per word
  and put on the student's first piece (start) / last piece (end) of that word in each
  window; the mass of words outside a window goes to its ``[CLS]``, where the label of
  a window without the answer points (:func:`char_to_words`, :func:`span_targets`).

With ``--distil-hidden`` (sequence classification), the teacher's ``[CLS]`` state at
the layers mapped to the student's (:func:`~albert_edge.learn.distil.layer_map`) is cached
beside the logits: the one position both tokenizations share, so the student's ``[CLS]``
can follow it through a learned projection (Patient KD, Sun et al. 2019;
:func:`~albert_edge.learn.distil.cls_term`). Tokens, and so the other positions, do not
align across tokenizers.

The teacher runs once over the transfer set (the labelled rows, their augmented copies
and ``--transfer`` text, :func:`augment`) and its outputs, in its own word/character
terms, are cached in a file beside the output keyed by the teacher's weights, the data
and the augmentation settings (:func:`cache_key`), so a second run with the same inputs
runs no teacher forward.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from albert_edge.learn.errors import LearnError

TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")
_HF_CLASS = {
    "sequence-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
    "question-answering": "AutoModelForQuestionAnswering",
}
_SUFFIX = {
    "sequence-classification": "ForSequenceClassification",
    "token-classification": "ForTokenClassification",
    "question-answering": "ForQuestionAnswering",
}
NEG = -1e4  # log-probability of a position the teacher puts no mass on


def teacher_config(path: Path) -> dict[str, Any] | None:
    """The teacher directory's ``config.json`` as a dict; None where it is missing,
    unreadable or not an object (the callers say which in their own line)."""
    try:
        data = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_foreign(path: str | Path | None) -> bool:
    """Whether ``path`` is a teacher with a tokenizer of its own: a directory whose
    ``config.json`` names a model type other than ALBERT, or that holds a WordPiece /
    ``tokenizer.json`` tokenizer and no ``spiece.model``."""
    if path is None:
        return False
    p = Path(path)
    if not p.is_dir():
        return False
    cfg = teacher_config(p)
    if cfg is not None and str(cfg.get("model_type", "albert")) != "albert":
        return True
    has_tok = any((p / n).is_file() for n in TOKENIZER_FILES)
    return has_tok and not (p / "spiece.model").is_file()


def check_dir(path: Path) -> None:
    """One line, before any model loads, where ``path`` cannot be a teacher with its own
    tokenizer: no ``config.json``, no tokenizer files, or no weights."""
    where = f"--teacher {path}"
    if teacher_config(path) is None:
        raise LearnError(f"{where}: no readable config.json; pass a Hugging Face model directory")
    if not any((path / n).is_file() for n in TOKENIZER_FILES):
        raise LearnError(
            f"{where}: no tokenizer (tokenizer.json or vocab.txt) beside the model; save the "
            "teacher's tokenizer into it (tokenizer.save_pretrained(DIR))"
        )
    if not any((path / n).is_file() for n in ("model.safetensors", "pytorch_model.bin")):
        raise LearnError(f"{where}: no model.safetensors; save the fine-tuned teacher into it")


@dataclass
class Teacher:
    """A loaded foreign teacher: transformers' model (eval, frozen) and fast tokenizer."""

    path: Path
    model: Any
    tokenizer: Any
    head: str
    labels: list[str]
    max_len: int

    def record(self) -> dict[str, Any]:
        """Its identity for ``training.json``: class, tokenizer, sha256 of its files."""
        from albert_edge.manifest import sha256_file

        names = ("config.json", "model.safetensors", "pytorch_model.bin", *TOKENIZER_FILES)
        return {
            "name": self.path.name,
            "architecture": type(self.model).__name__,
            "tokenizer": type(self.tokenizer).__name__,
            "labels": self.labels,
            "files": {n: sha256_file(self.path / n) for n in names if (self.path / n).is_file()},
        }


def load(path: Path, head: str, labels: Sequence[str]) -> Teacher:
    """The teacher at ``path`` for the task's ``head`` and ``labels``; one line where its
    architecture, tokenizer or labels do not fit."""
    import transformers

    check_dir(path)
    where = f"--teacher {path}"
    cfg = teacher_config(path) or {}
    archs = [str(a) for a in cfg.get("architectures") or []]
    if head not in _SUFFIX:
        raise LearnError(f"{where}: a teacher with its own tokenizer teaches {', '.join(_SUFFIX)}")
    if not any(a.endswith(_SUFFIX[head]) for a in archs):
        raise LearnError(
            f"{where}: architectures {archs or 'none'}; the task needs a *{_SUFFIX[head]} "
            "teacher fine-tuned for it"
        )
    if head != "question-answering":
        have = _names(cfg)
        generic = [f"LABEL_{i}" for i in range(len(labels))]
        if have != list(labels) and have != generic:
            raise LearnError(
                f"{where}: labels {', '.join(have)}, the task's are {', '.join(labels)}; "
                "fine-tune the teacher on the same labels"
            )
    tok = transformers.AutoTokenizer.from_pretrained(
        str(path), local_files_only=True, trust_remote_code=False
    )
    if not getattr(tok, "is_fast", False):
        raise LearnError(f"{where}: its tokenizer has no fast version (offsets are needed)")
    cls = getattr(transformers, _HF_CLASS[head])
    safe = (path / "model.safetensors").is_file()
    model = cls.from_pretrained(
        str(path), local_files_only=True, trust_remote_code=False, use_safetensors=safe
    )
    model.eval().requires_grad_(False)
    limit = int(getattr(model.config, "max_position_embeddings", 512) or 512)
    return Teacher(path, model, tok, head, list(labels), min(limit, 512))


def _names(cfg: dict[str, Any]) -> list[str]:
    id2label = cfg.get("id2label") or {}
    return [str(id2label[k]) for k in sorted(id2label, key=int)]


# --- the transfer set ---------------------------------------------------------------------


@dataclass(frozen=True)
class Augment:
    """Tang et al. (2019) / TinyBERT-style augmentation: ``copies`` new rows per labelled
    row; in each, every word is, with ``p_mask``, the teacher's mask token, else with
    ``p_replace`` a random training word of the same frequency bucket (floor(log2
    count)), else kept. Seeded."""

    copies: int = 0
    p_mask: float = 0.1
    p_replace: float = 0.1
    seed: int = 13

    def record(self) -> dict[str, Any]:
        return {
            "copies": self.copies,
            "p_mask": self.p_mask,
            "p_replace": self.p_replace,
            "seed": self.seed,
            "how": "per word: mask token with p_mask, else a random same-frequency-bucket "
            "(floor log2 count) word of the training rows with p_replace (Tang et al. 2019)",
        }


def buckets(sentences: Sequence[Sequence[str]]) -> tuple[dict[str, int], dict[int, list[str]]]:
    """(word -> bucket, bucket -> words in first-seen order) over ``sentences``."""
    counts: dict[str, int] = {}
    for words in sentences:
        for w in words:
            counts[w] = counts.get(w, 0) + 1
    of = {w: int(math.log2(c)) for w, c in counts.items()}
    members: dict[int, list[str]] = {}
    for w, b in of.items():
        members.setdefault(b, []).append(w)
    return of, members


def augment(
    sentences: Sequence[Sequence[str]],
    aug: Augment,
    mask_token: str,
    only: Callable[[Sequence[str]], bool] | None = None,
) -> list[list[list[str]]]:
    """``aug.copies`` augmented copies of each sentence (a list of words): result[i] holds
    sentence i's copies. Deterministic for a seed. ``only``: copies for the sentences it
    accepts, none (and no draws) for the others; the frequency buckets still count every
    sentence."""
    import numpy as np

    if aug.copies <= 0:
        return [[] for _ in sentences]
    of, members = buckets(sentences)
    rng = np.random.default_rng(aug.seed)
    out = []
    for words in sentences:
        copies: list[list[str]] = []
        if only is not None and not only(words):
            out.append(copies)
            continue
        for _ in range(aug.copies):
            new = []
            for w in words:
                r = rng.random()
                if r < aug.p_mask:
                    new.append(mask_token)
                elif r < aug.p_mask + aug.p_replace:
                    pool = members[of[w]]
                    new.append(pool[int(rng.integers(len(pool)))])
                else:
                    new.append(w)
            copies.append(new)
        out.append(copies)
    return out


def read_transfer(path: Path, pair: bool) -> list[tuple[str, str | None]]:
    """``--transfer FILE``: one sentence per line (a pair: the two texts TAB-separated);
    blank lines skipped; one line naming the file where it holds nothing usable."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LearnError(f"--transfer {path}: cannot read it ({type(exc).__name__})") from None
    rows: list[tuple[str, str | None]] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if pair:
            parts = line.split("\t")
            if len(parts) != 2:
                raise LearnError(
                    f"--transfer {path}: line {n} is not two TAB-separated texts (the task "
                    "reads sentence pairs)"
                )
            rows.append((parts[0], parts[1]))
        else:
            rows.append((line, None))
    if not rows:
        raise LearnError(f"--transfer {path}: no text in it; give one sentence per line")
    return rows


# --- mapping the teacher's outputs onto the student's pieces --------------------------------


def word_targets(word_ids: Sequence[int], word_logits: Any, num_labels: int) -> Any:
    """``[len(word_ids), num_labels]`` teacher logits for one student feature: the row of
    word ``w`` (``word_logits[w]``) at each position whose ``word_ids`` is ``w`` (the
    student's first piece of each word, as :func:`albert_edge.tasks.tokens.encode_tokens`
    marks it), zeros elsewhere (those positions carry no loss)."""
    import numpy as np

    out = np.zeros((len(word_ids), num_labels), dtype=np.float32)
    for i, w in enumerate(word_ids):
        if w >= 0:
            out[i] = word_logits[w]
    return out


def char_to_words(char_p: Any, word_starts: Sequence[int], words: Sequence[str]) -> Any:
    """A distribution over the context's characters summed per word (a character outside
    every word, a space, goes to the word before it)."""
    import bisect

    import numpy as np

    out = np.zeros(len(words), dtype=np.float64)
    for c in np.nonzero(char_p)[0]:
        w = max(0, bisect.bisect_right(word_starts, int(c)) - 1)
        out[w] += char_p[c]
    return out


def span_targets(word_ids: Sequence[int], start_w: Any, end_w: Any) -> tuple[Any, Any]:
    """Start/end log-probabilities over one student QA window: word ``w``'s start mass on
    its first piece in the window, its end mass on its last piece; the mass of words the
    window does not hold on position 0 (``[CLS]``, the no-answer-here target)."""
    import numpy as np

    n = len(word_ids)
    start, end = np.zeros(n), np.zeros(n)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, w in enumerate(word_ids):
        if w >= 0:
            first.setdefault(w, i)
            last[w] = i
    for w, i in first.items():
        start[i] += start_w[w]
    for w, i in last.items():
        end[i] += end_w[w]
    start[0] += max(0.0, 1.0 - start.sum())
    end[0] += max(0.0, 1.0 - end.sum())
    with np.errstate(divide="ignore"):
        ls = np.where(start > 0, np.log(np.maximum(start, 1e-30)), NEG)
        le = np.where(end > 0, np.log(np.maximum(end, 1e-30)), NEG)
    return ls.astype(np.float32), le.astype(np.float32)


# --- running the teacher once, cached -------------------------------------------------------


def cache_key(teacher: Teacher, data_sha: str, settings: dict[str, Any]) -> str:
    """sha256 of the teacher's weights, the data and the augmentation/transfer settings."""
    from albert_edge.manifest import sha256_file

    weights = next(
        p
        for n in ("model.safetensors", "pytorch_model.bin")
        if (p := teacher.path / n).is_file() or n == "pytorch_model.bin"
    )
    rec = {
        "weights": sha256_file(weights),
        "data": data_sha,
        "settings": settings,
        "max_len": teacher.max_len,
    }
    return hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()


def cache_dir(out: Path) -> Path:
    """The teacher cache of output ``out``: a hidden sibling (never inside it)."""
    return out.with_name(f".{out.name}.teacher-cache")


@dataclass
class Labelled:
    """The teacher's outputs over the transfer rows, in its own word/character terms:
    classification ``[rows, L]`` logits; token classification one ``[words, L]`` array per
    row; QA one (start, end) per-word probability pair per row. ``seconds``/``rows``: the
    forward's cost (0 and the cache's rows on a cache hit); ``states``: the ``[CLS]``
    states at the asked teacher layers (classification only)."""

    outputs: list[Any]
    seconds: float
    rows: int
    cached: bool
    key: str = ""
    notes: list[str] = field(default_factory=list)
    states: Any = None  # [rows, layers, H] float16 [CLS] states (``layers`` given), or None
    # per row, [words, word layers, H] float16 word states (``word_layers`` given), or None
    words: Any = None


def label(
    teacher: Teacher,
    rows: list[Any],
    kind: str,
    cache: Path,
    key: str,
    layers: Sequence[int] = (),
    word_layers: Sequence[int] = (),
) -> Labelled:
    """The teacher's outputs for ``rows`` (read from ``cache/key`` where a run with the
    same key wrote them, else computed and written there); with ``layers`` (classification),
    its ``[CLS]`` state at each of those layers too (``hidden_states[j]``, 0: embeddings);
    with ``word_layers`` (classification), each whitespace word's mean state at those
    layers (:func:`~albert_edge.learn.teacher_words.teacher_word_states`)."""
    import numpy as np

    file = cache / f"{key}.npz"
    if file.is_file():
        try:
            with np.load(file, allow_pickle=False) as z:
                outputs = _unpack(z, kind, len(rows))
                states = _unpack_states(z, len(rows), len(layers))
                words = _unpack_words(z, len(rows), len(word_layers))
            return Labelled(outputs, 0.0, len(rows), True, key, states=states, words=words)
        except (OSError, ValueError, KeyError):
            pass  # unreadable: recomputed and replaced
    t0 = time.time()
    outputs, states, words = _forward(teacher, rows, kind, layers=layers, word_layers=word_layers)
    seconds = time.time() - t0
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".{key}.tmp.npz"
    packed = _pack(outputs, kind)
    if states is not None:
        packed["cls_states"] = states
    if words is not None:
        packed["word_sizes"] = np.array([len(w) for w in words], dtype=np.int64)
        packed["word_states"] = np.concatenate(words)
    np.savez(tmp, **packed)
    tmp.replace(file)
    return Labelled(outputs, seconds, len(rows), False, key, states=states, words=words)


def _unpack_words(z: Any, n: int, layers: int) -> Any:
    """The cached word states, one ``[words, layers, H]`` array per row; None when none
    were asked."""
    import numpy as np

    if not layers:
        return None
    sizes, states = z["word_sizes"], z["word_states"]
    if len(sizes) != n or states.shape[1] != layers or int(sizes.sum()) != len(states):
        raise ValueError("word_states")
    return list(np.split(states, np.cumsum(sizes)[:-1]))


def _unpack_states(z: Any, n: int, layers: int) -> Any:
    """The cached ``[CLS]`` states (``layers`` asked), checked for shape; None when none
    were asked."""
    if not layers:
        return None
    states = z["cls_states"]
    if states.shape[:2] != (n, layers):
        raise ValueError("cls_states")
    return states


def _pack(outputs: list[Any], kind: str) -> dict[str, Any]:
    import numpy as np

    if kind == "classification":
        return {"logits": np.asarray(outputs, dtype=np.float32)}
    if kind == "token-classification":
        sizes = np.array([len(o) for o in outputs], dtype=np.int64)
        return {"sizes": sizes, "logits": np.concatenate(outputs).astype(np.float32)}
    sizes = np.array([len(s) for s, _ in outputs], dtype=np.int64)
    return {
        "sizes": sizes,
        "start": np.concatenate([s for s, _ in outputs]),
        "end": np.concatenate([e for _, e in outputs]),
    }


def _unpack(z: Any, kind: str, n: int) -> list[Any]:
    import numpy as np

    if kind == "classification":
        logits = z["logits"]
        if len(logits) != n:
            raise ValueError("rows")
        return list(logits)
    cuts = np.cumsum(z["sizes"])[:-1]
    if len(z["sizes"]) != n:
        raise ValueError("rows")
    if kind == "token-classification":
        return list(np.split(z["logits"], cuts))
    return list(zip(np.split(z["start"], cuts), np.split(z["end"], cuts), strict=True))


def _forward(
    teacher: Teacher,
    rows: list[Any],
    kind: str,
    batch: int = 32,
    layers: Sequence[int] = (),
    word_layers: Sequence[int] = (),
) -> tuple[list[Any], Any, Any]:
    """(the teacher's outputs for ``rows``, in their order; their ``[CLS]`` states at
    ``layers`` as one ``[rows, layers, H]`` float16 array, or None without ``layers``;
    per row its word states at ``word_layers``, or None without them).
    Classification and tagging rows run shortest first (:func:`_by_length`): a batch pads
    to its longest row, and a transfer set of short phrases and long sentences mixed pays
    for that padding twice over in random order; padding is masked, so each row's output
    does not depend on it."""
    import numpy as np

    order = _by_length(rows, kind)
    done, cls, wrd = _forward_in_order(
        teacher, [rows[i] for i in order], kind, batch, layers, word_layers
    )
    out: list[Any] = [None] * len(rows)
    words: list[Any] = [None] * len(rows)
    for n, i in enumerate(order):
        out[i] = done[n]
        if word_layers:
            words[i] = wrd[n]
    if not layers:
        return out, None, words if word_layers else None
    states = np.empty((len(rows), len(layers), cls[0].shape[-1]), dtype=np.float16)
    states[np.asarray(order, dtype=np.int64)] = np.stack(cls)
    return out, states, words if word_layers else None


def _by_length(rows: list[Any], kind: str) -> list[int]:
    """Row indices shortest first (characters of the text, or words of a sentence);
    QA's rows keep their order (a question's windows are cut from its context)."""
    if kind == "classification":
        return sorted(range(len(rows)), key=lambda i: len(rows[i][0]) + len(rows[i][1] or ""))
    if kind == "token-classification":
        return sorted(range(len(rows)), key=lambda i: sum(len(w) + 1 for w in rows[i]))
    return list(range(len(rows)))


def _forward_in_order(
    teacher: Teacher,
    rows: list[Any],
    kind: str,
    batch: int,
    layers: Sequence[int] = (),
    word_layers: Sequence[int] = (),
) -> tuple[list[Any], list[Any], list[Any]]:
    import torch

    from albert_edge.learn.teacher_words import teacher_word_states

    tok, model = teacher.tokenizer, teacher.model
    dev = next(model.parameters()).device
    out: list[Any] = []
    cls: list[Any] = []  # per row, [layers, H] float16 (``layers`` given)
    wrd: list[Any] = []  # per row, [words, word layers, H] float16 (``word_layers`` given)
    with torch.no_grad():
        for i in range(0, len(rows), batch):
            part = rows[i : i + batch]
            if kind == "classification":
                a: list[Any] = [r[0] for r in part]
                b: list[Any] | None = [r[1] for r in part] if part[0][1] is not None else None
                if word_layers:  # its whitespace words: each piece's word is known
                    a = [t.split() for t in a]
                    b = [t.split() for t in b] if b is not None else None
                enc = tok(
                    a, b, truncation=True, max_length=teacher.max_len, padding=True,
                    return_tensors="pt", is_split_into_words=bool(word_layers),
                )  # fmt: skip
                want = bool(layers) or bool(word_layers)
                res = model(**enc.to(dev), output_hidden_states=want)
                out += list(res.logits.float().cpu().numpy())
                if layers:
                    at = torch.stack([res.hidden_states[j][:, 0] for j in layers], 1)
                    cls += list(at.to(torch.float16).cpu().numpy())
                if word_layers:
                    hs = torch.stack([res.hidden_states[j] for j in word_layers], 1).float()
                    hs_np = hs.cpu().numpy()  # [B, layers, T, H]
                    for j in range(len(part)):
                        n_a = len(a[j])
                        n = n_a + (len(b[j]) if b is not None else 0)
                        wrd.append(
                            teacher_word_states(
                                enc.word_ids(j), enc.sequence_ids(j), hs_np[j], n_a, n
                            )
                        )
            elif kind == "token-classification":
                enc = tok(
                    [list(r) for r in part], is_split_into_words=True, truncation=True,
                    max_length=teacher.max_len, padding=True, return_tensors="pt",
                )  # fmt: skip
                logits = model(**enc.to(dev)).logits.float().cpu().numpy()
                for j, words in enumerate(part):
                    out.append(_first_piece_rows(enc.word_ids(j), logits[j], len(words)))
            else:
                out += _qa_batch(teacher, part)
    return out, cls, wrd


def _first_piece_rows(word_ids: Sequence[int | None], logits: Any, n: int) -> Any:
    """Per word, the logits at the teacher's first piece of it (zeros for a word the
    teacher's window cut off: a uniform distribution)."""
    import numpy as np

    rows = np.zeros((n, logits.shape[-1]), dtype=np.float32)
    seen: set[int] = set()
    for i, w in enumerate(word_ids):
        if w is not None and w not in seen:
            seen.add(w)
            rows[w] = logits[i]
    return rows


def _qa_batch(teacher: Teacher, part: list[Any]) -> list[Any]:
    """Per question, (start, end) probabilities per context word: each teacher piece's
    softmax probability at the character it starts (start) / ends (end) at, summed per word."""
    import numpy as np
    import torch

    enc = teacher.tokenizer(
        [ex.question for ex in part], [ex.context for ex in part], truncation="only_second",
        max_length=teacher.max_len, padding=True, return_offsets_mapping=True,
        return_tensors="pt",
    )  # fmt: skip
    offsets = enc.pop("offset_mapping").numpy()
    res = teacher.model(**enc.to(next(teacher.model.parameters()).device))
    out = []
    for j, ex in enumerate(part):
        seq = enc.sequence_ids(j)
        ctx = np.array([s == 1 for s in seq])
        pair = []
        for logits, at in ((res.start_logits[j], 0), (res.end_logits[j], 1)):
            lg = logits.float().cpu().masked_fill(~torch.from_numpy(ctx), -1e9)
            p = torch.softmax(lg, -1).numpy()
            chars = np.zeros(len(ex.context) + 1)
            for i in np.nonzero(ctx)[0]:
                s, e = offsets[j, i]
                chars[s if at == 0 else max(s, e - 1)] += p[i]
            pair.append(char_to_words(chars, ex.word_starts, ex.words).astype(np.float32))
        out.append((pair[0], pair[1]))
    return out


# --- the student's side: transfer rows, their features, the targets per feature ------------


@dataclass
class Distilled:
    """What the task trainer distils from: the teacher's targets per student feature
    (``[T, L]`` logits for NER, ``[L]`` for classification, (start, end) log-probabilities
    for QA) and the record for ``training.json``. Stands in for the teacher model in the
    loop: :meth:`outputs` gives a batch's targets as the teacher's forward would."""

    teacher: Teacher
    targets: list[Any]
    record: dict[str, Any]
    states: Any = None  # per student feature, the teacher's [CLS] states [layers, H], or None
    # per student feature, the teacher's word states [words, word layers, H] float16
    # (:mod:`albert_edge.learn.teacher_words`), the word of each student token (None: the
    # feature's words did not align), the states' (mean, std) per layer and dimension, and
    # the student layers that follow them (set by the caller that mapped the layers)
    words: Any = None
    word_ids: Any = None
    word_norm: Any = None
    word_layers: Any = None

    def outputs(self, idx: Sequence[int], batch: dict[str, Any]) -> Any:
        """The batch's teacher outputs, padded to its width, on its device (with
        ``states``: ``cls_states`` ``[B, layers, H]`` beside the logits; with ``words``:
        ``word_states`` ``[B, W, layers, H]`` standardised, ``word_mask`` ``[B, W]`` and
        ``word_ids`` ``[B, T]``, :func:`~albert_edge.learn.distil.word_term`'s inputs)."""
        from types import SimpleNamespace

        import numpy as np
        import torch

        width = batch["input_ids"].shape[-1]
        device = batch["input_ids"].device
        if self.teacher.head == "sequence-classification":
            t = np.stack([self.targets[f] for f in idx])
            got = SimpleNamespace(logits=torch.from_numpy(t).to(device))
            if self.states is not None:
                cls = np.stack([self.states[f] for f in idx]).astype(np.float32)
                got.cls_states = torch.from_numpy(cls).to(device)
            if self.words is not None:
                states, mask, ids = self._word_batch(idx, width)
                got.word_states = torch.from_numpy(states).to(device)
                got.word_mask = torch.from_numpy(mask).to(device)
                got.word_ids = torch.from_numpy(ids).to(device)
            return got
        if self.teacher.head == "token-classification":
            L = self.targets[idx[0]].shape[-1]
            t = np.zeros((len(idx), width, L), dtype=np.float32)
            for r, f in enumerate(idx):
                t[r, : len(self.targets[f])] = self.targets[f]
            return SimpleNamespace(logits=torch.from_numpy(t).to(device))
        s = np.full((len(idx), width), NEG, dtype=np.float32)
        e = np.full((len(idx), width), NEG, dtype=np.float32)
        for r, f in enumerate(idx):
            a, b = self.targets[f]
            s[r, : len(a)], e[r, : len(b)] = a, b
        return SimpleNamespace(
            start_logits=torch.from_numpy(s).to(device), end_logits=torch.from_numpy(e).to(device)
        )

    def _word_batch(self, idx: Sequence[int], width: int) -> tuple[Any, Any, Any]:
        """(standardised teacher word states ``[B, W, layers, H]``, the words both models
        read ``[B, W]``, each student token's word ``[B, width]``, -1 for none)."""
        import numpy as np

        mean, std = self.word_norm
        ids = np.full((len(idx), width), -1, dtype=np.int64)
        for r, f in enumerate(idx):
            w = self.word_ids[f]
            if w is not None:
                ids[r, : len(w)] = w
        n = max(1, int(ids.max()) + 1)
        states = np.zeros((len(idx), n, *mean.shape), dtype=np.float32)
        mask = np.zeros((len(idx), n), dtype=bool)
        for r, f in enumerate(idx):
            if self.word_ids[f] is None:
                continue
            t = self.words[f][:n].astype(np.float32)
            ok = ~np.isnan(t).any(axis=(1, 2))
            read = np.zeros(n, dtype=bool)
            read[ids[r][ids[r] >= 0]] = True
            k = len(t)
            states[r, :k][ok] = (t[ok] - mean) / std
            mask[r, :k] = ok & read[:k]
        return states, mask, ids


def transfer_set(
    teacher: Teacher,
    fit: Any,
    encode: Any,
    aug: Augment,
    transfer: Path | None,
    cache: Path,
    layers: Sequence[int] = (),
    word_layers: Sequence[int] = (),
    tokenize: Callable[[str], list[int]] | None = None,
) -> tuple[Any, Any, Distilled]:
    """(fit data with the transfer rows appended, its features, the targets): the
    labelled rows, ``aug.copies`` augmented copies of each and the ``--transfer`` lines,
    each labelled by the teacher (its argmax is the hard label of a row that had none);
    with ``layers`` (sequence classification), the teacher's ``[CLS]`` states at them too;
    with ``word_layers`` (sequence classification), its word states at them, aligned to
    the student's pieces by ``tokenize`` (the student's piece ids of one word)."""
    import dataclasses

    kind = fit.kind.value
    for flag, asked in (("--distil-hidden", layers), ("--distil-words", word_layers)):
        if asked and teacher.head != "sequence-classification":
            raise LearnError(
                f"{flag}: the term serves sequence classification with a teacher of its "
                f"own tokenizer; this teacher is {teacher.head}"
            )
    if word_layers and tokenize is None:
        raise ValueError("word_layers needs the student's tokenize")
    rows, new, n_aug = _transfer_rows(teacher, fit, aug, transfer)
    every = rows + new
    settings: dict[str, Any] = {"augment": dataclasses.asdict(aug), "kind": kind}
    if layers:  # a key of its own; without them, the key (and cache) of the logits alone
        settings["cls_layers"] = list(layers)
    if word_layers:
        settings["word_layers"] = list(word_layers)
    data_sha = hashlib.sha256(
        json.dumps([_row_text(r) for r in every], ensure_ascii=False).encode()
    ).hexdigest()
    key = cache_key(teacher, data_sha, settings)
    done = label(teacher, every, kind, cache, key, layers=layers, word_layers=word_layers)
    extra = _teacher_labelled(new, len(rows), done, kind, list(fit.label_names))
    full = dataclasses.replace(fit, examples=list(fit.examples) + extra)
    feats = encode(full)
    targets = _feature_targets(feats, done, teacher.head, len(fit.label_names))
    states = (
        [done.states[feats.example_index[f]] for f in range(len(feats))]
        if done.states is not None
        else None
    )
    record = {
        **teacher.record(),
        "transfer_set": {
            "labelled_rows": len(rows),
            "augmented_rows": n_aug,
            "transfer_file_rows": len(new) - n_aug,
            "rows": len(every),
            "features": len(feats),
            "augment": aug.record(),
        },
        "teacher_cost": {
            "seconds": round(done.seconds, 2),
            "rows": 0 if done.cached else done.rows,
            "cached": done.cached,
            "cache_key": key,
        },
        "mapping": MAPPING[teacher.head],
    }
    distilled = Distilled(teacher, targets, record, states)
    if done.words is not None and tokenize is not None:
        _attach_words(distilled, full, feats, done.words, tokenize)
    return full, feats, distilled


def _attach_words(
    distilled: Distilled, full: Any, feats: Any, words: list[Any], tokenize: Any
) -> None:
    """The teacher's word states per student feature, each feature's token-to-word map
    and the states' standardisation (:mod:`albert_edge.learn.teacher_words`)."""
    from albert_edge.learn.teacher_words import standardise, student_word_ids, word_tokenizer

    one = word_tokenizer(tokenize)
    ids: list[Any] = []
    for f in range(len(feats)):
        ex = full.examples[feats.example_index[f]]
        ids.append(
            student_word_ids(
                feats.input_ids[f], feats.token_type_ids[f], ex.text, ex.text_pair, one
            )
        )
    distilled.words = [words[feats.example_index[f]] for f in range(len(feats))]
    distilled.word_ids = ids
    distilled.word_norm = standardise(words)


# How the teacher's outputs become the student's targets, per head (training.json says it).
MAPPING = {
    "sequence-classification": "the teacher's logits per row (its own tokenization)",
    "token-classification": "the teacher's logits at its first piece of each word, "
    "on the student's first piece of the word",
    "question-answering": "start/end probabilities per context character (teacher "
    "pieces' start/end characters), summed per word, on the student's first/last "
    "piece of the word per window; mass outside a window on its [CLS]",
}


def _transfer_rows(
    teacher: Teacher, fit: Any, aug: Augment, transfer: Path | None
) -> tuple[list[Any], list[Any], int]:
    """(the labelled rows, the new rows, how many of those are augmented copies): text
    (and pair) per classification row, words per NER sentence; a QA teacher distils on
    the labelled questions only (refused with ``--augment``/``--transfer``)."""
    import dataclasses

    kind = fit.kind.value
    mask = str(getattr(teacher.tokenizer, "mask_token", None) or "[MASK]")
    if kind == "question-answering" and (aug.copies or transfer is not None):
        raise LearnError(
            "--augment/--transfer: a question-answering teacher distils on the labelled "
            "questions only (new text has no context to answer from, and augmenting a "
            "context moves its answer spans)"
        )
    new: list[Any] = []
    if kind == "classification":
        rows: list[Any] = [(ex.text, ex.text_pair) for ex in fit.examples]
        a = augment([r[0].split() for r in rows], aug, mask)
        b = (
            augment(
                [(r[1] or "").split() for r in rows],
                dataclasses.replace(aug, seed=aug.seed + 1),
                mask,
            )
            if fit.pair
            else None
        )
        for i, copies in enumerate(a):
            for c, words in enumerate(copies):
                new.append((" ".join(words), " ".join(b[i][c]) if b is not None else None))
        n_aug = len(new)
        if transfer is not None:
            new += read_transfer(transfer, bool(fit.pair))
    elif kind == "token-classification":
        rows = [tuple(ex.words) for ex in fit.examples]
        for copies in augment([list(r) for r in rows], aug, mask):
            new += [tuple(w) for w in copies]
        n_aug = len(new)
        if transfer is not None:
            new += [tuple(t.split()) for t, _ in read_transfer(transfer, False)]
    else:
        rows, n_aug = list(fit.examples), 0
    return rows, new, n_aug


def _teacher_labelled(
    new: list[Any], start: int, done: Any, kind: str, names: list[str]
) -> list[Any]:
    """The new rows as examples, each labelled by the teacher's argmax (its outputs for
    row ``start + j``)."""
    import numpy as np

    from albert_edge.tasks.types import ClassificationExample, TokenExample

    extra: list[Any] = []
    for j, r in enumerate(new, start=start):
        o = done.outputs[j]
        if kind == "classification":
            extra.append(ClassificationExample(r[0], r[1], int(np.argmax(o)), 0))
        else:
            extra.append(TokenExample(r, tuple(names[int(k)] for k in np.argmax(o, -1)), 0))
    return extra


def _feature_targets(feats: Any, done: Any, head: str, n_labels: int) -> list[Any]:
    """Per student feature, the teacher's outputs mapped onto its pieces (:data:`MAPPING`)."""
    import numpy as np

    targets: list[Any] = []
    for f in range(len(feats)):
        o = done.outputs[feats.example_index[f]]
        if head == "sequence-classification":
            targets.append(np.asarray(o, dtype=np.float32))
        elif head == "token-classification":
            targets.append(word_targets(feats.word_ids[f], o, n_labels))
        else:
            targets.append(span_targets(feats.word_ids[f], o[0], o[1]))
    return targets


def _row_text(r: Any) -> Any:
    if isinstance(r, tuple):
        return list(r)
    return [r.id, r.question, r.context]
