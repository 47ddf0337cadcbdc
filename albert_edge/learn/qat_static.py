"""``--qat int8-static``: the activations ``quantize_static`` quantizes, fake-quantized in
the loop with observed ranges.

What convert does (:class:`~albert_edge.onnx.quant.ort.OrtStaticQuantPass`): ONNX
Runtime's ``quantize_static`` in QDQ form on the graph whose fused attention was rewritten
as MatMul + MultiHeadAttention and whose pooler/classifier Gemms are MatMuls; it quantizes
every MatMul with a constant weight (``op_types_to_quantize=["MatMul"]``,
``MatMulConstBOnly``): its weight (int8 symmetric, the ``--target`` recipe), its input
and its output (before the bias Add), each activation uint8 asymmetric per tensor with a
range calibrated over the ``--calibration`` sentences (MinMax by default: the smallest
and largest value seen). Every reader of a quantized tensor reads the dequantized copy,
the residual Sums included. In an ALBERT classifier that is, in graph order:

* the embedding LayerNorm's output; the projection E->H before and after its bias (the
  first layer's input);
* per layer: the fused QKV projection's output (one range for Q, K and V), the attention
  context (MultiHeadAttention's output), the attention output dense before its bias, the
  attention LayerNorm's output, the FFN's first MatMul before its bias, the GELU's
  output, the FFN's second MatMul before its bias, and (all layers but the last) the
  layer's output;
* the [CLS] row (Gather), the pooler before its bias, the Tanh's output, the classifier
  before its bias.

Here each is a :class:`ActQuant` (forward hooks on the transformers modules, the head in
:class:`~albert_edge.learn.trainee.Trainee`): ``torch.fake_quantize_per_tensor_affine``
(straight-through inside the range, zero gradient outside: PyTorch's standard QAT
estimator) with the range from torch.ao's observers, which compute ONNX Runtime's uint8
parameters (``scale = (max(hi, 0) - min(lo, 0)) / 255``, zero point ``round(-lo / scale)``).
Every layer has its own ranges although ALBERT's layers share their weights: the
activations differ per depth, and so do the artifact's QuantizeLinear nodes.

Which observer, and why: PyTorch's default QAT observer, ``MovingAverageMinMaxObserver``
(an EMA of each batch's min and max), follows the ranges while the weights move; the
range convert will use is not an EMA but the recipe's MinMax over calibration sentences.
So, as torch.ao's QAT recipes do ("freeze the quantizer parameters" for the last steps),
the ranges are frozen for the last part of training (from ``QatSpec.freeze`` of the
steps), and frozen at what the recipe computes: ``MinMaxObserver`` over the first
``QatSpec.num_calibration`` training sentences (convert's ``--num-calibration`` default),
with the weights of that step, in eval mode. Only real tokens are observed (padding
excluded), as convert calibrates each sentence alone without padding. Convert then
computes its ranges again on the final weights from ``--calibration``; the simulated ones
approximate them (``benchmarks/qat.py`` measures how closely).
"""

from __future__ import annotations

from typing import Any

import torch

# phases of the ranges (a buffer, so a resumed run continues in the same phase)
EMA, CALIBRATING, FROZEN = 0, 1, 2


class ActQuant(torch.nn.Module):
    """One activation tensor's uint8 per-tensor fake quantizer (ONNX Runtime's QDQ)."""

    def __init__(self, ema: float, ort_producer: str) -> None:
        from torch.ao.quantization.observer import MinMaxObserver, MovingAverageMinMaxObserver

        super().__init__()
        kw: dict[str, Any] = {"dtype": torch.quint8, "quant_min": 0, "quant_max": 255}
        self.ema = MovingAverageMinMaxObserver(averaging_constant=ema, **kw)
        self.calib = MinMaxObserver(**kw)
        self.ort_producer = ort_producer  # the op that produces this tensor in convert's graph

    def observer(self, phase: int) -> Any:
        return self.ema if phase == EMA else self.calib

    def forward(self, x: Any, phase: int, observe: bool, mask: Any = None) -> Any:
        obs = self.observer(phase)
        if observe:
            vals = x.detach().float()
            if mask is not None and vals.dim() == 3:
                vals = vals[mask.bool()]
            obs(vals)
        if phase == CALIBRATING or not bool(torch.isfinite(obs.min_val)):
            return x  # calibration observes the float model, as quantize_static does
        scale, zero = obs.calculate_qparams()
        y = torch.fake_quantize_per_tensor_affine(
            x.float(), scale.to(x.device), zero.to(x.device, torch.int32), 0, 255
        )
        return y.to(x.dtype)

    def qparams(self, phase: int) -> dict[str, Any]:
        obs = self.observer(phase)
        if not bool(torch.isfinite(obs.min_val)):
            return {"observed": False, "ort_producer": self.ort_producer}
        scale, zero = obs.calculate_qparams()
        return {
            "phase": "ema" if phase == EMA else "frozen",
            "min": float(obs.min_val),
            "max": float(obs.max_val),
            "scale": float(scale),
            "zero_point": int(zero),
            "ort_producer": self.ort_producer,
        }


