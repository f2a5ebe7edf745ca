"""The executor interface and the serial executor (the reference every backend must equal); the factory is
`ctrnas.execution.factory`."""

from __future__ import annotations

import copy
import math
import pickle
import sys
from typing import Any, Callable, Iterable, Iterator, Sequence

from ctrnas.errors import CtrnasError


def describe_job(job: Any, limit: int = 120) -> str:
    """A short name of a job for error messages: its repr, cut."""
    text = repr(job)
    return "job " + (text if len(text) <= limit else text[: limit - 3] + "...")


def set_threads(threads: int | None) -> None:
    """Torch intra-op threads of a worker: N workers with torch's default (one per core) oversubscribe."""
    if threads is not None and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def build_context(state: Any, setup: Callable[..., Any] | None, threads: int | None) -> Any:
    set_threads(threads)
    context = setup(state) if setup is not None else state
    set_threads(threads)  # the setup may have imported torch
    return context


def portable_error(exc: BaseException, tb: str) -> BaseException:
    """`exc` if it survives a pickle round trip to the parent (errors with custom __init__ arguments may
    not), else an error of the nearest kind (ctrnas or not) with the same message."""
    try:
        pickle.dumps(exc)  # it can be sent,
        copy.copy(exc)  # and rebuilt from its reduce tuple (cls(*args), then its state), as unpickling would
        return exc
    except Exception:
        if isinstance(exc, CtrnasError):
            return CtrnasError(str(exc))
        return RuntimeError(f"{type(exc).__name__}: {exc}\n{tb}")


class Executor:
    """Runs `fn(context, job)` over jobs; subclasses implement `imap`. Use as a context manager."""

    backend = "?"

    def __init__(self, fn: Callable[[Any, Any], Any], state: Any = None, *, workers: int = 1,
                 setup: Callable[[Any], Any] | None = None, threads: int | None = 1,
                 describe: Callable[[Any], str] = describe_job):
        self.fn, self.state, self.setup = fn, state, setup
        self.workers, self.threads, self.describe = int(workers), threads, describe

    def imap(self, jobs: Iterable[Any], ordered: bool = True) -> Iterator[tuple[int, Any]]:
        """(job index, result) pairs: in job order, or as jobs finish with `ordered=False`."""
        raise NotImplementedError

    def map(self, jobs: Iterable[Any], costs: Sequence[float] | None = None) -> list[Any]:
        """The results in job order; with `costs`, the jobs are handed out costliest first
        (`imap_costliest_first`)."""
        pairs = self.imap(jobs) if costs is None else self.imap_costliest_first(list(jobs), costs)
        return [r for _, r in pairs]

    def imap_costliest_first(self, jobs: Sequence[Any], costs: Sequence[float],
                             ordered: bool = True) -> Iterator[tuple[int, Any]]:
        """(job index, result) pairs in job order, the jobs handed to the workers by decreasing `costs` (ties
        in job order, NaN costs last). Handed out in job order, a long job that comes last runs alone while
        the other workers idle; longest first bounds that tail by the shortest jobs. The results are the
        job-order ones, since each job carries its own seed; finished ones wait for the earlier jobs, or with
        `ordered=False` come as they finish."""
        if len(costs) != len(jobs):
            raise ValueError(f"{len(costs)} costs for {len(jobs)} jobs")
        order = sorted(range(len(jobs)), key=lambda i: (-costs[i] if costs[i] == costs[i] else math.inf, i))
        inner = self.imap([jobs[i] for i in order], ordered=False)
        done: dict[int, Any] = {}
        next_out = 0
        try:
            for j, result in inner:
                if not ordered:
                    yield order[j], result
                    continue
                done[order[j]] = result
                while next_out in done:
                    yield next_out, done.pop(next_out)
                    next_out += 1
        finally:  # a caller that stops early stops the jobs still queued, as `imap` does (a generator's close)
            close = getattr(inner, "close", None)
            if close is not None:
                close()

    def close(self) -> None:
        pass

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class SerialExecutor(Executor):
    """Every job in this process, one after another; the context is built on the first job."""

    backend = "serial"

    def __init__(self, fn: Callable[[Any, Any], Any], state: Any = None, *, setup: Callable[[Any], Any] | None = None,
                 threads: int | None = None, describe: Callable[[Any], str] = describe_job, workers: int = 1):
        # threads None: this process keeps the thread count its caller chose
        super().__init__(fn, state, workers=1, setup=setup, threads=threads, describe=describe)
        self._context, self._ready = None, False

    def imap(self, jobs: Iterable[Any], ordered: bool = True) -> Iterator[tuple[int, Any]]:
        for i, job in enumerate(list(jobs)):
            if not self._ready:
                self._context, self._ready = build_context(self.state, self.setup, self.threads), True
            yield i, self.fn(self._context, job)
