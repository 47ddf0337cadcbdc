"""Reading, rewriting and writing ``.tflite`` flatbuffers: the passes the converters lack.

Parsing and the object model come from the field's library: the TFLite schema module
and ``flatbuffer_utils`` shipped with ai-edge-litert. What is written here by hand is
only what no converter or tool does for us, each a small pass with a postcondition
(two larger ones have modules of their own: :mod:`~albert_edge.tflite.prefix_slices`, one
position table for every signature, and :mod:`~albert_edge.tflite.scaled_copies`, the tied
weights a constant fold split):

- :func:`dedup_buffers` — identical bytes in two buffers become one buffer, the tensors
  re-pointed (TFLite allows several tensors, in one subgraph or several, to share a
  buffer; the interpreter reads buffers read-only). Catches the tied MLM decoder, shape
  constants repeated per layer and anything a quantizer re-materialises.
- :func:`compact_names` — the converter names every tensor by its full Python module path
  (~500 bytes each, 125 KB for a 3-layer model and 3× that for three signatures); they
  become short unique names, and weights get their Hugging Face parameter name (found by
  content), so ``inspect`` and quantization recipes can address them.
- :func:`write_model` — the Python ``BufferT.Pack`` ignores the schema's
  ``force_align: 16`` on buffer data; weights are written 16-byte aligned, inline (no
  ``Buffer.offset``, which runtimes before TF 2.15 cannot read).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from albert_edge import duplicates
from albert_edge.errors import PassError

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT, TensorT

METADATA_NAME = "albert_edge"
# Constants smaller than this are shape vectors and scalars: never worth a SLICE op
# (:mod:`~albert_edge.tflite.prefix_slices`) nor a tied weight (:mod:`~albert_edge.tflite.scaled_copies`).
MIN_SLICE_BYTES = 1024

_NP_DTYPES: dict[str, Any] = {
    "FLOAT32": np.float32,
    "FLOAT16": np.float16,
    "INT32": np.int32,
    "INT64": np.int64,
    "INT8": np.int8,
    "UINT8": np.uint8,
    "INT16": np.int16,
    "BOOL": np.bool_,
    "FLOAT64": np.float64,
}


def schema() -> Any:
    """The TFLite flatbuffer schema module (ai-edge-litert's, else TensorFlow's)."""
    try:
        from ai_edge_litert import schema_py_generated
    except ImportError:  # pragma: no cover - depends on what is installed
        from tensorflow.lite.python import schema_py_generated
    return schema_py_generated


def _names(enum_cls: Any) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_")}


def builtin_names() -> dict[int, str]:
    return _names(schema().BuiltinOperator)


def tensor_type_names() -> dict[int, str]:
    return _names(schema().TensorType)


def read_model(data: bytes | bytearray | memoryview) -> ModelT:
    """Parse a flatbuffer into the schema's mutable object model."""
    from ai_edge_litert.tools import flatbuffer_utils

    return flatbuffer_utils.read_model_from_bytearray(data)


def opcode_builtin(opcode: Any) -> int:
    """The builtin code of an OperatorCode (new field, or the deprecated int8 one)."""
    return int(max(opcode.builtinCode or 0, opcode.deprecatedBuiltinCode or 0))


def buffer_bytes(model: ModelT, index: int) -> bytes:
    b = model.buffers[index]
    if b.data is None:
        return b""
    if isinstance(b.data, (bytes, bytearray, memoryview)):
        return bytes(b.data)
    return np.ascontiguousarray(b.data, dtype=np.uint8).tobytes()


def tensor_array(model: ModelT, tensor: TensorT) -> np.ndarray | None:
    """A constant tensor's value as a numpy array (None for activations)."""
    raw = buffer_bytes(model, tensor.buffer)
    if not raw:
        return None
    dtype = _NP_DTYPES.get(tensor_type_names().get(tensor.type, ""))
    if dtype is None:
        return None
    shape = [int(s) for s in (tensor.shape if tensor.shape is not None else [])]
    arr = np.frombuffer(raw, dtype=dtype)
    return arr.reshape(shape) if arr.size == int(np.prod(shape)) else arr


