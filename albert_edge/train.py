"""Train the embedded default model: a small ALBERT classifier on SST-2, from scratch.

Why a model of our own: no model hub is reachable where albert-edge is built and tested,
and a *trained* model is the only honest way to check that quantization keeps accuracy
(random weights have no accuracy to lose). It is ALBERT in miniature — factorized
embedding (E=64 < H=128), one shared layer group applied L=4 times — so every path that
matters is exercised.

Deterministic given ``--seed`` and the thread count (``--threads``, default 1: on a
shared 2-core machine one thread trains ~5x faster than two that wait on each other): data order
comes from a seeded generator and ``torch.use_deterministic_algorithms`` is on.

    python -m albert_edge.train --train ../shared/data/sst2/train.tsv \\
        --dev ../shared/data/sst2/dev.tsv --spiece ../shared/data/albert/30k-clean.model \\
        --out albert_edge/models/sst2-albert-tiny
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

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


def _batches(
    examples: list[tuple[list[int], int]], batch_size: int, generator: Any, shuffle: bool
) -> list[list[tuple[list[int], int]]]:
    """Length-bucketed batches: sort within shuffled chunks so padding stays small."""
    import torch

    order = (
        torch.randperm(len(examples), generator=generator).tolist()
        if shuffle
        else list(range(len(examples)))
    )
    chunk = batch_size * 50
    batches = []
    for i in range(0, len(order), chunk):
        part = sorted(order[i : i + chunk], key=lambda j: len(examples[j][0]))
        batches += [
            [examples[j] for j in part[k : k + batch_size]] for k in range(0, len(part), batch_size)
        ]
    if shuffle:
        perm = torch.randperm(len(batches), generator=generator).tolist()
        batches = [batches[j] for j in perm]
    return batches


def _collate(batch: list[tuple[list[int], int]]) -> tuple[Any, Any, Any]:
    import torch

    width = max(len(ids) for ids, _ in batch)
    ids = torch.zeros(len(batch), width, dtype=torch.long)
    mask = torch.zeros(len(batch), width, dtype=torch.long)
    for r, (x, _) in enumerate(batch):
        ids[r, : len(x)] = torch.tensor(x)
        mask[r, : len(x)] = 1
    labels = torch.tensor([y for _, y in batch])
    return ids, mask, labels


def evaluate(model: Any, examples: list[tuple[list[int], int]], batch_size: int = 128) -> float:
    import torch

    model.eval()
    correct = 0
    with torch.no_grad():
        for batch in _batches(examples, batch_size, None, shuffle=False):
            ids, mask, labels = _collate(batch)
            logits = model(input_ids=ids, attention_mask=mask).logits
            correct += int((logits.argmax(-1) == labels).sum())
    return correct / len(examples)


def train(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import AlbertConfig, AlbertForSequenceClassification

    from albert_edge.data import read_sst2
    from albert_edge.progress import track
    from albert_edge.tokenizer import AlbertTokenizer

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    t0 = time.time()
    tok = AlbertTokenizer(args.spiece)

    def encode(rows: list[tuple[int, str]]) -> list[tuple[list[int], int]]:
        out = []
        for label, text in track(rows, total=len(rows), description="tokenize"):
            ids = tok.encode(text, max_length=args.max_len, padding="none").input_ids[0]
            out.append((ids, label))
        return out

    train_ex = encode(read_sst2(args.train))
    dev_ex = encode(read_sst2(args.dev))
    overrides = json.loads(args.config) if args.config else {}
    config = AlbertConfig(**{**DEFAULTS, **overrides, "num_labels": 2})
    config.architectures = ["AlbertForSequenceClassification"]
    config.id2label = {0: "negative", 1: "positive"}
    config.label2id = {"negative": 0, "positive": 1}
    model = AlbertForSequenceClassification(config)

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embeddings" not in n]
    no_decay = [
        p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embeddings" not in n)
    ]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.lr,
        betas=(0.9, 0.98),
        eps=1e-6,
    )
    gen = torch.Generator().manual_seed(args.seed)
    steps_per_epoch = math.ceil(len(train_ex) / args.batch_size)
    total = steps_per_epoch * args.epochs
    warmup = int(total * args.warmup)

    def lr_at(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    log: list[dict[str, Any]] = []
    step = 0
    for epoch in range(args.epochs):
        model.train()
        running, seen = 0.0, 0
        batches = list(_batches(train_ex, args.batch_size, gen, shuffle=True))
        for batch in track(batches, total=len(batches), description=f"epoch {epoch + 1}"):
            ids, mask, labels = _collate(batch)
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            running += float(loss) * len(batch)
            seen += len(batch)
        acc = evaluate(model, dev_ex)
        entry = {
            "epoch": epoch + 1,
            "step": step,
            "train_loss": round(running / seen, 5),
            "dev_accuracy": round(acc, 5),
            "elapsed_s": round(time.time() - t0, 1),
        }
        log.append(entry)
        print(json.dumps(entry), file=sys.stderr)

    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.eval()
    model.save_pretrained(str(tmp), safe_serialization=True)
    shutil.copyfile(args.spiece, tmp / "spiece.model")
    (tmp / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "AlbertTokenizer",
                "do_lower_case": True,
                "keep_accents": False,
                "model_max_length": args.max_len,
            },
            indent=2,
        )
        + "\n"
    )
    summary = {
        "task": "SST-2 (GLUE), binary sentiment",
        "dev_accuracy": log[-1]["dev_accuracy"],
        "dev_examples": len(dev_ex),
        "train_examples": len(train_ex),
        "wall_time_s": round(time.time() - t0, 1),
        "seed": args.seed,
        "threads": args.threads,
        "hyperparameters": {
            k: getattr(args, k)
            for k in ("epochs", "batch_size", "lr", "warmup", "weight_decay", "max_len")
        },
        "config_overrides": overrides,
        "parameters": sum(p.numel() for p in model.parameters()),
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "processor": platform.processor() or platform.machine(),
        },
        "command": "python -m albert_edge.train " + " ".join(sys.argv[1:]),
        "log": log,
    }
    (tmp / "training.json").write_text(json.dumps(summary, indent=2) + "\n")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return summary


def main(argv: list[str] | None = None) -> int:
    root = Path(__file__).resolve().parents[1]
    shared = root.parent / "shared" / "data"
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--train", type=Path, default=shared / "sst2" / "train.tsv")
    p.add_argument("--dev", type=Path, default=shared / "sst2" / "dev.tsv")
    p.add_argument("--spiece", type=Path, default=shared / "albert" / "30k-clean.model")
    p.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "models" / "sst2-albert-tiny"
    )
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=float, default=0.06)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--config", default="", help="JSON overrides of the model config")
    summary = train(p.parse_args(argv))
    print(json.dumps({k: summary[k] for k in ("dev_accuracy", "wall_time_s", "parameters")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
