"""A student's factorized embedding started from a teacher with its own tokenizer
(``albert-edge train --teacher DIR --teacher-embeddings``).

Why: a student trained from scratch learns its V×E word table from the task's rows alone,
and a sentence-level task (SST-2's phrases) leaves most of the 30k pieces barely trained,
so it generalises worst exactly where a pretrained teacher knows the most: which words
mean alike. Tang et al. (2019) started their distilled BiLSTM from pretrained word vectors
for that reason. ALBERT's factorized embedding makes the transfer cheap and exact in
shape: the teacher's input embeddings (V'×H') are moved to the student's vocabulary and
projected to the student's E, and the E×H mapping learns the rest.

How (:func:`transfer`):

* each SentencePiece piece of the student is the mean of the teacher's input embeddings of
  its text in the teacher's tokenization: a word-start piece (``▁word``) as the teacher
  pieces ``word`` becomes, a continuation piece as the teacher's continuation token where
  its vocabulary has one (WordPiece ``##ing``), else its text's pieces; the special pieces
  (pad, unk, CLS, SEP, MASK) as the teacher's tokens of the same role; a piece whose text
  the teacher only reads as its unknown token gets the unknown token's vector (counted);
* the projection is the top-E principal directions of the teacher's whole word table
  (centred), so the directions that tell the teacher's words apart are kept;
* the teacher's position and token-type embeddings go through the same projection (the
  teacher adds the three before its LayerNorm, so one linear map keeps their sum), and all
  three are scaled by one factor that gives the word table the student's own init spread
  (``initializer_range``): the LayerNorm after them sees the teacher's geometry, Adam's
  step sizes stay those of a fresh student.

The student's LayerNorm, E×H mapping, layers and head start as ``--seed`` makes them.
Computed once per run (an SVD of the teacher's table: a second on 2 cores for MiniLM).
"""

from __future__ import annotations

from typing import Any

from albert_edge.learn.errors import LearnError

# The special pieces of ALBERT's SentencePiece vocabulary and the teacher tokenizer's
# attribute of the same role.
_ROLES = {
    "<pad>": "pad_token",
    "<unk>": "unk_token",
    "[CLS]": "cls_token",
    "[SEP]": "sep_token",
    "[MASK]": "mask_token",
}
# Teachers whose positions start after the padding index (RoBERTa's convention).
POSITION_OFFSET = ("roberta", "xlm-roberta", "camembert")
WORD_START = "\u2581"


def check_width(student_config: Any, teacher_width: int, where: str) -> None:
    """Refused in one line where the student's E is wider than the teacher's embedding
    width (a projection cannot add directions the teacher does not have)."""
    e = int(student_config.embedding_size)
    if e > teacher_width:
        raise LearnError(
            f"--teacher-embeddings: the student's embedding size {e} is wider than the "
            f"teacher's {teacher_width} ({where}); give --config embedding_size <= "
            f"{teacher_width} or drop the flag"
        )


def config_width(teacher_config: dict[str, Any]) -> int | None:
    """The teacher's input-embedding width as its ``config.json`` says (ELECTRA/ALBERT
    ``embedding_size``, BERT ``hidden_size``, DistilBERT ``dim``); None where it says
    none (the loaded table is checked then)."""
    for key in ("embedding_size", "hidden_size", "dim"):
        value = teacher_config.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def piece_ids(piece: str, tokenizer: Any, vocab: dict[str, int] | None = None) -> list[int]:
    """The teacher's token ids for one student piece (see the module's rules); [] where
    its text has none (a bare word-start piece). ``vocab``: the tokenizer's
    ``get_vocab()``, given once by a caller that maps many pieces (it is rebuilt per call)."""
    role = _ROLES.get(piece)
    if role is not None:
        token = getattr(tokenizer, role, None)
        return [int(tokenizer.convert_tokens_to_ids(token))] if token is not None else []
    if vocab is None:
        vocab = tokenizer.get_vocab()
    if piece.startswith(WORD_START):
        text = piece[len(WORD_START) :]
    else:
        text = piece
        for cont in ("##" + piece.lower(), "##" + piece):
            if cont in vocab:
                return [int(vocab[cont])]
    if not text:
        return []
    return [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]


