"""PyTorch ALBERT → ``.tflite`` through litert-torch (the field's PyTorch → LiteRT converter).

One ``litert_torch.signature(...)`` per sequence bucket, chained, then one ``.convert()``:
litert-torch lowers every signature into one MLIR module whose constants are uniqued
across signatures, so the shared ALBERT layer weights are stored once for all buckets
and all L layer applications (measured: 3 buckets add 6 KB of folded position-embedding
slices to a 2 MB model, which :func:`albert_edge.tflite.prefix_slices.share_prefix_slices`
then removes).

Signatures take int32 ``input_ids``/``attention_mask``/``token_type_ids`` of shape
[1, L] (mobile runtimes and delegates have no int64; batch 1 is what a phone runs, the
Python runner loops over batch items). Multiple choice is exported per choice
([1, 1, L] → [1, 1]): ALBERT scores each choice independently, so the runner loops over
choices too and the artifact does not bake in a number of choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from albert_edge.heads import HeadSpec

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def signature_name(seq_len: int) -> str:
    return f"seq_{seq_len}"


def _wrapper(model: torch.nn.Module, head: HeadSpec) -> torch.nn.Module:
    import torch

    outputs = tuple(head.outputs)

    class AlbertSignature(torch.nn.Module):
        """Named int32 inputs → dict of the head's outputs (dict keys = output names)."""

        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> dict[str, torch.Tensor]:
            out = self.m(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
                return_dict=True,
            )
            return {name: getattr(out, name) for name in outputs}

    return AlbertSignature().eval()


def sample_inputs(seq_len: int, head: HeadSpec) -> dict[str, torch.Tensor]:
    import torch

    shape = (1, 1, seq_len) if head.choices_axis else (1, seq_len)
    return {
        "input_ids": torch.full(shape, 5, dtype=torch.int32),
        "attention_mask": torch.ones(shape, dtype=torch.int32),
        "token_type_ids": torch.zeros(shape, dtype=torch.int32),
    }


def export_litert_torch(
    model: torch.nn.Module,
    head: HeadSpec,
    seq_lens: Sequence[int],
    *,
    quant_config: Any = None,
) -> bytes:
    """Convert ``model`` to one flatbuffer with a ``seq_<L>`` signature per length.

    The longest bucket is exported first, so it is subgraph 0: the one LiteRT's Task
    Library runs and the LiteRT metadata describes (a reader that knows one subgraph then
    sees every length the file accepts, not the shortest)."""
    import contextlib
    import io
    import logging

    import litert_torch
    import torch

    wrapper = _wrapper(model, head)
    converter = None
    for seq_len in sorted(set(seq_lens), reverse=True):
        kwargs = sample_inputs(seq_len, head)
        if converter is None:
            converter = litert_torch.signature(
                signature_name(seq_len), wrapper, sample_kwargs=kwargs
            )
        else:
            converter = converter.signature(signature_name(seq_len), wrapper, sample_kwargs=kwargs)
    assert converter is not None
    logging.getLogger("litert_torch").setLevel(logging.ERROR)
    # litert-torch prints a progress tree on stdout; a CLI user wants one report, not that.
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        edge_model = converter.convert(quant_config=quant_config)
        data: bytes = bytes(edge_model.model_content())
    return data
