"""Training from scratch: the embedded model's recipe, and the parts every run shares.

``albert-edge train`` without ``--init`` (see :mod:`albert_edge.train` for the command and
its guarantees): a small ALBERT classifier on SST-2, deterministic given ``--seed`` and
``--threads``. The default config (:data:`DEFAULTS`, ``--config`` on top), the PABEE exit
loss and exit classifiers and the optimizer defined here are also what a fine-tune
(:mod:`albert_edge.learn.finetune`) and the task trainer (:mod:`albert_edge.learn.tasks`)
use; the batches are :mod:`albert_edge.learn.batching`'s, the output and its record
:mod:`albert_edge.learn.record`'s, the refusals :mod:`albert_edge.learn.checks`'.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from albert_edge.checkpoint import DEFAULT_MODEL
from albert_edge.errors import ConfigError
from albert_edge.heads import EXIT_HEADS_FILE
from albert_edge.io import atomic_output_dir, check_output
from albert_edge.learn.batching import batches, collate
from albert_edge.learn.checks import check_finite_hyperparameters, check_finite_step, check_max_len
from albert_edge.learn.record import (
    TRAINING_OUTPUT,
    TRAINING_RECORD,
    given_args,
    machine,
    own_files,
    write_model_files,
)
from albert_edge.sealed import TRAINED, made_from, seal

# ``--spiece``'s default: the SentencePiece model the embedded model ships, ALBERT's
# 30k-clean.model byte for byte, so that training needs no file from outside the package.
DEFAULT_SPIECE = DEFAULT_MODEL / "spiece.model"

DEFAULTS: dict[str, Any] = dict(
    vocab_size=30000,
    embedding_size=64,
    hidden_size=128,
    num_hidden_layers=4,
    num_attention_heads=4,
    intermediate_size=512,
    num_hidden_groups=1,
    inner_group_num=1,
    max_position_embeddings=512,
    hidden_act="gelu_new",
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
    classifier_dropout_prob=0.1,
)


def evaluate(model: Any, examples: list[tuple[list[int], int]], batch_size: int = 128) -> float:
    import torch

    model.eval()
    correct = 0
    with torch.no_grad():
        for batch in batches(examples, batch_size, None, shuffle=False):
            ids, mask, labels = collate(batch)
            logits = model(input_ids=ids, attention_mask=mask).logits
            correct += int((logits.argmax(-1) == labels).sum())
    return correct / len(examples)


def predicted_classes(model: Any, examples: list[tuple[list[int], int]]) -> set[int]:
    """The classes ``model`` predicts over ``examples`` (one class: it learned nothing)."""
    import torch

    model.eval()
    seen: set[int] = set()
    with torch.no_grad():
        for batch in batches(examples, 128, None, shuffle=False):
            ids, mask, _ = collate(batch)
            seen.update(int(c) for c in model(input_ids=ids, attention_mask=mask).logits.argmax(-1))
    return seen


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Train into ``args.out``; return the summary written to its ``training.json``.

    The output is checked before any work (a refusal costs nothing), locked for the whole
    run, and written atomically: see the module docstring.
    """
    if args.lr is None:
        args.lr = 1e-3
    out = Path(args.out)
    inputs = [Path(args.train), Path(args.dev), *spiece_input(Path(args.spiece))]
    overrides = config_overrides(args)  # a bad --config fails before any work
    check_finite_hyperparameters(args)
    positions = {**DEFAULTS, **overrides}["max_position_embeddings"]
    check_max_len(args.max_len, int(positions), "the model (--config and its defaults)")
    check_output(out, overwrite=args.overwrite, inputs=inputs, kind=TRAINING_OUTPUT)
    with atomic_output_dir(
        out, overwrite=args.overwrite, inputs=inputs, kind=TRAINING_OUTPUT
    ) as tmp:
        model, exits, summary = _fit(args)
        _write_output(tmp, model, summary, args, exits)
    return summary