def constant_buffer_ids(model: ModelT) -> set[int]:
    """Buffers that hold a constant tensor's data (not metadata, not empty)."""
    ids = set()
    for sg in model.subgraphs:
        for t in sg.tensors:
            data = model.buffers[t.buffer].data if t.buffer else None
            if data is not None and len(data):
                ids.add(int(t.buffer))
    return ids


# --- passes ---------------------------------------------------------------------------


def dedup_buffers(model: ModelT) -> int:
    """Point every tensor whose buffer bytes equal an earlier buffer's at that buffer.

    Returns the number of bytes saved. Postcondition: no two referenced constant buffers
    hold the same bytes.
    """
    first: dict[tuple[int, str], int] = {}
    remap: dict[int, int] = {}
    saved = 0
    for bid in sorted(constant_buffer_ids(model)):
        raw = buffer_bytes(model, bid)
        key = (len(raw), hashlib.sha256(raw).hexdigest())
        if key in first:
            remap[bid] = first[key]
            saved += len(raw)
        else:
            first[key] = bid
    for sg in model.subgraphs:
        for t in sg.tensors:
            if t.buffer in remap:
                t.buffer = remap[t.buffer]
    drop_unused_buffers(model)
    dups = duplicate_groups(model)
    if dups:
        raise PassError(f"dedup_buffers: {len(dups)} groups of identical buffers remain")
    return saved


def duplicate_groups(model: ModelT) -> list[list[int]]:
    """Groups of constant buffers with identical bytes (empty when deduplicated)."""
    return duplicates.duplicate_groups(
        (bid, hashlib.sha256(buffer_bytes(model, bid)).hexdigest())
        for bid in sorted(constant_buffer_ids(model))
    )


def drop_unused_buffers(model: ModelT) -> None:
    """Remove buffers no tensor or metadata entry references; keep buffer 0 (the empty one)."""
    used = {0}
    for sg in model.subgraphs:
        used.update(int(t.buffer) for t in sg.tensors)
    for md in model.metadata or []:
        used.add(int(md.buffer))
    order = sorted(used)
    new_index = {old: new for new, old in enumerate(order)}
    model.buffers = [model.buffers[i] for i in order]
    for sg in model.subgraphs:
        for t in sg.tensors:
            t.buffer = new_index[int(t.buffer)]
    for md in model.metadata or []:
        md.buffer = new_index[int(md.buffer)]


def bound_mask_fill(
    model: ModelT, value: float = -1.0e4, below: float = float(np.finfo(np.float32).min) / 2
) -> int:
    """Rewrite float constants whose every value is ≤ ``below`` to ``value``.

    Made for the additive attention mask, which transformers fills with
    ``finfo(float32).min`` at padded positions: in float any large negative value masks
    the same (``exp`` underflows to 0), but integer kernels need a finite, moderate one
    (see ``albert_edge.tflite.calibrated_ranges.mask_magnitude``). Returns constants rewritten.
    """
    rewritten = 0
    done: set[int] = set()
    for sg in model.subgraphs:
        for t in sg.tensors:
            if not t.buffer or int(t.buffer) in done:
                continue
            if tensor_type_names().get(t.type) != "FLOAT32":
                continue
            arr = tensor_array(model, t)
            if arr is None or arr.size == 0 or not bool(np.all(arr <= below)):
                continue
            model.buffers[t.buffer].data = np.frombuffer(
                np.full(arr.shape, value, np.float32).tobytes(), dtype=np.uint8
            ).copy()
            done.add(int(t.buffer))
            rewritten += 1
    return rewritten


def _referenced_tensors(model: ModelT, si: int) -> set[int]:
    """Indices of subgraph ``si``'s tensors that an operator, the subgraph or a signature uses."""
    sg = model.subgraphs[si]
    used: set[int] = set()
    for op in sg.operators:
        for field in (op.inputs, op.outputs, op.intermediates):
            if field is not None:
                used.update(int(i) for i in field if int(i) >= 0)
    used.update(int(i) for i in (sg.inputs if sg.inputs is not None else []))
    used.update(int(i) for i in (sg.outputs if sg.outputs is not None else []))
    for sd in model.signatureDefs or []:
        if int(sd.subgraphIndex) == si:
            used.update(int(tm.tensorIndex) for tm in [*(sd.inputs or []), *(sd.outputs or [])])
    for t in sg.tensors:  # a blockwise weight names its scale (and zero point) tensors
        used.update(i for i in _detail_tensors(t) if i >= 0)
    return used


