"""LiteRT (TFLite) model metadata: the ``TFLITE_METADATA`` entry and its associated files.

What the spec asks (tensorflow/tflite-support ``metadata_schema.fbs``, file identifier
``M001``): the model's ``metadata`` list holds an entry named ``TFLITE_METADATA`` whose
buffer is a ``ModelMetadata`` flatbuffer (name, description, version, author, license,
one ``SubGraphMetadata`` with a ``TensorMetadata`` per input and output tensor of
subgraph 0, in that subgraph's order, process units, ``min_parser_version``), and every
associated file the metadata names is appended to the ``.tflite`` as a zip archive, so
the file is both a valid flatbuffer and a valid zip (what ``MetadataPopulator`` writes).

Why written by hand with the ``flatbuffers`` runtime Builder: the schema's generated
Python (``metadata_schema_py_generated``) and its writers ship only in ``tflite-support``
(last release 0.4.4, 2023), which pins ``protobuf<4`` while this project needs protobuf 7;
neither ai-edge-litert 2.x, tensorflow 2.21 nor litert-torch ship that module (only the
model schema and ``conversion_metadata``). So the few tables used here are written slot
by slot from ``metadata_schema.fbs`` and read back by :func:`read_metadata` with
``flatbuffers.table.Table``. The client test ``tests/clients/test_tflite_metadata.py``
reads the result with tflite-support's own ``MetadataDisplayer`` (in a separate venv),
so a slot written wrong here fails against the official reader.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

METADATA_ENTRY = "TFLITE_METADATA"
FILE_IDENTIFIER = b"M001"

# enum AssociatedFileType : byte (metadata_schema.fbs)
FILE_TYPES = {
    "UNKNOWN": 0,
    "DESCRIPTIONS": 1,
    "TENSOR_AXIS_LABELS": 2,
    "TENSOR_VALUE_LABELS": 3,
    "TENSOR_AXIS_SCORE_CALIBRATION": 4,
    "VOCABULARY": 5,
    "SCANN_INDEX_FILE": 6,
}
_FILE_TYPE_NAMES = {v: k for k, v in FILE_TYPES.items()}
# union ProcessUnitOptions (0 = NONE)
_SENTENCEPIECE_TOKENIZER = 5
_PROCESS_UNIT_NAMES = {
    1: "NormalizationOptions",
    2: "ScoreCalibrationOptions",
    3: "ScoreThresholdingOptions",
    4: "BertTokenizerOptions",
    5: "SentencePieceTokenizerOptions",
    6: "RegexTokenizerOptions",
}
# The oldest metadata parser that reads what this module writes: subgraph input process
# units and the SentencePiece tokenizer came in 1.1.0 (metadata_version.cc in
# tflite-support); the client test checks this against GetMinimumMetadataParserVersion.
MIN_PARSER_VERSION = "1.1.0"


@dataclass(frozen=True)
class AssociatedFile:
    """A file packed into the model's zip tail and named by the metadata."""

    name: str
    description: str = ""
    type: str = "UNKNOWN"


@dataclass(frozen=True)
class TensorMetadata:
    name: str
    description: str = ""
    dimension_names: tuple[str, ...] = ()
    files: tuple[AssociatedFile, ...] = ()


@dataclass(frozen=True)
class ModelMetadata:
    name: str
    description: str
    version: str
    author: str
    license: str
    inputs: tuple[TensorMetadata, ...]
    outputs: tuple[TensorMetadata, ...]
    subgraph_name: str = ""
    subgraph_description: str = ""
    # SubGraphMetadata.input_process_units: a SentencePiece tokenizer's model file.
    sentencepiece_model: AssociatedFile | None = None
    files: tuple[AssociatedFile, ...] = field(default=())

    def associated_files(self) -> list[AssociatedFile]:
        """Every file the metadata names, once each (what the zip tail must hold)."""
        out: dict[str, AssociatedFile] = {}
        for f in (
            *self.files,
            *([self.sentencepiece_model] if self.sentencepiece_model else []),
            *(f for t in (*self.inputs, *self.outputs) for f in t.files),
        ):
            out.setdefault(f.name, f)
        return list(out.values())