def spiece_input(spiece: Path) -> list[Path]:
    """``--spiece`` as an input the output must not replace, except the packaged default:
    retraining the embedded model into its own directory (the documented regeneration)
    reads it at the start and copies it into the new output before the old one is
    replaced, so the run never loses it."""
    if spiece.resolve() == DEFAULT_SPIECE.resolve():
        return []
    return [spiece]


def optimizer_step(
    loss: Any, model: Any, opt: Any, sched: Any, params: Any, epoch: int, step: int
) -> None:
    """One optimizer step on ``loss``: checked finite first (nothing diverged is saved),
    gradients clipped to norm 1 over ``params`` (name, tensor pairs), then the schedule."""
    import torch

    check_finite_step(loss, model, epoch, step)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for _, p in params], 1.0)
    opt.step()
    sched.step()


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``--config`` as a dict of config keys, or one line saying why not."""
    try:
        overrides = json.loads(args.config) if args.config else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"--config {args.config!r}: not JSON ({exc}); pass a JSON object"
        ) from None
    if not isinstance(overrides, dict):
        raise ConfigError(f"--config {args.config!r}: expected a JSON object of config keys")
    from albert_edge.configs import check_config_overrides

    check_config_overrides(overrides, DEFAULTS)  # a typo is named, not silently ignored
    return overrides


EXIT_LOSSES = ("none", "pabee")


def pabee_weights(layers: int) -> list[float]:
    """PABEE's exit weights (Zhou et al. 2020, eq. 6): exit ``j`` of ``L`` weighs
    ``j / sum(1..L)``, so deeper exits, which see more of the input, count for more and
    the full-depth classifier is not sacrificed to the shallow ones."""
    total = layers * (layers + 1) / 2
    return [j / total for j in range(1, layers + 1)]


def pabee_loss(exit_logits: list[Any], labels: Any) -> Any:
    """``sum_j j * CE(logits_j, labels) / sum_j j`` over the exits after layers ``1..L``."""
    import torch

    weights = pabee_weights(len(exit_logits))
    return sum(
        w * torch.nn.functional.cross_entropy(lg, labels)
        for w, lg in zip(weights, exit_logits, strict=True)
    )


def make_exit_classifiers(config: Any) -> Any:
    """One ``num_labels × H`` linear per layer ``1..L-1``; the exit after layer ``L`` is the
    model's own classifier. The pooler is the model's own, shared by every exit: the shape
    :mod:`albert_edge.early_exit.heads` and :mod:`albert_edge.depth` read."""
    import torch

    exits = torch.nn.ModuleList(
        torch.nn.Linear(int(config.hidden_size), int(config.num_labels))
        for _ in range(int(config.num_hidden_layers) - 1)
    )
    for lin in exits:  # the initialisation transformers gives the model's classifier
        torch.nn.init.normal_(lin.weight, std=float(config.initializer_range))
        torch.nn.init.zeros_(lin.bias)
    return exits


def exit_logits(model: Any, exits: Any, ids: Any, mask: Any) -> list[Any]:
    """Logits of every exit, as AlbertForSequenceClassification computes its own: pooler
    (tanh) on the [CLS] state after layer ``j``, dropout, then exit ``j``'s linear."""
    import torch

    hs = model.albert(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    pooler = model.albert.pooler
    heads = [*exits, model.classifier]
    return [
        head(model.dropout(torch.tanh(pooler(h[:, 0]))))
        for head, h in zip(heads, hs[1:], strict=True)
    ]


def _encode(args: argparse.Namespace) -> tuple[list[Any], list[Any]]:
    """(train, dev) as (token ids, label) pairs."""
    from albert_edge.data import read_sst2
    from albert_edge.progress import track
    from albert_edge.tokenizer import AlbertTokenizer

    tok = AlbertTokenizer(args.spiece)

    def encode(rows: list[tuple[int, str]]) -> list[tuple[list[int], int]]:
        out = []
        for label, text in track(rows, total=len(rows), description="tokenize"):
            ids = tok.encode(text, max_length=args.max_len, padding="none").input_ids[0]
            out.append((ids, label))
        return out

    return encode(read_sst2(args.train, labels=range(2))), encode(
        read_sst2(args.dev, labels=range(2))
    )


def make_optimizer(params: list[tuple[str, Any]], args: Any, total: int) -> Any:
    """AdamW (no decay on biases, norms and embeddings) and linear warmup then decay;
    ``args``: anything with ``lr``, ``warmup`` and ``weight_decay`` (flags or a FineTune)."""
    import torch

    decay = [p for n, p in params if p.ndim >= 2 and "embeddings" not in n]
    no_decay = [p for n, p in params if not (p.ndim >= 2 and "embeddings" not in n)]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.lr,
        betas=(0.9, 0.98),
        eps=1e-6,
    )
    warmup = int(total * args.warmup)

    def lr_at(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_at)


