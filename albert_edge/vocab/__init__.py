"""Vocabulary trimming and a smaller factorized embedding for deployment.

``albert-edge trim`` keeps only the SentencePiece pieces a deployment's text needs (plus
everything that keeps unseen text tokenizable: the special and user-defined pieces, every
single-character piece, byte pieces, and the unigram score range) and re-indexes the
SentencePiece model, the embedding rows and any MLM decoder together, so the result is an
ordinary Hugging Face ALBERT directory that ``convert`` and every client read as written.

Modules: :mod:`~albert_edge.vocab.spm_surgery` (the model protobuf),
:mod:`~albert_edge.vocab.corpus` (reading the text), :mod:`~albert_edge.vocab.trim` (the
checkpoint), :mod:`~albert_edge.vocab.rank` (the low-rank embedding),
and the ``trim.json`` record a trimmed checkpoint carries, which the checkpoint loader
checks and ``convert`` records (:data:`albert_edge.checkpoint.TRIM_FILE`,
:func:`~albert_edge.checkpoint.read_trim_record`). Import from the submodules; this file
imports nothing.
"""