def _detail_tensors(tensor: Any) -> list[int]:
    """Tensor indices a tensor's quantization details name (BlockwiseQuantization's
    ``scales`` / ``zeroPoints``; -1 where absent)."""
    details = tensor.quantization.details if tensor.quantization is not None else None
    return [int(getattr(details, k)) for k in ("scales", "zeroPoints") if hasattr(details, k)]


def orphan_tensor_count(model: ModelT) -> int:
    """Tensors nothing references (see :func:`drop_orphan_tensors`); 0 in a finished file."""
    return sum(
        len(sg.tensors) - len(_referenced_tensors(model, si))
        for si, sg in enumerate(model.subgraphs)
    )


def drop_orphan_tensors(model: ModelT) -> int:
    """Remove tensors that no operator, subgraph input/output or signature references.

    Rewrites (a tied weight re-pointed, a slice put in front of a prefix) leave the old
    tensor behind with an empty buffer. To TFLite such a tensor looks like an activation
    that nothing produces: the interpreter never allocates it, and tools that read every
    tensor after ``invoke`` (ai-edge-quantizer's calibrator) fail on its null data.
    Indices are remapped everywhere they appear. Returns the number of tensors removed.
    """
    removed = 0
    for si, sg in enumerate(model.subgraphs):
        used = _referenced_tensors(model, si)
        sigs = [sd for sd in (model.signatureDefs or []) if int(sd.subgraphIndex) == si]
        if len(used) == len(sg.tensors):
            continue
        keep = sorted(used)
        remap = {old: new for new, old in enumerate(keep)}
        removed += len(sg.tensors) - len(keep)
        sg.tensors = [sg.tensors[i] for i in keep]

        def _map(seq: Any, remap: dict[int, int] = remap) -> Any:
            if seq is None:
                return None
            return [remap[int(i)] if int(i) >= 0 else int(i) for i in seq]

        for op in sg.operators:
            op.inputs, op.outputs = _map(op.inputs), _map(op.outputs)
            op.intermediates = _map(op.intermediates)
        sg.inputs, sg.outputs = _map(sg.inputs), _map(sg.outputs)
        for t in sg.tensors:
            for k, i in zip(("scales", "zeroPoints"), _detail_tensors(t), strict=False):
                if i >= 0:
                    setattr(t.quantization.details, k, remap[i])
        for sd in sigs:
            for tm in [*(sd.inputs or []), *(sd.outputs or [])]:
                tm.tensorIndex = remap[int(tm.tensorIndex)]
    return removed


def opcode_index(model: ModelT, builtin: int, version: int) -> int:
    """The index of ``builtin``'s operator code, added if the model has none, its version
    raised to at least ``version`` (the op a pass inserts needs that version's kernel)."""
    s = schema()
    for i, oc in enumerate(model.operatorCodes):
        if opcode_builtin(oc) == builtin:
            oc.version = max(int(oc.version), version)
            return i
    oc = s.OperatorCodeT()
    oc.builtinCode = builtin
    oc.deprecatedBuiltinCode = min(builtin, 127)
    oc.version = version
    model.operatorCodes.append(oc)
    return len(model.operatorCodes) - 1


def add_const(model: ModelT, sg: Any, name: str, arr: np.ndarray, ttype: int) -> int:
    """Append ``arr`` as a constant tensor of subgraph ``sg`` (its own new buffer);
    returns the tensor's index."""
    s = schema()
    buf = s.BufferT()
    buf.data = np.frombuffer(arr.tobytes(), dtype=np.uint8).copy()
    model.buffers.append(buf)
    t = s.TensorT()
    t.name = name.encode()
    t.shape = list(arr.shape)
    t.type = ttype
    t.buffer = len(model.buffers) - 1
    sg.tensors.append(t)
    return len(sg.tensors) - 1


