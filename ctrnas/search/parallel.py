"""Score candidates serially or in spawned worker processes, with identical results either way.

Identity with serial scoring rests on two things: each job carries its own seed (see
`fitness.candidate_seed`), and results are collected in job order, never in completion order.
The fitness is pickled once per worker (pool initializer) rather than once per job, because a CTR
fitness holds a warmed-up supernet and a fixed set of batches.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Sequence

from ctrnas.search.fitness import FitnessResult, call_fitness

# The one fitness a worker process serves; set by the pool initializer, never in the parent.
_WORKER_FITNESS: Callable | None = None


def _init_worker(fitness: Callable, threads: int | None, user_init: Callable | None, user_args: tuple) -> None:
    global _WORKER_FITNESS
    _WORKER_FITNESS = fitness
    # N workers with torch's default thread count each would oversubscribe the cores.
    if threads is not None and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    if user_init is not None:
        user_init(*user_args)


def _timed_call(fitness: Callable, arch: Any, seed: int) -> tuple[FitnessResult, float]:
    start = time.perf_counter()
    result = call_fitness(fitness, arch, seed)
    return result, time.perf_counter() - start


def _score_in_worker(job: tuple[Any, int]) -> tuple[FitnessResult, float]:
    arch, seed = job
    return _timed_call(_WORKER_FITNESS, arch, seed)


class Scorer:
    """Maps jobs `(arch, seed)` to `(FitnessResult, seconds)` in order; use as a context manager.

    workers <= 1 scores in this process; otherwise a spawn-context process pool is started lazily
    on the first call and reused for the whole search (spawn costs seconds per worker).
    """

    def __init__(
        self,
        fitness: Callable,
        workers: int = 1,
        threads_per_worker: int | None = 1,
        initializer: Callable | None = None,
        initargs: tuple = (),
    ):
        self.fitness = fitness
        self.workers = int(workers)
        self.threads_per_worker = threads_per_worker
        self._initializer, self._initargs = initializer, initargs
        self._pool: ProcessPoolExecutor | None = None

    def score(self, jobs: Sequence[tuple[Any, int]]) -> list[tuple[FitnessResult, float]]:
        if not jobs:
            return []
        if self.workers <= 1:
            return [_timed_call(self.fitness, arch, seed) for arch, seed in jobs]
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(self.fitness, self.threads_per_worker, self._initializer, self._initargs),
            )
        return list(self._pool.map(_score_in_worker, jobs))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> "Scorer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
