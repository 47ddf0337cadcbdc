"""The fine-tune loop: seeded batches, the loss, held-out selection, resumable state.

Deterministic given ``--seed`` and ``--threads`` on CPU (``torch.use_deterministic_algorithms``):
batches come from :func:`albert_edge.learn.batching.batches` with a seeded generator, dropout
from the seeded global RNG. Each step runs with the stop signals held
(:func:`albert_edge.io.signals_held`), so SIGINT/SIGTERM land between steps, where
:mod:`albert_edge.learn.resume` saves a consistent state before the run stops.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from albert_edge.learn.errors import LearnError

if TYPE_CHECKING:
    from albert_edge.learn.ddp import World
    from albert_edge.learn.inputs import Prepared


@dataclass
class LoopResult:
    selected: dict[str, Any]
    held_out: dict[str, Any]
    report: dict[str, Any] | None
    log: list[dict[str, Any]]
    train_s: float
    qat_ranges: list[dict[str, Any]] | None = None  # int8-static: the simulated ranges


def _autocast(device: str, amp: str) -> Any:
    """bf16 (default) or fp16 autocast on CUDA; nothing on CPU."""
    import contextlib

    import torch

    if not device.startswith("cuda") or amp == "none":
        return contextlib.nullcontext()
    dtype = torch.float16 if amp == "fp16" else torch.bfloat16
    return torch.autocast("cuda", dtype=dtype)


def _loss(trainee: Any, teacher: Any, batch: Any, prep: Prepared, device: str) -> Any:
    """PABEE-weighted per-exit loss: CE, or the distillation term with a teacher."""
    import torch
    import torch.nn.functional as F

    from albert_edge.learn.batching import collate
    from albert_edge.learn.distil import hidden_term, kd_term
    from albert_edge.learn.scratch import pabee_weights

    ids, mask, labels = (t.to(device) for t in collate(batch))
    s = prep.ft.distil_settings
    with _autocast(device, prep.ft.amp):
        logits, hs = trainee(ids, mask)
        t_out = None
        if teacher is not None:
            with torch.no_grad():
                t_out = teacher(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        weights = pabee_weights(len(logits))
        loss = sum(
            w
            * (
                kd_term(lg.float(), t_out.logits.float(), labels, s)
                if t_out is not None
                else F.cross_entropy(lg.float(), labels)
            )
            for w, lg in zip(weights, logits, strict=True)
        )
        if t_out is not None and s.hidden > 0:
            loss = loss + s.hidden * hidden_term(hs, t_out.hidden_states, mask).float()
    return loss


def correct_vectors(trainee: Any, examples: list[Any], device: str) -> list[Any]:
    """Per exit, a 0/1 numpy vector: which of ``examples`` (in order) it gets right."""
    import numpy as np
    import torch

    from albert_edge.learn.batching import bucketed, collate

    trainee.eval()
    # in length-sorted chunks (as batches(shuffle=False) visits them); mapped back below
    idx = bucketed(len(examples), lambda j: len(examples[j][0]), 128, None, False)
    out: list[list[bool]] = []
    with torch.no_grad():
        for rows in idx:
            ids, mask, labels = (t.to(device) for t in collate([examples[j] for j in rows]))
            logits, _ = trainee(ids, mask)
            hits = [(lg.argmax(-1) == labels).cpu().tolist() for lg in logits]
            out = [a + b for a, b in zip(out, hits, strict=True)] if out else hits
    order = [i for rows in idx for i in rows]
    res = []
    for col in out:
        v = np.zeros(len(examples), dtype=bool)
        v[order] = col
        res.append(v)
    return res


def _snapshot(trainee: Any) -> dict[str, Any]:
    return {k: v.detach().cpu().clone() for k, v in trainee.state_dict().items()}


def _progress(epoch: int, step: int, n: int, loss: float, t_start: float, done0: int) -> None:
    from albert_edge.progress import enabled

    if not enabled():
        return
    rate = (time.time() - t_start) / max(1, step - done0)
    print(
        json.dumps(
            {
                "epoch": epoch,
                "step": f"{step}/{n}",
                "loss": round(loss, 4),
                "eta_s": round(rate * (n - step), 1),
            }
        ),
        file=sys.stderr,
    )


def train_loop(prep: Prepared, w: World, device: str) -> LoopResult:
    """Train, choose the epoch on held-out rows, report on ``--dev``; weights end in
    ``prep.student`` (the chosen epoch's, on CPU)."""
    import torch

    from albert_edge.learn import ddp
    from albert_edge.learn.checks import check_max_len
    from albert_edge.learn.scratch import make_optimizer
    from albert_edge.learn.trainee import Trainee

    ft, st = prep.ft, prep.student
    check_max_len(ft.max_len, int(st.model.config.max_position_embeddings), f"--init {ft.init}")
    trainee = Trainee(st.model, st.exits, prep.qat).to(device)
    teacher = prep.teacher.model.to(device).eval() if prep.teacher is not None else None
    if teacher is not None:
        teacher.requires_grad_(False)
    model = ddp.wrap(trainee, w, device)
    params = list(trainee.named_parameters())
    steps_per_epoch = math.ceil(len(prep.train_ex) / ft.batch_size)
    opt, sched = make_optimizer(params, ft, steps_per_epoch * ft.epochs)
    scaler = torch.amp.GradScaler("cuda", enabled=device.startswith("cuda") and ft.amp == "fp16")
    gen = torch.Generator().manual_seed(ft.seed)
    run = _Run(prep, w, device, trainee, model, teacher, opt, sched, scaler, gen, steps_per_epoch)
    run.restore()
    t0 = time.time()
    try:
        for epoch in range(run.epoch, ft.epochs):
            run.one_epoch(epoch)
    except KeyboardInterrupt:  # between steps (they hold the signals): a consistent state
        run.save()
        raise
    trainee.load_state_dict(run.best["weights"])
    trainee.to("cpu")
    report = _report(prep, trainee, w)
    acts = getattr(trainee, "acts", None)
    ranges = acts.ranges() if acts is not None else None
    return LoopResult(
        run.best["selected"], run.best["held_out"], report, run.log, time.time() - t0, ranges
    )


class _Run:
    """The mutable state of one loop (what :mod:`.resume` saves)."""

    def __init__(
        self,
        prep: Prepared,
        w: World,
        device: str,
        trainee: Any,
        model: Any,
        teacher: Any,
        opt: Any,
        sched: Any,
        scaler: Any,
        gen: Any,
        n: int,
    ) -> None:
        from albert_edge.learn import resume

        self.prep, self.w, self.device, self.trainee, self.model = prep, w, device, trainee, model
        self.teacher, self.opt, self.sched, self.scaler, self.gen, self.n = (
            teacher,
            opt,
            sched,
            scaler,
            gen,
            n,
        )
        self.epoch, self.in_epoch, self.step = 0, 0, 0
        self.gen_state = gen.get_state()
        self.log: list[dict[str, Any]] = []
        self.best: dict[str, Any] = {}
        self.dir = resume.state_dir(prep.ft.out)
        self.fp = resume.fingerprint(
            {
                "init": prep.student.init.path.name,
                "data": prep.data,
                "flags": {k: v for k, v in prep.ft.flags().items() if k != "resume"},
                "world": w.size,
                "init_sha": _init_sha(prep),
            }
        )

    def restore(self) -> None:
        from albert_edge.learn import resume

        if not self.prep.ft.resume:
            return
        s = resume.load(self.dir, self.fp, self.w.rank)
        if s is None:
            return
        self.trainee.load_state_dict(s["weights"])
        self.opt.load_state_dict(s["opt"])
        self.sched.load_state_dict(s["sched"])
        self.epoch, self.in_epoch, self.step = s["epoch"], s["in_epoch"], s["step"]
        self.gen_state, self.log = s["gen"], json.loads(s["log"])
        best = dict(s["best"])
        selected = json.loads(best.pop("selected_json", "{}") or "{}")
        held_out = json.loads(best.pop("held_out_json", "{}") or "{}")
        # stopped in the first epoch: no epoch was chosen yet, so there is no best
        self.best = (
            {**best, "selected": selected, "held_out": held_out} if "weights" in best else {}
        )
        self.gen.set_state(s["gen_next"])

    def save(self) -> None:
        from albert_edge.learn import resume

        best = {k: v for k, v in self.best.items() if k not in ("selected", "held_out")}
        if self.best:  # none before the first epoch ends
            best["selected_json"] = json.dumps(self.best["selected"])
            best["held_out_json"] = json.dumps(self.best["held_out"])
        state = {
            "fingerprint": self.fp,
            "weights": _snapshot(self.trainee),
            "opt": self.opt.state_dict(),
            "sched": self.sched.state_dict(),
            "epoch": self.epoch,
            "in_epoch": self.in_epoch,
            "step": self.step,
            "gen": self.gen_state,
            "gen_next": self.gen.get_state(),
            "log": json.dumps(self.log),
            "best": best,
        }
        resume.save(self.dir, state, self.w.rank, self.w.main)

    def one_epoch(self, epoch: int) -> None:
        from albert_edge.io import signals_held
        from albert_edge.learn.batching import batches as bucketed_batches

        if epoch != self.epoch or self.in_epoch == 0:
            self.epoch, self.in_epoch, self.gen_state = epoch, 0, self.gen.get_state()
        self.gen.set_state(self.gen_state)
        batches = bucketed_batches(
            self.prep.train_ex, self.prep.ft.batch_size, self.gen, shuffle=True
        )
        t_start, done0 = time.time(), self.in_epoch
        every = max(1, len(batches) // 10)
        for i in range(self.in_epoch, len(batches)):
            with signals_held():
                loss = self._step(batches[i], epoch)
                self.in_epoch = i + 1
            if self.w.main and ((i + 1) % every == 0 or i + 1 == len(batches)):
                _progress(epoch + 1, i + 1, len(batches), loss, t_start, done0)
        self._end_epoch(epoch)

    def _step(self, batch: Any, epoch: int) -> float:
        import torch

        self.trainee.train()
        self._freeze_ranges()
        loss = _loss(self.model, self.teacher, self.w.shard(batch), self.prep, self.device)
        if not bool(torch.isfinite(loss.detach()).all()):
            raise LearnError(
                f"training diverged: the loss is {float(loss.detach())} at epoch {epoch + 1}, "
                f"step {self.step + 1}; lower --lr or check the data; nothing was written"
            )
        self.opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.opt)
        torch.nn.utils.clip_grad_norm_(list(self.trainee.parameters()), 1.0)
        self.scaler.step(self.opt)
        self.scaler.update()
        self.sched.step()
        self.step += 1
        return float(loss.detach())

    def _freeze_ranges(self) -> None:
        """int8-static QAT: at ``QatSpec.freeze`` of the steps, the activation ranges are
        calibrated as convert's recipe does and frozen (:mod:`albert_edge.learn.qat_static`)."""
        from albert_edge.learn.qat_static import EMA

        acts, spec = getattr(self.trainee, "acts", None), self.prep.qat
        if acts is None or spec is None or int(acts.phase) != EMA:
            return
        if self.step >= int(spec.freeze * self.n * self.prep.ft.epochs):
            acts.calibrate(self.trainee, self.prep.train_ex[: spec.num_calibration], self.device)

    def _end_epoch(self, epoch: int) -> None:
        from albert_edge.io import signals_held

        vecs = correct_vectors(self.trainee, self.prep.held_ex, self.device)
        with signals_held():  # the record, the choice and the saved state change together
            self._record_epoch(epoch, vecs)

    def _single_class(self, correct: Any) -> int | None:
        """The one class a two-class model answered on every held-out row, else None
        (what ``train`` calls learning nothing)."""
        from albert_edge.tasks.learned import binary_single_class

        if int(self.prep.student.init.config.num_labels) != 2:
            return None  # a wrong row's answer is known only between two classes
        labels = [int(y) for _, y in self.prep.held_ex]
        return binary_single_class([bool(c) for c in correct], labels)

    def _record_epoch(self, epoch: int, vecs: list[Any]) -> None:
        from albert_edge.depth.stats import accuracy_interval

        iv = accuracy_interval(vecs[-1])
        entry = {
            "epoch": epoch + 1,
            "step": self.step,
            "held_out_accuracy": round(iv.delta, 5),
            "held_out_exit_accuracy": [round(float(v.mean()), 5) for v in vecs],
        }
        self.log.append(entry)
        if not self.best or iv.delta > self.best["held_out"]["accuracy"]:
            self.best = {
                "weights": _snapshot(self.trainee),
                "selected": {
                    "epoch": epoch + 1,
                    "by": "full-depth accuracy on the held-out split (ties: the earlier epoch)",
                },
                "held_out": {
                    "accuracy": iv.delta,
                    "low": iv.low,
                    "high": iv.high,
                    "rows": len(vecs[-1]),
                    "exit_accuracy": entry["held_out_exit_accuracy"],
                    "interval": "bootstrap 95 % (albert_edge.depth.stats)",
                    "single_class": self._single_class(vecs[-1]),
                },
            }
        self.epoch, self.in_epoch = epoch + 1, 0
        self.save()
        from albert_edge.progress import enabled

        if enabled() and self.w.main:
            print(json.dumps(entry), file=sys.stderr)


def _init_sha(prep: Prepared) -> str:
    from albert_edge.learn.source import identity

    return str(identity(prep.student.init).get("weights_sha256"))


def _report(prep: Prepared, trainee: Any, w: World) -> dict[str, Any] | None:
    """``--dev`` accuracy of the chosen weights with an interval, and paired against the
    init model on the same rows (printed, never chosen on)."""
    from albert_edge.depth.stats import accuracy_interval, paired_bootstrap
    from albert_edge.learn.trainee import Trainee

    if prep.dev_ex is None or not w.main:
        return None
    vecs = correct_vectors(trainee, prep.dev_ex, "cpu")
    init = Trainee(prep.student.init.model.to("cpu"), None, None)
    ref = correct_vectors(init, prep.dev_ex, "cpu")[-1]
    iv = accuracy_interval(vecs[-1])
    d = paired_bootstrap(vecs[-1], ref)
    return {
        "file": prep.data["report"]["file"],
        "accuracy": iv.delta,
        "low": iv.low,
        "high": iv.high,
        "exit_accuracy": [float(v.mean()) for v in vecs],
        "init_accuracy": float(ref.mean()),
        "vs_init": {**d.to_dict(), "interval": "paired bootstrap 95 % (albert_edge.depth.stats)"},
    }