def _short_name(name: str) -> str:
    """``pkg.mod.Class_attr/pkg.Class_sub;fused`` → ``attr/sub``."""
    first = name.split(";")[0]
    parts = [p.rsplit("_", 1)[-1] if "." in p.split("_", 1)[0] else p for p in first.split("/")]
    return "/".join([p for p in parts if p][-2:])[-40:]


def compact_names(model: ModelT, param_names: Mapping[str, str] | None = None) -> int:
    """Shorten tensor names; name constants after the parameter whose bytes they hold.

    ``param_names`` maps a sha256 of raw bytes → parameter name (see
    :func:`param_hashes`). Names stay unique across the whole model (quantizers key tensors by name). Returns bytes saved.
    """
    before = 0
    after = 0
    seen: dict[str, int] = {}  # global: ai-edge-quantizer keys tensors by name model-wide
    for sg in model.subgraphs:
        for t in sg.tensors:
            old = (t.name or b"").decode("utf-8", "replace")
            before += len(old)
            new = None
            if param_names and t.buffer:
                raw = buffer_bytes(model, t.buffer)
                if raw:
                    new = param_names.get(hashlib.sha256(raw).hexdigest())
            if new is None:
                new = _short_name(old) or "t"
            if new in seen:
                seen[new] += 1
                new = f"{new}:{seen[new]}"
            else:
                seen[new] = 0
            t.name = new.encode()
            after += len(new)
    return before - after


def param_hashes(named_arrays: Iterable[tuple[str, np.ndarray]]) -> dict[str, str]:
    """sha256 of each parameter's bytes (as stored and transposed) → its name."""
    out: dict[str, str] = {}
    for name, arr in named_arrays:
        a = np.ascontiguousarray(arr, dtype=np.float32)
        variants = [a]
        if a.ndim == 2:
            variants.append(np.ascontiguousarray(a.T))
        if a.ndim == 1:
            variants.append(a.reshape(1, 1, -1))
        for v in variants:
            out.setdefault(hashlib.sha256(v.tobytes()).hexdigest(), name)
    return out


def set_metadata(model: ModelT, name: str, payload: Mapping[str, Any]) -> None:
    """Store a JSON object as a named metadata buffer (TFLite ignores unknown metadata)."""
    s = schema()
    data = np.frombuffer(json.dumps(payload, sort_keys=True).encode(), dtype=np.uint8).copy()
    for md in model.metadata or []:
        if (md.name or b"").decode() == name:
            model.buffers[md.buffer].data = data
            return
    buf = s.BufferT()
    buf.data = data
    model.buffers.append(buf)
    md = s.MetadataT()
    md.name = name.encode()
    md.buffer = len(model.buffers) - 1
    model.metadata = [*(model.metadata or []), md]


def get_metadata(model: ModelT, name: str = METADATA_NAME) -> dict[str, Any] | None:
    for md in model.metadata or []:
        if (md.name or b"").decode() == name:
            try:
                data: dict[str, Any] = json.loads(buffer_bytes(model, md.buffer).decode())
                return data
            except (UnicodeDecodeError, json.JSONDecodeError):
                return None
    return None


# --- writing --------------------------------------------------------------------------


def _aligned_buffer_pack(self: Any, builder: Any) -> int:
    """BufferT.Pack with the schema's ``force_align: 16`` honoured for the data vector."""
    s = schema()
    data_off = None
    if self.data is not None:
        data = self.data
        payload = (
            bytes(data)
            if isinstance(data, (bytes, bytearray, memoryview))
            else np.ascontiguousarray(data, dtype=np.uint8).tobytes()
        )
        builder.StartVector(1, len(payload), 16)
        builder.head = builder.head - len(payload)
        builder.Bytes[builder.head : builder.head + len(payload)] = payload
        builder.vectorNumElems = len(payload)
        data_off = builder.EndVector()
    s.BufferStart(builder)
    if data_off is not None:
        s.BufferAddData(builder, data_off)
    if self.offset:
        s.BufferAddOffset(builder, self.offset)
    if self.size:
        s.BufferAddSize(builder, self.size)
    return int(s.BufferEnd(builder))


