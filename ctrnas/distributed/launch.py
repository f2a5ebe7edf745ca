"""Start N local ranks without torchrun (tests, benchmarks, single-machine runs): torch.multiprocessing ranks
forked from the fork server that holds torch (`ctrnas.execution.processes.worker_context`), plus a gloo/nccl
process group on a free loopback port."""

from __future__ import annotations

import os
import socket
from typing import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank: int, world_size: int, port: int, backend: str | None, threads: int | None,
           fn: Callable, args: tuple) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank))
    if threads is not None:
        torch.set_num_threads(threads)  # N ranks on one box: torch's default thread count oversubscribes
    from ctrnas.execution.processes import thread_lock_for_bars

    thread_lock_for_bars()
    from ctrnas.distributed.dmp import init_distributed

    env = init_distributed(backend, timeout_s=120.0)
    try:
        fn(env, *args)
    finally:
        dist.destroy_process_group()


def spawn(fn: Callable, world_size: int = 2, *args, backend: str | None = None, threads: int | None = 1) -> None:
    """Run `fn(env, *args)` on `world_size` spawned ranks and wait; `fn` must be importable by module path.

    A rank that raises makes this raise (torch's ProcessRaisedException carries its traceback).
    """
    from ctrnas.execution.processes import worker_context

    # the ranks fork from the fork server that already holds torch, as the training workers do
    mp.start_processes(_entry, args=(world_size, free_port(), backend, threads, fn, args), nprocs=world_size,
                       join=True, start_method=worker_context().get_start_method())
