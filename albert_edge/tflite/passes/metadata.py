"""litert_metadata: attach LiteRT (TFLite) metadata per the official metadata schema.

Why: a ``.tflite`` without metadata tells a user nothing but tensor shapes — not which
input is the attention mask, which tokenizer makes the ids, what the logits mean or
which label is index 1. The metadata schema (tflite-support ``metadata_schema.fbs``) is
what LiteRT's tools read (``MetadataDisplayer``, the Task Library, Android Studio's
model binding), so the artifact carries its own description: names and descriptions of
``input_ids`` / ``attention_mask`` / ``token_type_ids`` (named ``ids`` / ``mask`` /
``segment_ids`` in the metadata, what the Task Library looks up: see
:data:`TASK_LIBRARY_NAMES`) and every output (a classifier's ``logits`` named
``probability``, likewise), the
SentencePiece model as the subgraph's tokenizer process unit (``spiece.model``), the
class names of ``logits`` as a ``TENSOR_AXIS_LABELS`` file (``labels.txt``), and the
batch policy (see :data:`BATCH_POLICY`).

How: :meth:`LiteRTMetadataPass.run` writes the ``ModelMetadata`` flatbuffer
(:func:`albert_edge.tflite.litert_metadata.build_metadata`) into a buffer referenced by
the model's ``TFLITE_METADATA`` entry. The spec allows one ``SubGraphMetadata``,
describing subgraph 0; every other signature (sequence bucket) has the same inputs and
outputs in the same order, which the pass checks. :meth:`LiteRTMetadataPass.pack`
appends the associated files as the zip tail after the model is serialized.

Postconditions: the buffer reads back (identifier ``M001``) to exactly the names,
descriptions and files that were asked for, one tensor metadata per subgraph-0 input and
output in tensor order; after :meth:`pack`, every file the metadata names is in the zip
tail with the bytes given, and the flatbuffer in front is byte-for-byte unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from albert_edge.tflite import litert_metadata as lm
from albert_edge.tflite.passes.base import TflitePass

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT

BATCH_POLICY = (
    "Batch policy: every signature takes batch 1 with a fixed sequence length (one "
    "signature per length bucket, seq_<L>); pad a sentence to the smallest bucket that "
    "holds it and run a batch as a loop. Resizing the batch axis "
    "(Interpreter.resize_tensor_input, CompiledModel.resize_input_tensor) fails: the "
    "converter bakes the shapes into RESHAPE constants."
)


def _io_names(model: ModelT, si: int) -> tuple[list[str], list[str]]:
    """Signature names of subgraph ``si``'s input and output tensors, in tensor order."""
    sg = model.subgraphs[si]
    by_index: dict[int, str] = {}
    for sd in model.signatureDefs or []:
        if int(sd.subgraphIndex) == si:
            for tm in [*(sd.inputs or []), *(sd.outputs or [])]:
                by_index[int(tm.tensorIndex)] = tm.name.decode()

    def name(i: int) -> str:
        return by_index.get(int(i)) or (sg.tensors[int(i)].name or b"").decode()

    return [name(i) for i in sg.inputs], [name(i) for i in sg.outputs]


def _same_tensor(t: Mapping[str, Any], want: lm.TensorMetadata) -> bool:
    return (
        t["name"] == want.name
        and (t["description"] or "") == want.description
        and tuple(t["dimension_names"]) == want.dimension_names
        and [(f["name"], f["type"]) for f in t["associated_files"]]
        == [(f.name, f.type) for f in want.files]
    )