def _shared_string_builder() -> type:
    import flatbuffers

    class Builder(flatbuffers.Builder):
        """Writes each distinct string once (FlatBuffers lets many offsets share one):
        a weight read in every signature subgraph carries its name once in the file."""

        def CreateString(self, s: Any, encoding: str = "utf-8", errors: str = "strict") -> int:
            cache = self.__dict__.setdefault("_strings", {})
            if s not in cache:
                cache[s] = super().CreateString(s, encoding, errors)
            return int(cache[s])

    return Builder


def quant_key(q: Any) -> tuple[Any, ...]:
    """What makes two QuantizationParameters tables the same table (written once)."""

    def raw(v: Any) -> bytes:
        return b"" if v is None else np.asarray(v).tobytes()

    return (
        raw(q.scale),
        raw(q.zeroPoint),
        raw(q.min),
        raw(q.max),
        int(q.quantizedDimension or 0),
        int(q.detailsType or 0),
        q.details is None,
        q.blockwise is None if hasattr(q, "blockwise") else True,
    )


def write_model(model: ModelT) -> bytes:
    """Serialize ``model``: buffer data 16-byte aligned, identical quantization tables
    shared, empty ones left out.

    A shared weight appears as one tensor per signature subgraph (and ai-edge-quantizer
    gives each its own QuantizationParameters): per-channel scales and int64 zero points
    are 12 bytes per output channel, repeated per tensor. FlatBuffers allows one table to
    be referenced from many places, so each distinct quantization table is written once
    (and each distinct string: see :func:`_shared_string_builder`).
    """
    s = schema()
    cache: dict[tuple[Any, ...], int] = {}

    class _AlignedBufferT(s.BufferT):  # type: ignore[name-defined]
        Pack = _aligned_buffer_pack

    base_pack = s.QuantizationParametersT.Pack

    def shared_pack(self: Any, builder: Any) -> int:
        key = quant_key(self)
        if key not in cache:
            cache[key] = base_pack(self, builder)
        return cache[key]

    class _SharedQuantT(s.QuantizationParametersT):  # type: ignore[name-defined]
        Pack = shared_pack

    swapped: list[tuple[Any, type]] = []
    emptied: list[tuple[Any, Any]] = []
    for b in model.buffers:
        swapped.append((b, b.__class__))
        b.__class__ = _AlignedBufferT
    for sg in model.subgraphs:
        for t in sg.tensors:
            if t.quantization is not None and _empty_quantization(t.quantization):
                emptied.append((t, t.quantization))
                t.quantization = None
            elif t.quantization is not None and t.quantization.details is None:
                swapped.append((t.quantization, t.quantization.__class__))
                t.quantization.__class__ = _SharedQuantT
    try:
        builder = _shared_string_builder()(1024 * 1024)
        root = model.Pack(builder)
        builder.Finish(root, file_identifier=b"TFL3")
        out = bytes(builder.Output())
    finally:
        for obj, cls in swapped:
            obj.__class__ = cls
        for t, q in emptied:
            t.quantization = q
    return out


def _empty_quantization(q: Any) -> bool:
    """A QuantizationParameters table that says nothing (what converters attach to every
    float tensor): written, it costs an offset per tensor and means the same as none."""
    fields = (q.scale, q.zeroPoint, q.min, q.max, q.details, getattr(q, "blockwise", None))
    return all(f is None or (hasattr(f, "__len__") and len(f) == 0) for f in fields)


def int8_outputs(model: ModelT) -> list[str]:
    """Drop the DEQUANTIZE in front of each signature output whose input is int8.

    For full-integer delegates that want int8 I/O (``--int8-io``); the output tensor then
    carries its scale and zero point, which the runner (and an app) apply. Inputs stay
    int32 token ids: ids are indices, there is nothing to quantize. Returns the outputs
    changed.
    """
    types = tensor_type_names()
    names = builtin_names()
    changed = []
    for sd in model.signatureDefs or []:
        sg = model.subgraphs[sd.subgraphIndex]
        producer = {o: i for i, op in enumerate(sg.operators) for o in op.outputs}
        consumers: dict[int, int] = defaultdict(int)
        for op in sg.operators:
            for i in op.inputs:
                consumers[int(i)] += 1
        drop = set()
        for tm in sd.outputs:
            ti = int(tm.tensorIndex)
            pi = producer.get(ti)
            if pi is None:
                continue
            op = sg.operators[pi]
            if names.get(opcode_builtin(model.operatorCodes[op.opcodeIndex])) != "DEQUANTIZE":
                continue
            qi = int(op.inputs[0])
            if types.get(sg.tensors[qi].type) not in ("INT8", "UINT8") or consumers[ti]:
                continue
            tm.tensorIndex = qi
            sg.outputs = [qi if int(o) == ti else int(o) for o in sg.outputs]
            drop.add(pi)
            changed.append(tm.name.decode())
        sg.operators = [op for i, op in enumerate(sg.operators) if i not in drop]
    return sorted(set(changed))