# LiteRT Task Library's BertQuestionAnswerer (tflite-support ``bert_question_answerer.cc``,
# ``kMaxSeqLen``) fills subgraph 0's inputs with exactly this many tokens; on another length
# its ``answer`` fails ("Bad StatusOr access" from the Python API).
TASK_LIBRARY_QA_SEQ_LEN = 384


def task_library_qa_note(subgraph0: str) -> str:
    """A question-answering model's metadata sentence: whether the Task Library's
    ``BertQuestionAnswerer`` can run this file (its subgraph 0, signature ``subgraph0``,
    must take :data:`TASK_LIBRARY_QA_SEQ_LEN` tokens), and how to get one that it can."""
    want = f"seq_{TASK_LIBRARY_QA_SEQ_LEN}"
    head = (
        f"LiteRT Task Library BertQuestionAnswerer feeds subgraph 0 exactly "
        f"{TASK_LIBRARY_QA_SEQ_LEN} tokens"
    )
    if subgraph0 == want:
        return f"{head}: subgraph 0 is {want}, so it runs this file."
    return (
        f"{head}: subgraph 0 is {subgraph0 or 'unnamed'}, so it cannot run this file; "
        f"convert with --seq-lens whose longest is {TASK_LIBRARY_QA_SEQ_LEN} "
        f"(e.g. 128,{TASK_LIBRARY_QA_SEQ_LEN}; the default for a model with at least "
        f"{TASK_LIBRARY_QA_SEQ_LEN} positions) for it."
    )


# --- writing ------------------------------------------------------------------------------


def _strings(b: Any, values: Sequence[str]) -> int:
    offs = [b.CreateString(v) for v in values]
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return int(b.EndVector())


def _tables(b: Any, offs: Sequence[int]) -> int:
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return int(b.EndVector())


def _table(b: Any, n_slots: int, slots: Mapping[int, int], bytes_: Mapping[int, int]) -> int:
    """A table: ``slots`` slot → offset (tables, strings, vectors), ``bytes_`` slot → int8."""
    b.StartObject(n_slots)
    for slot, off in slots.items():
        if off:
            b.PrependUOffsetTRelativeSlot(slot, off, 0)
    for slot, val in bytes_.items():
        b.PrependInt8Slot(slot, val, 0)
    return int(b.EndObject())


def _opt_string(b: Any, s: str) -> int:
    return int(b.CreateString(s)) if s else 0


def _file(b: Any, f: AssociatedFile) -> int:
    # table AssociatedFile { name; description; type; locale; version; }
    name, desc = b.CreateString(f.name), _opt_string(b, f.description)
    return _table(b, 5, {0: name, 1: desc}, {2: FILE_TYPES[f.type]})


def _tensor(b: Any, t: TensorMetadata) -> int:
    # table TensorMetadata { name; description; dimension_names; content; process_units;
    #                        stats; associated_files; }
    name, desc = b.CreateString(t.name), _opt_string(b, t.description)
    dims = _strings(b, t.dimension_names) if t.dimension_names else 0
    files = _tables(b, [_file(b, f) for f in t.files]) if t.files else 0
    return _table(b, 7, {0: name, 1: desc, 2: dims, 6: files}, {})


