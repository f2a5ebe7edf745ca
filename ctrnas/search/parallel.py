"""Score candidates on an executor (`ctrnas.execution`: serial, processes or Ray) with identical results.

Identity with serial scoring rests on two things: each job carries its own seed (see `ctrnas.seeds`),
and results are collected in job order, never in completion order. The fitness is the executor's
state, shipped once per worker rather than once per job, because a CTR fitness holds a warmed-up
supernet and a fixed set of batches.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from ctrnas.execution import ExecutionConfig, make_executor
from ctrnas.search.fitness import FitnessResult, call_fitness

Job = tuple[Any, ...]  # (arch, seed) or (arch, seed, budget)


def timed_call(fitness: Callable[..., Any], arch: Any, seed: int,
               budget: int | None = None) -> tuple[FitnessResult, float]:
    start = time.perf_counter()
    result = call_fitness(fitness, arch, seed, budget)
    return result, time.perf_counter() - start


def score_job(fitness: Callable[..., Any], job: Job) -> tuple[FitnessResult, float]:
    """One scoring job on an executor whose context is the fitness."""
    return timed_call(fitness, *job)


def _setup(state: tuple[Any, ...]) -> Callable[..., Any]:
    fitness: Callable[..., Any]
    fitness, user_init, user_args = state
    if user_init is not None:
        user_init(*user_args)
    return fitness


def describe_candidate(job: Job) -> str:
    arch = job[0]
    key = arch.key() if callable(getattr(arch, "key", None)) else repr(arch)
    if len(key) > 100:
        key = key[:97] + "..."
    return f"the scoring of candidate {key} (seed {job[1]})"


class Scorer:
    """Maps jobs `(arch, seed[, budget])` to `(FitnessResult, seconds)` in order; a context manager.

    `execution` picks the backend (None: serial when workers <= 1, else `workers` spawned processes,
    started on the first call and reused for the whole search, since spawn costs seconds per worker).
    """

    def __init__(
        self,
        fitness: Callable[..., Any],
        workers: int = 1,
        threads_per_worker: int | None = 1,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple[Any, ...] = (),
        execution: ExecutionConfig | None = None,
    ):
        self.fitness = fitness
        self.executor = make_executor(execution, score_job, (fitness, initializer, initargs), stage_workers=workers,
                                      setup=_setup, threads=threads_per_worker, describe=describe_candidate,
                                      name="scoring worker")
        self.workers = self.executor.workers

    def score(self, jobs: Sequence[Job], costs: Sequence[float] | None = None) -> list[tuple[FitnessResult, float]]:
        """`(result, seconds)` per job, in job order; with `costs`, handed out costliest first."""
        return self.executor.map(jobs, costs) if jobs else []

    def close(self) -> None:
        self.executor.close()

    def __enter__(self) -> "Scorer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.executor.__exit__(*exc)  # on an error: stop the workers without waiting for their jobs