def strip_activation_names(model: ModelT) -> int:
    """Drop the names of activation tensors that are not signature inputs/outputs.

    Run last, after quantization (ai-edge-quantizer keys calibration by name). Weights
    keep their parameter names and I/O keeps its names; an activation's name is debug
    information only, and ~25 bytes × every tensor of every signature is most of the
    graph overhead of a small model. Returns bytes saved.
    """
    keep: set[tuple[int, int]] = set()
    for sd in model.signatureDefs or []:
        for tm in [*(sd.inputs or []), *(sd.outputs or [])]:
            keep.add((int(sd.subgraphIndex), int(tm.tensorIndex)))
    saved = 0
    for si, sg in enumerate(model.subgraphs):
        for ti, t in enumerate(sg.tensors):
            if (si, ti) in keep or t.name is None:
                continue
            data = model.buffers[t.buffer].data if t.buffer else None
            if data is not None and len(data):
                continue
            saved += len(t.name)
            t.name = None
    return saved


def share_weight_names(model: ModelT) -> int:
    """Give every tensor that reads a constant buffer the name of its first reader.

    ``compact_names`` keeps names unique model-wide because ai-edge-quantizer keys tensors
    by name; once quantization is done, the copies of one weight in each signature (and
    each layer) need no ``:k`` suffix, and :func:`write_model` then stores the name once.
    Returns the number of tensors renamed.
    """
    first: dict[int, bytes] = {}
    renamed = 0
    for sg in model.subgraphs:
        for t in sg.tensors:
            data = model.buffers[t.buffer].data if t.buffer else None
            if data is None or not len(data) or t.name is None:
                continue
            name = first.setdefault(int(t.buffer), t.name)
            if t.name != name:
                t.name = name
                renamed += 1
    return renamed


def float_outputs(model: ModelT) -> list[str]:
    """Give every int8 signature output a DEQUANTIZE to float32 (the default I/O).

    ai-edge-quantizer's static recipe leaves the last op's int8 output as the model
    output; apps and ``verify`` expect float logits unless ``--int8-io`` was asked.
    Returns the outputs changed.
    """
    s = schema()
    types = tensor_type_names()
    changed = []
    for sd in model.signatureDefs or []:
        sg = model.subgraphs[sd.subgraphIndex]
        for tm in sd.outputs:
            qi = int(tm.tensorIndex)
            qt = sg.tensors[qi]
            if types.get(qt.type) not in ("INT8", "UINT8", "INT16"):
                continue
            ft = s.TensorT()
            ft.name = tm.name or b"output"
            qt.name = ft.name + b"/int8"
            ft.shape = list(qt.shape)
            ft.type = s.TensorType.FLOAT32
            ft.buffer = 0
            sg.tensors.append(ft)
            fi = len(sg.tensors) - 1
            op = s.OperatorT()
            # DEQUANTIZE v1 reads uint8, v2 adds int8/int16 (TFLite op versioning).
            version = 1 if types.get(qt.type) == "UINT8" else 2
            op.opcodeIndex = opcode_index(model, s.BuiltinOperator.DEQUANTIZE, version)
            op.inputs, op.outputs = [qi], [fi]
            sg.operators.append(op)
            tm.tensorIndex = fi
            sg.outputs = [fi if int(o) == qi else int(o) for o in sg.outputs]
            changed.append(tm.name.decode())
    return sorted(set(changed))