def _fit(args: argparse.Namespace) -> tuple[Any, Any, dict[str, Any]]:
    """(model, exit classifiers or None, summary): the whole training run."""
    import torch
    from transformers import AlbertConfig, AlbertForSequenceClassification

    from albert_edge.progress import enabled as progress_enabled
    from albert_edge.progress import track

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    t0 = time.time()
    train_ex, dev_ex = _encode(args)
    overrides = config_overrides(args)
    config = AlbertConfig(**{**DEFAULTS, **overrides, "num_labels": 2})
    config.architectures = ["AlbertForSequenceClassification"]
    config.id2label = {0: "negative", 1: "positive"}
    config.label2id = {"negative": 0, "positive": 1}
    model = AlbertForSequenceClassification(config)
    pabee = getattr(args, "exit_loss", "none") == "pabee"
    exits = make_exit_classifiers(config) if pabee else None
    params = list(model.named_parameters())
    params += [(f"exits.{n}", p) for n, p in exits.named_parameters()] if exits else []
    gen = torch.Generator().manual_seed(args.seed)
    total = math.ceil(len(train_ex) / args.batch_size) * args.epochs
    opt, sched = make_optimizer(params, args, total)
    log: list[dict[str, Any]] = []
    step = 0
    for epoch in range(args.epochs):
        model.train()
        running, seen = 0.0, 0
        epoch_batches = batches(train_ex, args.batch_size, gen, shuffle=True)
        for batch in track(
            epoch_batches,
            total=len(epoch_batches),
            description=f"epoch {epoch + 1}",
            status=lambda: f"loss {running / max(1, seen):.4f}",  # noqa: B023 - read live
        ):
            ids, mask, labels = collate(batch)
            if exits is None:
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            else:
                loss = pabee_loss(exit_logits(model, exits, ids, mask), labels)
            optimizer_step(loss, model, opt, sched, params, epoch + 1, step + 1)
            step += 1
            running += loss.item() * len(batch)
            seen += len(batch)
        entry: dict[str, Any] = {
            "epoch": epoch + 1,
            "step": step,
            "train_loss": round(running / seen, 5),
            "dev_accuracy": round(evaluate(model, dev_ex), 5),
            "elapsed_s": round(time.time() - t0, 1),
        }
        if exits is not None:
            entry["dev_exit_accuracy"] = [round(a, 5) for a in evaluate_exits(model, exits, dev_ex)]
        log.append(entry)
        if progress_enabled():  # progress, like the bars: --quiet leaves stderr to errors
            print(json.dumps(entry), file=sys.stderr)

    check_finite_step(None, model, args.epochs, step)
    model.eval()
    summary = _summary(args, model, exits, overrides, (len(train_ex), len(dev_ex)), log, t0)
    classes = predicted_classes(model, dev_ex)
    if len(classes) == 1 and len(dev_ex) > 1:  # no held-out split here: --dev says it
        from albert_edge.tasks.learned import one_class_note

        (only,) = classes
        labels = getattr(model.config, "id2label", None)
        summary["learned_nothing"] = one_class_note(
            len(dev_ex), only, summary["dev_accuracy"], labels, rows="--dev"
        )
    return model, exits, summary