class LiteRTMetadataPass(TflitePass):
    """Attach ``meta`` as ``TFLITE_METADATA``; :meth:`pack` appends ``files`` (name → bytes).

    ``tensor_names`` maps a signature's tensor name to the name its metadata gives it
    (default: the same name); each metadata entry must describe the subgraph-0 tensor at
    its position."""

    name = "litert_metadata"

    def __init__(
        self,
        meta: lm.ModelMetadata,
        files: Mapping[str, bytes],
        tensor_names: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.meta = meta
        self.files = dict(files)
        self.tensor_names = dict(tensor_names or {})
        missing = [f.name for f in meta.associated_files() if f.name not in self.files]
        if missing:
            raise ValueError(f"associated files named but not given: {missing}")

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        ins, outs = _io_names(model, 0)
        for si in range(1, len(model.subgraphs)):
            if _io_names(model, si) != (ins, outs):
                raise ValueError(f"subgraph {si} has other inputs/outputs than subgraph 0")
        want_in = [t.name for t in self.meta.inputs]
        want_out = [t.name for t in self.meta.outputs]
        named = (
            [self.tensor_names.get(n, n) for n in ins],
            [self.tensor_names.get(n, n) for n in outs],
        )
        if (want_in, want_out) != named:
            raise ValueError(
                f"metadata names {want_in} -> {want_out} do not match subgraph 0's tensors "
                f"{ins} -> {outs} (the spec needs one entry per tensor, in tensor order)"
            )
        buf = lm.build_metadata(self.meta)
        s = fb.schema()
        import numpy as np

        data = np.frombuffer(buf, dtype=np.uint8).copy()
        for md in model.metadata or []:
            if (md.name or b"").decode() == lm.METADATA_ENTRY:
                model.buffers[md.buffer].data = data
                break
        else:
            b = s.BufferT()
            b.data = data
            model.buffers.append(b)
            md = s.MetadataT()
            md.name = lm.METADATA_ENTRY.encode()
            md.buffer = len(model.buffers) - 1
            model.metadata = [*(model.metadata or []), md]
        return {
            "metadata_bytes": len(buf),
            "inputs": want_in,
            "outputs": want_out,
            "associated_files": {k: len(v) for k, v in self.files.items()},
            "min_parser_version": lm.MIN_PARSER_VERSION,
        }

    def postcondition(self, model: ModelT) -> None:
        entries = [md for md in model.metadata or [] if md.name == lm.METADATA_ENTRY.encode()]
        if len(entries) != 1:
            self.fail(f"{len(entries)} {lm.METADATA_ENTRY} entries (want 1)")
        got = lm.model_metadata(model)
        if got is None:
            self.fail("metadata does not read back")
        m = self.meta
        top = (got["name"], got["description"], got["version"], got["author"], got["license"])
        if top != (m.name, m.description, m.version, m.author, m.license):
            self.fail(f"model fields read back as {top}")
        if got["min_parser_version"] != lm.MIN_PARSER_VERSION:
            self.fail(f"min_parser_version reads {got['min_parser_version']}")
        if len(got["subgraph_metadata"]) != 1:
            self.fail("the spec allows exactly one SubGraphMetadata")
        sg = got["subgraph_metadata"][0]
        n_in, n_out = len(model.subgraphs[0].inputs), len(model.subgraphs[0].outputs)
        tin, tout = sg["input_tensor_metadata"], sg["output_tensor_metadata"]
        if (len(tin), len(tout)) != (n_in, n_out):
            self.fail(f"{len(tin)}/{len(tout)} tensor metadata for {n_in}/{n_out} tensors")
        for got_t, want_t in zip([*tin, *tout], [*m.inputs, *m.outputs], strict=True):
            if not _same_tensor(got_t, want_t):
                self.fail(f"tensor metadata {want_t.name} reads back as {got_t}")
        sp = [f["name"] for u in sg["input_process_units"] for f in u["sentencepiece_model"]]
        want_sp = [m.sentencepiece_model.name] if m.sentencepiece_model else []
        if sp != want_sp:
            self.fail(f"SentencePiece tokenizer files read back as {sp}")
        if set(lm.recorded_files(got)) != {f.name for f in m.associated_files()}:
            self.fail(f"associated files read back as {lm.recorded_files(got)}")

    def pack(self, model_bytes: bytes) -> bytes:
        """``model_bytes`` with the associated files appended; checked as it is returned."""
        out = lm.append_associated_files(model_bytes, self.files)
        if out[: len(model_bytes)] != model_bytes:
            self.fail("appending the associated files changed the flatbuffer")
        packed = lm.packed_files(out)
        if packed != self.files:
            self.fail(f"zip tail holds {sorted(packed)}, want {sorted(self.files)}")
        self.report["file_bytes_added"] = len(out) - len(model_bytes)
        return out


# --- what albert-edge attaches ---------------------------------------------------------------

_INPUTS = {
    "input_ids": (
        "Signature input input_ids: token ids made by the SentencePiece tokenizer "
        "(spiece.model, the subgraph's input process unit): [CLS] sentence [SEP] (second "
        "sentence [SEP]), padded with <pad> (id 0) to the signature's length."
    ),
    "attention_mask": "Signature input attention_mask: 1 for a real token, 0 for padding.",
    "token_type_ids": (
        "Signature input token_type_ids: segment ids, 0 for [CLS] and the first sentence "
        "with its [SEP], 1 after."
    ),
}
# Metadata names: the ones LiteRT's Task Library (tflite-support BertNLClassifier) looks
# up — inputs "ids", "mask", "segment_ids" and, for a sequence classifier, the scores
# "probability". Measured with tflite-support 0.4.4: with the signature names in the
# metadata instead (either the inputs or the output), BertNLClassifier.classify crashes
# (SIGSEGV, exit 139); with these it classifies the artifact as written, its scores being
# our logits. The signature names stay input_ids / attention_mask / token_type_ids /
# logits, and each description starts with its signature name.
TASK_LIBRARY_NAMES = {"input_ids": "ids", "attention_mask": "mask", "token_type_ids": "segment_ids"}
TASK_LIBRARY_SCORES = "probability"
_OUTPUTS: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    ("sequence-classification", "logits"): (
        "Signature output logits: unnormalized class scores (softmax gives probabilities; "
        "named 'probability' here because the Task Library's BertNLClassifier finds its "
        "scores by that name); line i of labels.txt names class i.",
        ("batch", "class"),
    ),
    ("token-classification", "logits"): (
        "Unnormalized per-token class scores; line i of labels.txt names class i.",
        ("batch", "sequence", "class"),
    ),
    ("masked-lm", "logits"): ("Vocabulary scores per position.", ("batch", "sequence", "vocab")),
    ("multiple-choice", "logits"): (
        "One score per choice (softmax over choices).",
        ("batch", "choice"),
    ),
    ("question-answering", "start_logits"): (
        "Answer-start score per position.",
        ("batch", "sequence"),
    ),
    ("question-answering", "end_logits"): ("Answer-end score per position.", ("batch", "sequence")),
    ("pretraining", "prediction_logits"): (
        "Masked-LM vocabulary scores per position.",
        ("batch", "sequence", "vocab"),
    ),
    ("pretraining", "sop_logits"): ("Sentence-order prediction scores.", ("batch", "class")),
    ("base", "last_hidden_state"): ("Hidden state per position.", ("batch", "sequence", "hidden")),
    ("base", "pooler_output"): ("Pooled [CLS] representation.", ("batch", "hidden")),
}
_LABELED_HEADS = ("sequence-classification", "token-classification")
SPIECE_FILE = "spiece.model"
LABELS_FILE = "labels.txt"


