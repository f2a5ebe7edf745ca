"""Where candidates are scored during a search: this process, local worker processes, or a Ray cluster.

Every backend maps jobs `(arch, seed)` to `(FitnessResult, seconds)` *in job order*, and each job carries
its own seed (`search.fitness.candidate_seed`), so all backends give the serial search's history exactly.
The fitness (which for CTR holds a warmed-up supernet and fixed batches) is shipped once per worker, not
once per job: a pool initializer for processes, one object-store copy shared by long-lived actors for Ray.

Ray (`pip install 'ctrnas[ray]'`):
    RayBackend(fitness, address="auto")            # join the cluster this node belongs to (`ray start`)
    RayBackend(fitness, address="ray://head:10001") # Ray Client to a remote head node
    RayBackend(fitness)                             # no address: a private local Ray with `workers` CPUs
Every node needs the same ctrnas/torch/torchrec install (or pass `runtime_env=` via `init_kwargs`).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Protocol, Sequence

from ctrnas.errors import RecipeError
from ctrnas.search.fitness import FitnessResult
from ctrnas.search.parallel import Scorer, _timed_call

BACKENDS = ("serial", "processes", "ray")


class ScoringBackend(Protocol):
    """What the search driver needs: ordered batch scoring and a close(); usable as a context manager."""

    def score(self, jobs: Sequence[tuple[Any, int]]) -> list[tuple[FitnessResult, float]]: ...

    def close(self) -> None: ...

    def __enter__(self) -> "ScoringBackend": ...

    def __exit__(self, *exc) -> None: ...


class SerialBackend(Scorer):
    """Score in this process, one candidate after another (the reference every backend must equal)."""

    def __init__(self, fitness: Callable):
        super().__init__(fitness, workers=1)


class ProcessBackend(Scorer):
    """`workers` spawned local processes (`ctrnas.search.parallel`), each with `threads_per_worker` threads."""

    def __init__(self, fitness: Callable, workers: int = 2, threads_per_worker: int | None = 1):
        if workers < 1:
            raise RecipeError("ProcessBackend", "workers", f"expected >= 1, got {workers}")
        super().__init__(fitness, workers=workers, threads_per_worker=threads_per_worker)


class _FitnessActor:
    """One Ray worker holding the fitness; the class is wrapped with `ray.remote` lazily (Ray is optional)."""

    def __init__(self, fitness: Callable, threads: int | None):
        if threads is not None:
            import torch

            torch.set_num_threads(threads)  # N actors with torch's default thread count oversubscribe a node
        self.fitness = fitness

    def score(self, arch: Any, seed: int) -> tuple[FitnessResult, float]:
        return _timed_call(self.fitness, arch, seed)

    def ready(self) -> bool:
        return True


class RayBackend:
    """`workers` Ray actors, each holding one copy of the fitness; jobs go to idle actors, results come
    back in job order. Actors start on the first `score()` and live until `close()`.

    address: None starts a private local Ray (num_cpus = workers) and shuts it down on close; "auto" or
    "ray://host:port" joins an existing cluster (left running on close). If Ray is already initialised in
    this process, that session is used as it is.
    """

    def __init__(self, fitness: Callable, workers: int = 2, address: str | None = None,
                 threads_per_worker: int | None = 1, cpus_per_worker: float = 1.0, init_kwargs: dict | None = None):
        if workers < 1:
            raise RecipeError("RayBackend", "workers", f"expected >= 1, got {workers}")
        self.fitness, self.workers, self.address = fitness, int(workers), address
        self.threads, self.cpus_per_worker = threads_per_worker, cpus_per_worker
        self.init_kwargs = dict(init_kwargs or {})
        self._owns_ray = False
        self._actors: list = []

    def _start(self) -> None:
        try:
            import ray
        except ImportError:
            raise RecipeError("search", "backend", "'ray' needs Ray: pip install 'ctrnas[ray]'") from None
        if not ray.is_initialized():
            if self.address is None:
                kwargs = {"num_cpus": self.workers, "include_dashboard": False, "log_to_driver": False,
                          **self.init_kwargs}
                # Local workers must import ctrnas the way this process does (a source checkout on sys.path).
                kwargs.setdefault("runtime_env", {"env_vars": {"PYTHONPATH": os.pathsep.join(_import_roots())}})
                ray.init(**kwargs)
            else:
                ray.init(address=self.address, **self.init_kwargs)
            self._owns_ray = True
        actor = ray.remote(num_cpus=self.cpus_per_worker)(_FitnessActor)
        shared = ray.put(self.fitness)  # one copy in the object store, read by every actor
        self._actors = [actor.remote(shared, self.threads) for _ in range(self.workers)]
        ray.get([a.ready.remote() for a in self._actors])

    def score(self, jobs: Sequence[tuple[Any, int]]) -> list[tuple[FitnessResult, float]]:
        if not jobs:
            return []
        if not self._actors:
            self._start()
        from ray.util import ActorPool

        # ActorPool.map hands each job to the next idle actor and yields results in submission order.
        pool = ActorPool(self._actors)
        return list(pool.map(lambda a, job: a.score.remote(*job), list(jobs)))

    def close(self) -> None:
        if self._actors:
            import ray

            for a in self._actors:
                ray.kill(a)
            self._actors = []
        if self._owns_ray:
            import ray

            ray.shutdown()
            self._owns_ray = False

    def __enter__(self) -> "RayBackend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _import_roots() -> list[str]:
    """The folder that holds the `ctrnas` package, then this process's sys.path entries."""
    import sys

    import ctrnas

    root = os.path.dirname(os.path.dirname(os.path.abspath(ctrnas.__file__)))
    return [root, *[p for p in sys.path if p and p != root]]


def make_backend(name: str, fitness: Callable, workers: int = 2, address: str | None = None,
                 threads_per_worker: int | None = 1) -> ScoringBackend:
    """A backend by recipe name: 'serial', 'processes' or 'ray' (address only for Ray)."""
    if name == "serial":
        return SerialBackend(fitness)
    if name == "processes":
        return ProcessBackend(fitness, workers, threads_per_worker)
    if name == "ray":
        return RayBackend(fitness, workers, address, threads_per_worker)
    raise RecipeError("search", "backend", f"expected one of {', '.join(BACKENDS)}, got {name!r}")