def evaluate_exits(model: Any, exits: Any, examples: list[tuple[list[int], int]]) -> list[float]:
    """Accuracy of every exit ``1..L`` (eval mode) on ``examples``."""
    import torch

    model.eval()
    correct: list[int] = []
    with torch.no_grad():
        for batch in batches(examples, 128, None, shuffle=False):
            ids, mask, labels = collate(batch)
            hits = [
                int((lg.argmax(-1) == labels).sum()) for lg in exit_logits(model, exits, ids, mask)
            ]
            correct = [a + b for a, b in zip(correct, hits, strict=True)] if correct else hits
    return [c / len(examples) for c in correct]


def _summary(
    args: argparse.Namespace,
    model: Any,
    exits: Any,
    overrides: dict[str, Any],
    sizes: tuple[int, int],
    log: list[dict[str, Any]],
    t0: float,
) -> dict[str, Any]:
    """What ``training.json`` records (beside the files' sha256, added at the write)."""
    summary: dict[str, Any] = {
        "task": "SST-2 (GLUE), binary sentiment",
        "dev_accuracy": log[-1]["dev_accuracy"],
        "dev_examples": sizes[1],
        "train_examples": sizes[0],
        "wall_time_s": round(time.time() - t0, 1),
        "seed": args.seed,
        "threads": args.threads,
        "hyperparameters": {
            k: getattr(args, k)
            for k in ("epochs", "batch_size", "lr", "warmup", "weight_decay", "max_len")
        },
        "config_overrides": overrides,
        "parameters": sum(p.numel() for p in model.parameters()),
        "machine": machine(),
        "command": " ".join(["albert-edge train", *given_args()]),
        "log": log,
    }
    if exits is not None:
        layers = int(model.config.num_hidden_layers)
        summary["exit_loss"] = {
            "kind": "pabee",
            "reference": "Zhou et al. 2020, BERT Loses Patience (PABEE), weighted exit loss",
            "loss": "sum_j j * CE_j / sum_j j over exits after layers 1..L",
            "weights": [round(w, 6) for w in pabee_weights(layers)],
            "file": EXIT_HEADS_FILE,
            "keys": [f"depth{k}.classifier.weight|bias" for k in range(1, layers)],
            "pooler": "shared: the model's own albert.pooler (tanh), as the full-depth head",
            "exit_at_full_depth": "the model's own classifier (in model.safetensors)",
            "parameters": sum(p.numel() for p in exits.parameters()),
            "dev_exit_accuracy": log[-1]["dev_exit_accuracy"],
        }
    return summary


def _write_output(
    tmp: Path, model: Any, summary: dict[str, Any], args: argparse.Namespace, exits: Any = None
) -> None:
    """The checkpoint directory; ``training.json`` last, with the sha256 of every other
    file (what makes it recognisable as ours: :func:`is_training_output`). With
    ``--exit-loss pabee`` the exit classifiers go to their own file beside the model, so
    ``model.safetensors`` stays an ordinary AlbertForSequenceClassification."""
    from albert_edge.data import input_record_of

    reads = input_record_of(args.train)
    write_model_files(tmp, model, exits, Path(args.spiece), True, args.max_len, reads)
    from albert_edge.data import read_sst2
    from albert_edge.tasks.seen import text_digest, write_seen

    # every row of --train is trained on (the epoch is chosen on --dev here)
    rows = read_sst2(args.train, labels=range(2))
    summary["trained_rows"] = write_seen(tmp, (text_digest(t) for _, t in rows))
    summary["sha256"] = own_files(tmp)
    (tmp / TRAINING_RECORD).write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    data = {"train": args.train, "dev": args.dev, "spiece": args.spiece}
    seal(tmp, TRAINED, made_from(data=data, with_checkpoint=False))
