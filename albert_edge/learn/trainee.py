"""The module a fine-tune optimises: the student, its exits, its fake quantizer.

One ``torch.nn.Module`` so that ``DistributedDataParallel`` wraps all of it. Its forward
returns every exit's logits, computed as ``AlbertForSequenceClassification`` computes its
own (pooler tanh on [CLS], dropout, linear): the exit after the last layer is the model's
own classifier. Under QAT the fake-quantized weights are computed once per forward
(:func:`albert_edge.learn.qat.fake_quantized`) and handed to the backbone through
``torch.func.functional_call``, so ALBERT's shared layer is quantized once, as stored.
"""

from __future__ import annotations

from typing import Any

import torch

from albert_edge.learn.qat import QatSpec, fake_quantized


class Trainee(torch.nn.Module):
    """``model`` (AlbertForSequenceClassification), ``exits`` (L-1 linears or None)."""

    def __init__(self, model: Any, exits: Any, qat: QatSpec | None) -> None:
        super().__init__()
        self.model = model
        self.exits = exits
        self.qat = qat

    def forward(self, ids: Any, mask: Any) -> tuple[list[Any], Any]:
        """(logits of each exit, shallowest first; hidden states after each layer)."""
        import torch.nn.functional as F
        from torch.func import functional_call

        m = self.model
        fq = fake_quantized(m, self.qat) if self.qat is not None else {}
        kwargs = {"input_ids": ids, "attention_mask": mask, "output_hidden_states": True}
        backbone = {k[len("albert.") :]: v for k, v in fq.items() if k.startswith("albert.")}
        out = functional_call(m.albert, backbone, (), kwargs) if backbone else m.albert(**kwargs)
        hs = out.hidden_states
        pw = fq.get("albert.pooler.weight", m.albert.pooler.weight)
        heads = [(e.weight, e.bias) for e in self.exits] if self.exits is not None else []
        heads.append((fq.get("classifier.weight", m.classifier.weight), m.classifier.bias))
        states = hs[len(hs) - len(heads) :]
        logits = [
            F.linear(m.dropout(torch.tanh(F.linear(h[:, 0], pw, m.albert.pooler.bias))), w, b)
            for (w, b), h in zip(heads, states, strict=True)
        ]
        return logits, hs


def exit_weights(n: int) -> list[float]:
    """PABEE's exit weights for ``n`` exits (one exit: weight 1)."""
    from albert_edge.learn.scratch import pabee_weights

    return pabee_weights(n)