_LAYER = (
    ("qkv.mm", "MatMul"),
    ("ctx", "MultiHeadAttention"),
    ("dense.mm", "MatMul"),
    ("attn_ln", "LayerNormalization"),
    ("ffn.mm", "MatMul"),
    ("gelu", "FastGelu"),
    ("ffn_out.mm", "MatMul"),
    ("out", "LayerNormalization"),
)
_HEAD = (
    ("head.cls", "Gather"),
    ("head.pooler.mm", "MatMul"),
    ("head.tanh", "Tanh"),
    ("head.classifier.mm", "MatMul"),
)


# the op convert's fusion makes of the FFN activation (albert_edge/onnx/passes/fuse_rules.py)
_ACT_OP = {"gelu": "Gelu", "gelu_python": "Gelu", "quick_gelu": "QuickGelu", "relu": "Relu"}


def point_names(layers: int, hidden_act: str = "gelu_new") -> list[tuple[str, str]]:
    """(name, producer op in convert's graph) of every quantized activation, in the
    order of convert's QuantizeLinear nodes."""
    act = _ACT_OP.get(hidden_act, "FastGelu")
    pts = [("emb.ln", "LayerNormalization"), ("emb.proj.mm", "MatMul"), ("emb.proj", "Add")]
    for d in range(layers):
        pts += [
            (f"l{d}.{p}", act if p == "gelu" else op)
            for p, op in _LAYER
            if not (p == "out" and d == layers - 1)
        ]
    return pts + list(_HEAD)