def build_metadata(meta: ModelMetadata, min_parser_version: str = MIN_PARSER_VERSION) -> bytes:
    """The ``ModelMetadata`` flatbuffer (identifier ``M001``) for ``meta``."""
    import flatbuffers

    b = flatbuffers.Builder(1024)
    inputs = _tables(b, [_tensor(b, t) for t in meta.inputs])
    outputs = _tables(b, [_tensor(b, t) for t in meta.outputs])
    units = 0
    if meta.sentencepiece_model is not None:
        # table SentencePieceTokenizerOptions { sentencePiece_model; vocab_file; }
        sp = _tables(b, [_file(b, meta.sentencepiece_model)])
        opts = _table(b, 2, {0: sp}, {})
        # table ProcessUnit { options (union: type at slot 0, value at slot 1) }
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(1, opts, 0)
        b.PrependUint8Slot(0, _SENTENCEPIECE_TOKENIZER, 0)
        units = _tables(b, [b.EndObject()])
    # table SubGraphMetadata { name; description; input_tensor_metadata;
    #   output_tensor_metadata; associated_files; input_process_units; ... (10 fields) }
    sg = _table(
        b,
        10,
        {
            0: _opt_string(b, meta.subgraph_name),
            1: _opt_string(b, meta.subgraph_description),
            2: inputs,
            3: outputs,
            5: units,
        },
        {},
    )
    files = _tables(b, [_file(b, f) for f in meta.files]) if meta.files else 0
    # table ModelMetadata { name; description; version; subgraph_metadata; author;
    #                       license; associated_files; min_parser_version; }
    root = _table(
        b,
        8,
        {
            0: b.CreateString(meta.name),
            1: _opt_string(b, meta.description),
            2: _opt_string(b, meta.version),
            3: _tables(b, [sg]),
            4: _opt_string(b, meta.author),
            5: _opt_string(b, meta.license),
            6: files,
            7: b.CreateString(min_parser_version),
        },
        {},
    )
    b.Finish(root, file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())


ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def append_associated_files(model_bytes: bytes, files: Mapping[str, bytes]) -> bytes:
    """``model_bytes`` with ``files`` appended as a zip (stored, as ``MetadataPopulator``
    writes them); the flatbuffer in front is unchanged, so every runtime loads it as before.

    Every entry carries one fixed timestamp (the zip epoch, 1980-01-01) and fixed
    permissions and system: ``writestr`` with a bare name stamps the current time, so two converts of
    one checkpoint differed in 4 bytes and an artifact's sha256 could not be reproduced
    (issue 25's before/after check found it)."""
    buf = io.BytesIO()
    buf.write(model_bytes)
    with zipfile.ZipFile(buf, "a") as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
            info.create_system = 3  # Unix, whatever builds it (Windows would write 0)
            info.external_attr = 0o600 << 16  # what writestr gives a bare name
            zf.writestr(info, data)
    return buf.getvalue()


# --- reading ------------------------------------------------------------------------------


def _t_root(buf: bytes) -> Any:
    from flatbuffers import encode, number_types, table

    return table.Table(buf, encode.Get(number_types.UOffsetTFlags.packer_type, buf, 0))


def _field(t: Any, slot: int) -> int:
    return int(t.Offset(4 + 2 * slot))


def _t_str(t: Any, slot: int) -> str | None:
    o = _field(t, slot)
    return t.String(o + t.Pos).decode() if o else None


def _t_int8(t: Any, slot: int) -> int:
    from flatbuffers import number_types

    o = _field(t, slot)
    return int(t.Get(number_types.Int8Flags, o + t.Pos)) if o else 0


def _t_tables(t: Any, slot: int) -> list[Any]:
    from flatbuffers import table

    o = _field(t, slot)
    if not o:
        return []
    start = t.Vector(o)
    return [table.Table(t.Bytes, t.Indirect(start + 4 * i)) for i in range(t.VectorLen(o))]


def _t_strings(t: Any, slot: int) -> list[str]:
    o = _field(t, slot)
    if not o:
        return []
    start = t.Vector(o)
    return [t.String(start + 4 * i).decode() for i in range(t.VectorLen(o))]


def _r_file(t: Any) -> dict[str, Any]:
    return {
        "name": _t_str(t, 0),
        "description": _t_str(t, 1),
        "type": _FILE_TYPE_NAMES.get(_t_int8(t, 2), str(_t_int8(t, 2))),
    }


def _r_tensor(t: Any) -> dict[str, Any]:
    return {
        "name": _t_str(t, 0),
        "description": _t_str(t, 1),
        "dimension_names": _t_strings(t, 2),
        "associated_files": [_r_file(f) for f in _t_tables(t, 6)],
    }


def _r_unit(t: Any) -> dict[str, Any]:
    from flatbuffers import table

    kind = _t_int8(t, 0)
    out: dict[str, Any] = {"options_type": _PROCESS_UNIT_NAMES.get(kind, str(kind))}
    o = _field(t, 1)
    if kind == _SENTENCEPIECE_TOKENIZER and o:
        opts = table.Table(bytearray(), 0)
        t.Union(opts, o)
        out["sentencepiece_model"] = [_r_file(f) for f in _t_tables(opts, 0)]
        out["vocab_file"] = [_r_file(f) for f in _t_tables(opts, 1)]
    return out