def mapped_table(pieces: list[str], tokenizer: Any, table: Any) -> tuple[Any, dict[str, int]]:
    """(one teacher-space row per student piece, counts of how they were found)."""
    import torch

    unk = getattr(tokenizer, "unk_token_id", None)
    rows, counts = [], {"pieces": len(pieces), "mapped": 0, "unknown": 0, "empty": 0}
    fallback = table[int(unk)] if unk is not None else table.mean(0)
    vocab = tokenizer.get_vocab()
    for piece in pieces:
        ids = piece_ids(piece, tokenizer, vocab)
        known = [i for i in ids if i != unk or piece == "<unk>"]
        if known:
            rows.append(table[known].mean(0))
            counts["mapped"] += 1
        else:
            rows.append(fallback)
            counts["unknown" if ids else "empty"] += 1
    return torch.stack(rows), counts


def transfer(model: Any, teacher: Any, sp: Any) -> dict[str, Any]:
    """Set ``model``'s word, position and token-type embeddings from ``teacher`` (a
    :class:`~albert_edge.learn.teacher.Teacher`) over the student's SentencePiece
    processor ``sp``; return what was done, for ``training.json``."""
    import torch

    emb = model.base_model.embeddings
    t_model = teacher.model
    word = t_model.get_input_embeddings().weight.detach().float().cpu()
    check_width(model.config, int(word.shape[1]), f"--teacher {teacher.path}")
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    if len(pieces) != emb.word_embeddings.weight.shape[0]:
        raise LearnError(
            f"--teacher-embeddings: the student's table has {emb.word_embeddings.weight.shape[0]} "
            f"rows, its spiece.model {len(pieces)} pieces; give the --spiece of its vocabulary"
        )
    rows, counts = mapped_table(pieces, teacher.tokenizer, word)
    mean = word.mean(0)
    _, s, vh = torch.linalg.svd(word - mean, full_matrices=False)
    e = int(model.config.embedding_size)
    proj = vh[:e].T  # H' x E
    new_word = (rows - mean) @ proj
    scale = float(model.config.initializer_range) / max(float(new_word.std()), 1e-12)
    done = ["word"]
    with torch.no_grad():
        emb.word_embeddings.weight.copy_(new_word * scale)
        t_emb = getattr(t_model.base_model, "embeddings", None)
        t_pos = getattr(t_emb, "position_embeddings", None)
        if t_pos is not None and getattr(t_model.config, "position_embedding_type", "absolute") in (
            "absolute",
            None,
        ):
            offset = (
                int(t_model.config.pad_token_id) + 1
                if t_model.config.model_type in POSITION_OFFSET
                else 0
            )
            pos = t_pos.weight.detach().float().cpu()[offset:]
            n = min(pos.shape[0], emb.position_embeddings.weight.shape[0])
            emb.position_embeddings.weight[:n].copy_((pos[:n] @ proj) * scale)
            done.append(f"positions 0-{n - 1}")
        t_type = getattr(t_emb, "token_type_embeddings", None)
        if t_type is not None:
            types = t_type.weight.detach().float().cpu()
            n = min(types.shape[0], emb.token_type_embeddings.weight.shape[0])
            emb.token_type_embeddings.weight[:n].copy_((types[:n] @ proj) * scale)
            done.append(f"token types 0-{n - 1}")
    return {
        "from": "the teacher's input embeddings, projected to E by its word table's PCA",
        "tables": done,
        "embedding_size": e,
        "teacher_hidden": int(word.shape[1]),
        "variance_kept": round(float((s[:e] ** 2).sum() / (s**2).sum()), 4),
        "scale": round(scale, 6),
        **counts,
    }
