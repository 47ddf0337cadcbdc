"""Compression that learns: fine-tune, distil and quantization-aware training from a
checkpoint the user already has (``albert-edge train --init CKPT``).

* :func:`fine_tune` / :class:`FineTune` — the run (``finetune``), its loop (``loop``),
  resumable state (``resume``), data-parallel processes (``ddp``);
* :mod:`.distil` — logit and hidden-state distillation losses;
* :mod:`.qat` — convert's weight and table quantizers as fake quantization in the loop
  (:mod:`.qat_static`: int8-static's activations);
* :mod:`.source` — what a run starts from (init, student at ``--depth``, teacher checks);
* :mod:`.split` — the seeded held-out split the epoch is chosen on;
* :mod:`.tasks` — training on any task file (pairs, NER, QA): its data and model
  (:mod:`.task_prepare`, :mod:`.task_model`) and record (:mod:`.task_record`);
* :mod:`.scratch` — the from-scratch SST-2 recipe; what every run shares: batches
  (:mod:`.batching`), refusals (:mod:`.checks`), the training output (:mod:`.record`);
* :mod:`.command` — every flag of ``albert-edge train``, defined once.

``docs/training.md`` has the commands and the measured trade.
"""

from __future__ import annotations

from albert_edge.learn.distil import DistilSettings, kd_term, layer_map
from albert_edge.learn.errors import LearnError
from albert_edge.learn.finetune import FineTune, fine_tune, prepare
from albert_edge.learn.qat import (
    QatSpec,
    fake_int4,
    fake_int8,
    fake_quantized,
    fake_tables,
    qat_spec,
)
from albert_edge.learn.split import HeldOut

__all__ = [
    "DistilSettings",
    "FineTune",
    "HeldOut",
    "LearnError",
    "QatSpec",
    "fake_int4",
    "fake_int8",
    "fake_quantized",
    "fake_tables",
    "fine_tune",
    "kd_term",
    "layer_map",
    "prepare",
    "qat_spec",
]
