"""albert_edge_record: what the runner and ``inspect`` need, stored in the file.

The head, its outputs (and which have a sequence axis), the signatures' lengths, the
precision and the ALBERT dimensions go into a named JSON metadata buffer
(``albert_edge``; TFLite ignores metadata it does not know), so that a bare
``model.tflite`` can be run and inspected without its manifest.

Postcondition: the metadata reads back as exactly the payload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import TflitePass

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


class RecordConfigPass(TflitePass):
    name: ClassVar[str] = "albert_edge_record"

    def __init__(self, payload: Mapping[str, Any]) -> None:
        super().__init__()
        self.payload = dict(payload)

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        fb.set_metadata(model, fb.METADATA_NAME, self.payload)
        return {"metadata": fb.METADATA_NAME}

    def postcondition(self, model: ModelT) -> None:
        import json

        from albert_edge.tflite import flatbuffer as fb

        got = fb.get_metadata(model, fb.METADATA_NAME)
        if got != json.loads(json.dumps(self.payload)):
            self.fail(f"metadata {fb.METADATA_NAME!r} does not read back as written")
