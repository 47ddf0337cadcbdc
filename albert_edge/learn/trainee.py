"""The module a fine-tune optimises: the student, its exits, its fake quantizer.

One ``torch.nn.Module`` so that ``DistributedDataParallel`` wraps all of it. Its forward
returns every exit's logits, computed as ``AlbertForSequenceClassification`` computes its
own (pooler tanh on [CLS], dropout, linear): the exit after the last layer is the model's
own classifier. Under QAT the fake-quantized weights are computed once per forward
(:func:`albert_edge.learn.qat.fake_quantized`) and handed to the backbone through
``torch.func.functional_call``, so ALBERT's shared layer is quantized once, as stored;
under ``int8-static`` the activations too (:mod:`albert_edge.learn.qat_static`: hooks
in the backbone, the full-depth head here). Exit heads stay float (the artifact has none).
"""

from __future__ import annotations

import contextlib
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
        self.float_pass = False  # int8-static calibration: the float model, observed
        if qat is not None and qat.static:
            from albert_edge.learn.qat_static import StaticActs

            self.acts = StaticActs(model, qat.ema)

    def forward(self, ids: Any, mask: Any) -> tuple[list[Any], Any]:
        """(logits of each exit, shallowest first; hidden states after each layer)."""
        import torch.nn.functional as F
        from torch.func import functional_call

        m = self.model
        fq = fake_quantized(m, self.qat) if self.qat is not None and not self.float_pass else {}
        kwargs = {"input_ids": ids, "attention_mask": mask, "output_hidden_states": True}
        backbone = {k[len("albert.") :]: v for k, v in fq.items() if k.startswith("albert.")}
        acts = getattr(self, "acts", None)
        with acts.active(mask) if acts is not None else contextlib.nullcontext():
            out = (
                functional_call(m.albert, backbone, (), kwargs) if backbone else m.albert(**kwargs)
            )
        hs = out.hidden_states
        pw, pb = fq.get("albert.pooler.weight", m.albert.pooler.weight), m.albert.pooler.bias
        heads = [(e.weight, e.bias) for e in self.exits] if self.exits is not None else []
        cw, cb = fq.get("classifier.weight", m.classifier.weight), m.classifier.bias
        if acts is None:
            heads.append((cw, cb))
        states = hs[len(hs) - len(heads) - (acts is not None) :]
        logits = [
            F.linear(m.dropout(torch.tanh(F.linear(h[:, 0], pw, pb))), w, b)
            for (w, b), h in zip(heads, states, strict=False)
        ]
        if acts is not None:  # convert's QDQ head: [CLS], pooler MatMul, Tanh, classifier
            with acts.active(None):
                x = F.linear(acts.fq("head.cls", hs[-1][:, 0]), pw, pb)
                x = m.dropout(acts.fq("head.tanh", torch.tanh(acts.fq_mm("head.pooler.mm", x, pb))))
                logits.append(acts.fq_mm("head.classifier.mm", F.linear(x, cw, cb), cb))
        return logits, hs


def exit_weights(n: int) -> list[float]:
    """PABEE's exit weights for ``n`` exits (one exit: weight 1)."""
    from albert_edge.learn.scratch import pabee_weights

    return pabee_weights(n)