class StaticActs(torch.nn.Module):
    """The activation quantizers of one ALBERT classifier and the hooks that apply them
    (active only inside :meth:`active`: the same modules run unhooked elsewhere)."""

    def __init__(self, model: Any, ema: float) -> None:
        super().__init__()
        cfg = model.config  # every AlbertLayer call is one layer of convert's graph
        self.layers = int(cfg.num_hidden_layers) * int(getattr(cfg, "inner_group_num", 1))
        self.names = point_names(self.layers, str(getattr(cfg, "hidden_act", "gelu_new")))
        self.q = torch.nn.ModuleDict(
            {n.replace(".", "_"): ActQuant(ema, op) for n, op in self.names}
        )
        self.register_buffer("phase", torch.tensor(EMA))
        self._on = False
        self._mask: Any = None
        self._depth = -1
        self._hooks(model)

    # -- applying ------------------------------------------------------------------
    def fq(self, name: str, x: Any) -> Any:
        """``x`` through the quantizer ``name`` (observing it when the phase asks)."""
        phase = int(self.phase)
        observe = (phase == EMA and self.training) or phase == CALIBRATING
        return self.q[name.replace(".", "_")](x, phase, observe, self._mask)

    def fq_mm(self, name: str, y: Any, bias: Any) -> Any:
        """A Linear's output with its MatMul part (before the bias) quantized."""
        if bias is None:
            return self.fq(name, y)
        return self.fq(name, y - bias) + bias

    def active(self, mask: Any) -> Any:
        """Context: the hooks apply, ``mask`` marks the real tokens."""
        import contextlib

        @contextlib.contextmanager
        def ctx() -> Any:
            self._on, self._mask, self._depth = True, mask, -1
            try:
                yield
            finally:
                self._on, self._mask = False, None

        return ctx()

    def _hooks(self, model: Any) -> None:
        albert = model.albert
        albert.embeddings.LayerNorm.register_forward_hook(self._out("emb.ln"))
        albert.encoder.embedding_hidden_mapping_in.register_forward_hook(self._proj)
        for group in albert.encoder.albert_layer_groups:
            for layer in group.albert_layers:
                layer.register_forward_pre_hook(self._enter_layer)
                att = layer.attention
                att.register_forward_pre_hook(self._qkv_range)
                for lin in (att.query, att.key, att.value):
                    lin.register_forward_hook(self._qkv)
                att.dense.register_forward_pre_hook(self._in("ctx"))
                att.dense.register_forward_hook(self._mm("dense.mm"))
                att.LayerNorm.register_forward_hook(self._out("attn_ln"))
                layer.ffn.register_forward_hook(self._mm("ffn.mm"))
                layer.ffn_output.register_forward_pre_hook(self._in("gelu"))
                layer.ffn_output.register_forward_hook(self._mm("ffn_out.mm"))
                layer.full_layer_layer_norm.register_forward_hook(self._layer_out)

    def _name(self, point: str) -> str:
        return f"l{self._depth}.{point}"

    def _enter_layer(self, mod: Any, args: Any) -> None:
        if self._on:
            self._depth += 1

    def _out(self, point: str) -> Any:
        def hook(mod: Any, args: Any, out: Any) -> Any:
            if not self._on:
                return None
            return self.fq(point if point.startswith("emb") else self._name(point), out)

        return hook

    def _in(self, point: str) -> Any:
        def hook(mod: Any, args: Any) -> Any:
            if not self._on:
                return None
            return (self.fq(self._name(point), args[0]), *args[1:])

        return hook

    def _mm(self, point: str) -> Any:
        def hook(mod: Any, args: Any, out: Any) -> Any:
            if not self._on:
                return None
            return self.fq_mm(self._name(point), out, mod.bias)

        return hook

    def _proj(self, mod: Any, args: Any, out: Any) -> Any:
        if not self._on:
            return None
        return self.fq("emb.proj", self.fq_mm("emb.proj.mm", out, mod.bias))

    def _layer_out(self, mod: Any, args: Any, out: Any) -> Any:
        if not self._on or self._depth == self.layers - 1:  # the last: only [CLS] is read
            return None
        return self.fq(self._name("out"), out)

    def _qkv_range(self, mod: Any, args: Any) -> None:
        """Observe the fused QKV MatMul's output (one range for Q, K and V, as convert's
        one [H, 3H] MatMul has) before the three Linears apply it."""
        if not self._on:
            return
        phase = int(self.phase)
        if not ((phase == EMA and self.training) or phase == CALIBRATING):
            return
        import torch.nn.functional as F

        with torch.no_grad():
            w = torch.cat([mod.query.weight, mod.key.weight, mod.value.weight])
            qkv = F.linear(args[0], w)
        name = self._name("qkv.mm").replace(".", "_")
        vals = qkv.float()[self._mask.bool()] if self._mask is not None else qkv.float()
        self.q[name].observer(phase)(vals)

    def _qkv(self, mod: Any, args: Any, out: Any) -> Any:
        if not self._on:
            return None
        name = self._name("qkv.mm").replace(".", "_")
        if int(self.phase) == CALIBRATING:
            return None
        return self.q[name](out - mod.bias, int(self.phase), False) + mod.bias

    # -- the schedule --------------------------------------------------------------
    def calibrate(self, trainee: Any, examples: list[Any], device: str) -> None:
        """Freeze the ranges at the recipe's MinMax over ``examples``: as
        ``quantize_static`` calibrates, on the float model (current weights, neither
        weights nor activations fake-quantized), in eval mode."""
        from albert_edge.learn.batching import batches, collate

        was = trainee.training
        trainee.eval()
        self.phase.fill_(CALIBRATING)
        trainee.float_pass = True
        try:
            with torch.no_grad():
                for batch in batches(examples, 32, None, shuffle=False):
                    ids, mask, _ = (t.to(device) for t in collate(batch))
                    trainee(ids, mask)
        finally:
            trainee.float_pass = False
        self.phase.fill_(FROZEN)
        trainee.train(was)

    def ranges(self) -> list[dict[str, Any]]:
        """Each quantizer's range and uint8 parameters now, in convert's graph order."""
        phase = int(self.phase)
        return [{"tensor": n, **self.q[n.replace(".", "_")].qparams(phase)} for n, _ in self.names]
