"""Data parallel through torch.distributed: ``torchrun --nproc-per-node N -m albert_edge.train``.

torchrun sets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_*``; :func:`world` starts the
process group from them (gloo on CPU, NCCL on CUDA) and the trainee is wrapped in
``DistributedDataParallel``, which averages gradients across processes.

Why each global batch is sharded instead of a ``DistributedSampler`` over rows: the
sampler would give each process ``batch_size`` rows per step, so N processes train with
an N-times larger batch (and N-times fewer steps) than one process, and the two runs are
not comparable. Here every process builds the same seeded, length-bucketed global batch
and takes rows ``rank::world`` of it (the sampler's strided split, per batch): the same
rows, steps, learning-rate schedule and global batch as one process. The result still
differs in the last bits (why: docs/training.md): the mean over shards is the mean over
the batch up to float summation order, and dropout draws its masks per process.

Only rank 0 writes (the output, the resume state); the others train and leave nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    def shard(self, batch: list[Any]) -> list[Any]:
        """This process's rows of a global batch."""
        return batch[self.rank :: self.size] if self.size > 1 else batch


def world(device: str) -> World:
    """The process group torchrun describes, started; a one-process world otherwise."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return World()
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def wrap(module: Any, w: World, device: str) -> Any:
    """``module`` in DistributedDataParallel when there is more than one process."""
    if w.size <= 1:
        return module
    from torch.nn.parallel import DistributedDataParallel

    ids = [w.local_rank] if device.startswith("cuda") else None
    return DistributedDataParallel(module, device_ids=ids)


def barrier(w: World) -> None:
    if w.size > 1:
        import torch.distributed as dist

        dist.barrier()


def finish(w: World) -> None:
    if w.size > 1:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def resolve_device(name: str) -> str:
    """``auto``: CUDA when present (this process's local GPU), else CPU."""
    import torch

    from albert_edge.learn.errors import LearnError

    if name == "cpu":
        return "cpu"
    has = torch.cuda.is_available()
    if name == "cuda" and not has:
        raise LearnError("--device cuda: no CUDA device is visible to PyTorch; use --device cpu")
    if not has:
        return "cpu"
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return "cuda"
