"""`make_executor`: the executor a config names. It sits above the backends (base, processes, ray_actors),
which import `base` and not this module, so the package has no import circle."""

from __future__ import annotations

from typing import Any, Callable

from ctrnas.execution.base import Executor, SerialExecutor, describe_job
from ctrnas.execution.config import ExecutionConfig


def make_executor(config: ExecutionConfig | None, fn: Callable[..., Any], state: Any = None, *, stage_workers: int = 1,
                  setup: Callable[..., Any] | None = None, threads: int | None = 1,
                  describe: Callable[[Any], str] = describe_job, name: str = "worker") -> Executor:
    """The executor `config` names for a stage whose own worker count is `stage_workers`.

    `fn` and `setup` must be importable module-level functions (they are sent to spawned workers).
    `threads` is the torch thread count of each worker process (the serial executor keeps the caller's).
    """
    backend, workers = (config or ExecutionConfig()).resolve(stage_workers)
    if backend == "serial":
        return SerialExecutor(fn, state, setup=setup, describe=describe)
    if backend == "processes":
        from ctrnas.execution.processes import ProcessExecutor

        return ProcessExecutor(fn, state, workers=workers, setup=setup, threads=threads, describe=describe,
                               name=name)
    from ctrnas.execution.ray_actors import RayExecutor

    return RayExecutor(fn, state, workers=workers, setup=setup, threads=threads, describe=describe,
                       address=config.address if config is not None else None)