def albert_metadata_pass(
    ckpt: Any, precision: str, seq_lens: tuple[int, ...], model: ModelT
) -> LiteRTMetadataPass:
    """The pass that attaches albert-edge's metadata for ``ckpt`` (a Checkpoint) to
    ``model`` (read only here: the spec's tensor metadata follow subgraph 0's tensor
    order, not the signature's, so the order is taken from the model)."""
    from albert_edge.layout import source_record
    from albert_edge.version import __version__

    head = ckpt.head.name
    src = source_record(ckpt)
    source = str(src.get("name") or "unknown")
    choices = bool(ckpt.head.choices_axis)
    seq_dims = ("batch", "choice", "sequence") if choices else ("batch", "sequence")
    input_order, _ = _io_names(model, 0)
    sig0 = next(
        (sd.signatureKey.decode() for sd in model.signatureDefs or [] if sd.subgraphIndex == 0),
        "",
    )
    inputs = tuple(
        lm.TensorMetadata(TASK_LIBRARY_NAMES.get(n, n), _INPUTS.get(n, ""), seq_dims)
        for n in input_order
    )
    files: dict[str, bytes] = {SPIECE_FILE: ckpt.tokenizer().path.read_bytes()}
    names = dict(TASK_LIBRARY_NAMES)
    if head == "sequence-classification":
        names["logits"] = TASK_LIBRARY_SCORES
    id2label = dict(getattr(ckpt.config, "id2label", None) or {})
    outputs = []
    for name in ckpt.head.outputs:
        desc, dims = _OUTPUTS.get((head, name), ("", ()))
        out_files: tuple[lm.AssociatedFile, ...] = ()
        if head in _LABELED_HEADS and id2label:
            labels = [str(id2label[k]) for k in sorted(id2label, key=int)]
            files[LABELS_FILE] = ("\n".join(labels) + "\n").encode()
            out_files = (
                lm.AssociatedFile(
                    LABELS_FILE,
                    "Class names, one per line, line i = class i.",
                    "TENSOR_AXIS_LABELS",
                ),
            )
        meta_name = names.get(name, name)
        outputs.append(lm.TensorMetadata(meta_name, desc, dimension_names=dims, files=out_files))
    buckets = ", ".join(f"seq_{L}" for L in seq_lens)
    meta = lm.ModelMetadata(
        name=f"ALBERT {head} ({source})",
        description=(
            f"ALBERT ({head}) converted by albert-edge {__version__}, precision {precision}. "
            f"Signatures (sequence buckets): {buckets}; this metadata describes subgraph 0, "
            "and every signature has the same inputs and outputs. Inputs are int32. " + BATCH_POLICY
        )
        + (" " + lm.task_library_qa_note(sig0) if head == "question-answering" else ""),
        version=f"{source}, weights sha256 {str(src.get('weights_sha256') or 'unknown')[:16]}",
        author=f"albert-edge {__version__} (conversion); weights: {source}",
        license=(
            "Apache-2.0"
            if src.get("embedded")
            else f"not stated by the checkpoint: the licence of {source} applies"
        ),
        inputs=inputs,
        outputs=tuple(outputs),
        subgraph_name=sig0,
        subgraph_description="Batch 1, fixed sequence length; pad to it with attention_mask 0.",
        sentencepiece_model=lm.AssociatedFile(
            SPIECE_FILE,
            "SentencePiece model of the ALBERT tokenizer"
            + (" (the text is lower-cased first)." if ckpt.do_lower_case else " (cased)."),
        ),
    )
    return LiteRTMetadataPass(meta, files, names)
