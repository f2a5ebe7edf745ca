"""Gather a sharded state_dict into a normal one, so `ctrnas export` and `load_state_dict` read it.

DMP's `state_dict()` has the unsharded model's keys, but the tables are `ShardedTensor`s of which each
rank holds only its slices; every rank must take part in the gather (it is a collective), and only the
destination rank receives full tensors.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn


def _is_sharded(t) -> bool:
    from torch.distributed._shard.sharded_tensor import ShardedTensor

    return isinstance(t, ShardedTensor)


def gather_tensor(t, dst: int = 0) -> torch.Tensor | None:
    """One ShardedTensor as a full CPU tensor on rank `dst` (None elsewhere); plain tensors are copied."""
    if not _is_sharded(t):
        return t.detach().cpu().clone()
    from ctrnas.distributed.reduce import comm_device

    rank = dist.get_rank()
    out = torch.empty(t.size(), dtype=t.dtype, device=comm_device()) if rank == dst else None
    t.gather(dst=dst, out=out)
    return out.cpu() if out is not None else None


def gather_state(state: dict, dst: int = 0) -> dict | None:
    """A (possibly nested) state whose leaves may be ShardedTensors -> full tensors on `dst`, None elsewhere."""
    rank = dist.get_rank() if dist.is_initialized() else dst

    def walk(x):
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(walk(v) for v in x)
        if isinstance(x, torch.Tensor) or _is_sharded(x):
            return gather_tensor(x, dst)
        return x

    out = walk(state)
    return out if rank == dst else None


def gather_state_dict(model: nn.Module, dst: int = 0) -> dict[str, torch.Tensor] | None:
    """The full, unsharded state_dict of a DMP model on rank `dst` (None on the other ranks)."""
    return gather_state(dict(model.state_dict()), dst)


def gather_local_shards(state: dict, dst: int = 0) -> dict | None:
    """Like `gather_state`, for states whose keys differ between ranks, such as a fused optimizer's
    (each rank lists only the tables it holds, so a per-key collective gather would pair up different
    tensors and abort). Every rank sends its local shards to `dst` in one object gather; `dst` assembles
    full tensors from the shard offsets. Memory on `dst`: the full state, as for any gathered checkpoint.
    """
    local: dict[tuple, tuple] = {}

    def walk(x, path: tuple) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, path + (k,))
        elif _is_sharded(x):
            local[path] = ("sharded", tuple(x.size()), x.dtype,
                           [(s.metadata.shard_offsets, s.metadata.shard_sizes, s.tensor.detach().cpu())
                            for s in x.local_shards()])
        elif isinstance(x, torch.Tensor):
            local[path] = ("tensor", x.detach().cpu())
        else:
            local[path] = ("value", x)

    walk(state, ())
    rank = dist.get_rank()
    parts = [None] * dist.get_world_size() if rank == dst else None
    dist.gather_object(local, parts, dst=dst)
    if rank != dst:
        return None
    merged: dict[tuple, object] = {}
    for part in parts:
        for path, item in part.items():
            if item[0] == "sharded":
                _, size, dtype, shards = item
                full = merged.setdefault(path, torch.zeros(size, dtype=dtype))
                for offsets, sizes, t in shards:
                    full[tuple(slice(o, o + n) for o, n in zip(offsets, sizes))] = t
            else:
                merged.setdefault(path, item[1])  # replicated values: the first rank's copy
    out: dict = {}
    for path, value in merged.items():
        node = out
        for k in path[:-1]:
            node = node.setdefault(k, {})
        node[path[-1]] = value
    return out
