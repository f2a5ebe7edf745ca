"""Ray actors as workers (`pip install 'ctrnas[ray]'`): each actor builds the context once from one
object-store copy of the state; jobs go to idle actors.

    address None      a private local Ray with `workers` CPUs, shut down on close
    address "auto"    the cluster this node belongs to (`ray start`), left running on close
    "ray://head:10001" Ray Client to a remote head node
Every node needs the same ctrnas/torch/torchrec install (or a `runtime_env` in `init_kwargs`).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Iterable, Iterator

from ctrnas.errors import CtrnasError, RecipeError, WorkerDied
from ctrnas.execution.base import Executor, build_context, portable_error


class _Actor:
    """One Ray worker holding the context; wrapped with `ray.remote` lazily (Ray is optional)."""

    def __init__(self, fn: Callable[[Any, Any], Any], state: Any, setup: Callable[[Any], Any] | None,
                 threads: int | None) -> None:
        self.fn = fn
        self.context = build_context(state, setup, threads)

    def run(self, i: int, job: Any) -> tuple[int, bool, Any]:
        # errors come back as values: Ray cannot rebuild errors whose __init__ takes other arguments
        try:
            return i, True, self.fn(self.context, job)
        except Exception as e:
            import traceback

            tb = traceback.format_exc()
            return i, False, (portable_error(e, tb), tb)

    def ready(self) -> bool:
        return True


def import_roots() -> list[str]:
    """The folder that holds the `ctrnas` package, then this process's sys.path entries."""
    import ctrnas

    root = os.path.dirname(os.path.dirname(os.path.abspath(ctrnas.__file__)))
    return [root, *[p for p in sys.path if p and p != root]]


class RayExecutor(Executor):
    """`workers` Ray actors started on the first job and killed on `close()`. If Ray is already
    initialised in this process, that session is used as it is."""

    backend = "ray"

    def __init__(self, fn: Callable[[Any, Any], Any], state: Any = None, *, workers: int = 2,
                 setup: Callable[[Any], Any] | None = None, threads: int | None = 1,
                 describe: Callable[[Any], str] | None = None, address: str | None = None,
                 cpus_per_worker: float = 1.0, init_kwargs: dict[str, Any] | None = None) -> None:
        if workers < 1:
            raise RecipeError("execution", "workers", f"expected >= 1, got {workers}")
        kwargs = {"describe": describe} if describe is not None else {}
        super().__init__(fn, state, workers=workers, setup=setup, threads=threads, **kwargs)
        self.address, self.cpus_per_worker = address, cpus_per_worker
        self.init_kwargs = dict(init_kwargs or {})
        self._owns_ray = False
        self._actors: list[Any] = []

    def _start(self) -> None:
        try:
            import ray
        except ImportError:
            raise RecipeError("execution", "backend", "'ray' needs Ray: pip install 'ctrnas[ray]'") from None
        if not ray.is_initialized():
            if self.address is None:
                kwargs = {"num_cpus": self.workers, "include_dashboard": False, "log_to_driver": False,
                          **self.init_kwargs}
                # local workers must import ctrnas the way this process does (a source checkout on sys.path)
                kwargs.setdefault("runtime_env", {"env_vars": {"PYTHONPATH": os.pathsep.join(import_roots())}})
                ray.init(**kwargs)
            else:
                ray.init(address=self.address, **self.init_kwargs)
            self._owns_ray = True
        actor = ray.remote(num_cpus=self.cpus_per_worker)(_Actor)
        shared = ray.put(self.state)  # one copy in the object store, read by every actor
        self._actors = [actor.remote(self.fn, shared, self.setup, self.threads) for _ in range(self.workers)]
        ray.get([a.ready.remote() for a in self._actors])

    def imap(self, jobs: Iterable[Any], ordered: bool = True) -> Iterator[tuple[int, Any]]:
        jobs = list(jobs)
        if not jobs:
            return
        if not self._actors:
            self._start()
        import ray
        from ray.util import ActorPool

        pool = ActorPool(self._actors)
        for i, job in enumerate(jobs):
            pool.submit(lambda a, v: a.run.remote(*v), (i, job))
        finished = False
        try:
            # results of the pool come in submission order (ordered) or as they finish; each is (i, result)
            for n in range(len(jobs)):
                try:
                    i, ok, out = pool.get_next() if ordered else pool.get_next_unordered()
                except ray.exceptions.RayActorError as e:
                    job = self.describe(jobs[n]) if ordered else "a job"
                    raise WorkerDied(job, None, "a Ray actor", how=str(e).splitlines()[0] if str(e) else
                                     type(e).__name__) from None
                if not ok:
                    error, tb = out
                    if not isinstance(error, CtrnasError):
                        error.add_note(f"in a Ray actor:\n{tb}")
                    raise error
                yield i, out
            finished = True
        finally:
            if not finished:
                self.close()

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
