"""Scoring backends by name, for callers that drive a search themselves (`run_search_on`).

All of them are `ctrnas.search.parallel.Scorer`s over one `ctrnas.execution` executor (this process,
local worker processes, or Ray actors); each maps jobs `(arch, seed)` to `(FitnessResult, seconds)` in
job order, so every backend gives the serial search's history exactly. A recipe picks the same
backends with `execution: {backend: ..., workers: ..., address: ...}`.

Ray (`pip install 'ctrnas[ray]'`):
    RayBackend(fitness, address="auto")            # join the cluster this node belongs to (`ray start`)
    RayBackend(fitness, address="ray://head:10001") # Ray Client to a remote head node
    RayBackend(fitness)                             # no address: a private local Ray with `workers` CPUs
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

from ctrnas.errors import RecipeError
from ctrnas.execution import BACKENDS, ExecutionConfig
from ctrnas.search.fitness import FitnessResult
from ctrnas.search.parallel import Scorer, describe_candidate, score_job


class ScoringBackend(Protocol):
    """What the search driver needs: ordered batch scoring and a close(); usable as a context manager."""

    def score(self, jobs: Sequence[tuple[Any, int]]) -> list[tuple[FitnessResult, float]]: ...

    def close(self) -> None: ...

    def __enter__(self) -> "ScoringBackend": ...

    def __exit__(self, *exc) -> None: ...


def _check_workers(name: str, workers: int) -> None:
    if workers < 1:
        raise RecipeError(name, "workers", f"expected >= 1, got {workers}")


class SerialBackend(Scorer):
    """Score in this process, one candidate after another (the reference every backend must equal)."""

    def __init__(self, fitness: Callable):
        super().__init__(fitness, execution=ExecutionConfig("serial"))


class ProcessBackend(Scorer):
    """`workers` spawned local processes, each with `threads_per_worker` threads."""

    def __init__(self, fitness: Callable, workers: int = 2, threads_per_worker: int | None = 1):
        _check_workers("ProcessBackend", workers)
        super().__init__(fitness, workers, threads_per_worker, execution=ExecutionConfig("processes", workers))


class RayBackend(Scorer):
    """`workers` Ray actors, each holding one copy of the fitness (see `ctrnas.execution.ray_actors`)."""

    def __init__(self, fitness: Callable, workers: int = 2, address: str | None = None,
                 threads_per_worker: int | None = 1, cpus_per_worker: float = 1.0, init_kwargs: dict | None = None):
        from ctrnas.execution.ray_actors import RayExecutor

        _check_workers("RayBackend", workers)
        self.fitness, self.workers = fitness, int(workers)
        self.executor = RayExecutor(score_job, fitness, workers=workers, threads=threads_per_worker,
                                    describe=describe_candidate, address=address, cpus_per_worker=cpus_per_worker,
                                    init_kwargs=init_kwargs)


def make_backend(name: str, fitness: Callable, workers: int = 2, address: str | None = None,
                 threads_per_worker: int | None = 1) -> ScoringBackend:
    """A backend by name: 'serial', 'processes' or 'ray' (address only for Ray)."""
    if name == "serial":
        return SerialBackend(fitness)
    if name == "processes":
        return ProcessBackend(fitness, workers, threads_per_worker)
    if name == "ray":
        return RayBackend(fitness, workers, address, threads_per_worker)
    raise RecipeError("search", "backend", f"expected one of {', '.join(BACKENDS)}, got {name!r}")