def parse_metadata(buf: bytes) -> dict[str, Any]:
    """A ``ModelMetadata`` flatbuffer as a dict (keys as in the schema, snake_case)."""
    from flatbuffers import util

    if len(buf) < 8 or not util.BufferHasIdentifier(buf, 0, FILE_IDENTIFIER):
        raise ValueError(f"not a ModelMetadata flatbuffer (no {FILE_IDENTIFIER.decode()} id)")
    root = _t_root(buf)
    subgraphs = []
    for sg in _t_tables(root, 3):
        subgraphs.append(
            {
                "name": _t_str(sg, 0),
                "description": _t_str(sg, 1),
                "input_tensor_metadata": [_r_tensor(t) for t in _t_tables(sg, 2)],
                "output_tensor_metadata": [_r_tensor(t) for t in _t_tables(sg, 3)],
                "associated_files": [_r_file(f) for f in _t_tables(sg, 4)],
                "input_process_units": [_r_unit(u) for u in _t_tables(sg, 5)],
            }
        )
    return {
        "name": _t_str(root, 0),
        "description": _t_str(root, 1),
        "version": _t_str(root, 2),
        "subgraph_metadata": subgraphs,
        "author": _t_str(root, 4),
        "license": _t_str(root, 5),
        "associated_files": [_r_file(f) for f in _t_tables(root, 6)],
        "min_parser_version": _t_str(root, 7),
    }


def recorded_files(meta: Mapping[str, Any]) -> list[str]:
    """Names of every associated file a parsed metadata dict names (once each, in order)."""
    names: list[str] = [f["name"] for f in meta.get("associated_files", [])]
    for sg in meta.get("subgraph_metadata", []):
        names += [f["name"] for f in sg["associated_files"]]
        for unit in sg["input_process_units"]:
            names += [f["name"] for f in unit.get("sentencepiece_model", [])]
            names += [f["name"] for f in unit.get("vocab_file", [])]
        for t in (*sg["input_tensor_metadata"], *sg["output_tensor_metadata"]):
            names += [f["name"] for f in t["associated_files"]]
    return list(dict.fromkeys(names))


def packed_files(data: bytes) -> dict[str, bytes]:
    """The associated files in a ``.tflite``'s zip tail ({} when it has none, or when the
    tail is damaged: :func:`metadata_report` then lists the files as missing)."""
    bio = io.BytesIO(data)
    try:
        if not zipfile.is_zipfile(bio):
            return {}
        with zipfile.ZipFile(bio) as zf:
            return {i.filename: zf.read(i) for i in zf.infolist()}
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return {}


def associated_files_bytes(data: bytes) -> int:
    """Bytes of the zip tail (associated files and zip headers) after the flatbuffer."""
    bio = io.BytesIO(data)
    try:
        if not zipfile.is_zipfile(bio):
            return 0
        with zipfile.ZipFile(bio) as zf:
            offsets = [i.header_offset for i in zf.infolist()]
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return 0
    return len(data) - min(offsets) if offsets else 0


def model_metadata(model: Any) -> dict[str, Any] | None:
    """The parsed ``TFLITE_METADATA`` of a ``ModelT`` (None when absent)."""
    from albert_edge.tflite import flatbuffer as fb

    for md in model.metadata or []:
        if (md.name or b"").decode() == METADATA_ENTRY:
            return parse_metadata(fb.buffer_bytes(model, md.buffer))
    return None


def metadata_report(model: Any, data: bytes) -> dict[str, Any] | None:
    """What ``inspect`` shows: the metadata, the packed files and the bytes they add."""
    meta = model_metadata(model)
    if meta is None:
        return None
    packed = packed_files(data)
    names = recorded_files(meta)
    return {
        **meta,
        "packed_files": {k: len(v) for k, v in packed.items()},
        "missing_files": [n for n in names if n not in packed],
        "associated_files_bytes": associated_files_bytes(data),
    }
