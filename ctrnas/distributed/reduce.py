"""Collectives the distributed trainer needs: summed dense gradients, reduced scalars, gathered rows.

Every function is a no-op pass-through when no process group is running, so the same code serves one
process and N ranks.
"""

from __future__ import annotations

from typing import Iterable

import torch
import torch.distributed as dist


def _active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def comm_device() -> torch.device:
    """Where tensors handed to collectives must live: the current GPU under nccl, else the CPU."""
    if _active() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def allreduce_dense_grads(params: Iterable[torch.Tensor], divide_by: float = 1.0) -> None:
    """Sum the gradients of replicated (non-sharded) parameters over ranks (in one flat buffer), then divide.

    The trainer scales each rank's loss so that sum / divide_by is the gradient of the global mean loss,
    the same gradient the sharded tables receive (see `trainer`). A parameter without a gradient on this
    rank contributes zeros, so every rank sends the same layout.
    """
    params = list(params)
    if not _active() or not params:
        return
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    if divide_by != 1.0:
        flat /= divide_by
    offset = 0
    for p in params:
        n = p.numel()
        g = flat[offset:offset + n].view_as(p)
        if p.grad is None:
            p.grad = g.clone()
        else:
            p.grad.copy_(g)
        offset += n


def sum_scalars(*values: float) -> list[float]:
    """Element-wise sum over ranks of a few numbers (float64, so row counts stay exact)."""
    t = torch.tensor(values, dtype=torch.float64, device=comm_device())
    if _active():
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.cpu().tolist()


def gather_rows(t: torch.Tensor) -> torch.Tensor:
    """Concatenate every rank's `t` (first dimensions may differ) in rank order; the same on every rank."""
    if not _active():
        return t
    world = dist.get_world_size()
    t = t.to(comm_device())
    n = torch.tensor([t.shape[0]], dtype=torch.int64, device=t.device)
    sizes = [torch.zeros_like(n) for _ in range(world)]
    dist.all_gather(sizes, n)
    sizes = [int(s) for s in sizes]
    biggest = max(sizes)
    padded = torch.zeros((biggest, *t.shape[1:]), dtype=t.dtype, device=t.device)
    padded[: t.shape[0]] = t
    parts = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded.contiguous())
    return torch.cat([p[:s] for p, s in zip(parts, sizes)])


def barrier() -> None:
    if _active():
        dist.barrier()
