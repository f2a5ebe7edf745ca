"""Local worker processes (forked from a fork server holding torch), one pipe each, so the parent always
knows which job a worker holds.

Why not `concurrent.futures.ProcessPoolExecutor`: when a worker dies it reports a bare `BrokenProcessPool`
(no job, no signal), and its workers neither ignore Ctrl-C nor notice a SIGKILLed parent. Here:
- each worker gets one job at a time over its own pipe; the parent waits on the pipes and on the
  processes' sentinels, so a death is reported with the job and the signal (`WorkerDied`);
- workers ignore SIGINT (a terminal's Ctrl-C reaches the whole process group; the parent handles it once),
  and a thread in each worker exits it as soon as the parent is gone (SIGKILL of the parent included);
- while workers run, SIGTERM in the parent becomes `Interrupted`, so the stack unwinds and the workers are
  stopped and joined; pipes need no semaphores, so nothing is left for the resource tracker to warn about.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import traceback
from collections import deque
from multiprocessing.connection import Connection, wait
from types import FrameType
from typing import Any, Callable, Iterable, Iterator

from tqdm import tqdm

from ctrnas.errors import CtrnasError, Interrupted, WorkerDied
from ctrnas.execution.base import Executor, build_context, portable_error as _portable


# imported once, in the fork server: a worker forks from it instead of importing them again (~4 CPU-seconds a
# worker for torch, ~1.5 more for torch._dynamo and fbgemm_gpu, ~0.6 for torchrec); where there is no fork server
# (Windows) workers are spawned and import them themselves
PRELOAD = ["torch", "torch._dynamo", "fbgemm_gpu", "torchrec"]


def worker_context(*modules: str) -> Any:
    """The multiprocessing context workers start from: a fork server holding `PRELOAD` and `modules` (those of
    the first workers' job function: the server starts once a process, with the first workers), else spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    # read when the server starts; `__main__` is the caller's script, not a module the server can import
    ctx.set_forkserver_preload(PRELOAD + [m for m in modules if m != "__main__"])
    return ctx


_finished_cpu = 0.0  # CPU seconds of this process's workers that have been stopped


def worker_cpu_seconds() -> float:
    """CPU seconds of every worker this process has stopped: a fork server's children are its own, not ours,
    so `resource.getrusage(RUSAGE_CHILDREN)` does not count them."""
    return _finished_cpu


def _cpu_of(pid: int) -> float:
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
        return float(t.user + t.system)
    except (psutil.Error, OSError):
        return 0.0


def _exit_with_parent() -> None:
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        wait([parent.sentinel])  # readable once the parent process has ended, however it ended
        os._exit(1)

    threading.Thread(target=watch, name="ctrnas-parent-watch", daemon=True).start()


def thread_lock_for_bars() -> None:
    """In a process that does part of a run (a worker, a distributed rank): tqdm's default lock is a
    multiprocessing semaphore, made by the first bar, which a process stopped inside a training leaves to the
    resource tracker ("leaked semaphore objects" at the end of the run). Such a process shares no bar with
    others, so a thread lock is all it needs."""
    tqdm.set_lock(threading.RLock())


def _worker_main(conn: Connection, fn: Callable[[Any, Any], Any], setup: Callable[[Any], Any] | None,
                 threads: int | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited ignored from the start; kept so
    _exit_with_parent()
    thread_lock_for_bars()
    failed: tuple[BaseException, str] | None
    try:
        state = conn.recv()  # sent over this pipe, not with the spawn data: an error here is ours to report
    except BaseException as e:
        parent = multiprocessing.parent_process()
        if parent is None or not parent.is_alive():
            os._exit(1)  # the parent ended while sending it: nothing to report to
        state, failed = None, (_portable(e, traceback.format_exc()), traceback.format_exc())
    else:
        failed = None
    if failed is None:
        try:
            context = build_context(state, setup, threads)
        except Exception as e:
            failed = (_portable(e, traceback.format_exc()), traceback.format_exc())
    del state
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return  # the parent closed the pipe
        if msg is None:
            return
        i, job = msg
        if failed is not None:
            conn.send(("error", i, *failed))
            continue
        try:
            reply = ("ok", i, fn(context, job))
            conn.send(reply)
        except Exception as e:
            tb = traceback.format_exc()
            conn.send(("error", i, _portable(e, tb), tb))


class ProcessExecutor(Executor):
    """`workers` processes (`worker_context`), started on the first job and reused until `close()`."""

    backend = "processes"

    def __init__(self, fn: Callable[[Any, Any], Any], state: Any = None, *, workers: int = 2,
                 setup: Callable[[Any], Any] | None = None, threads: int | None = 1,
                 describe: Callable[[Any], str] | None = None, name: str = "worker") -> None:
        if workers < 1:
            from ctrnas.errors import RecipeError

            raise RecipeError("execution", "workers", f"expected >= 1, got {workers}")
        kwargs = {"describe": describe} if describe is not None else {}
        super().__init__(fn, state, workers=workers, setup=setup, threads=threads, **kwargs)
        self.name = name
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._old_term: Callable[[int, FrameType | None], Any] | int | None = None
        self._ctx_method = "spawn"

    def _start(self) -> None:
        ctx = worker_context(getattr(self.fn, "__module__", "__main__"))
        self._ctx_method = ctx.get_start_method()
        main = threading.current_thread() is threading.main_thread()
        if main:
            self._old_term = signal.signal(signal.SIGTERM, _raise_interrupted)
            # a child starts with SIGINT ignored when its parent ignores it at spawn time (Python keeps an
            # inherited SIG_IGN), so a Ctrl-C during its start-up cannot print a traceback
            old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            for _ in range(self.workers):
                parent_end, child_end = ctx.Pipe()
                p = ctx.Process(target=_worker_main, name=f"ctrnas-{self.name}",
                                args=(child_end, self.fn, self.setup, self.threads))
                p.start()
                child_end.close()
                self._procs.append(p)
                self._conns.append(parent_end)
        finally:
            if main:
                signal.signal(signal.SIGINT, old_int)
        for w, conn in enumerate(self._conns):
            try:
                conn.send(self.state)  # once per worker; large tensors travel as shared memory
            except (BrokenPipeError, ConnectionResetError):
                p = self._procs[w]
                p.join(5)
                raise WorkerDied("its start", p.exitcode, f"{self.name} process {p.pid}") from None

    def imap(self, jobs: Iterable[Any], ordered: bool = True) -> Iterator[tuple[int, Any]]:
        jobs = list(jobs)
        if not jobs:
            return
        pending = deque(enumerate(jobs))
        busy: dict[int, int] = {}  # worker -> job index
        done: dict[int, object] = {}
        next_out = 0
        finished = False
        try:
            if not self._procs:
                self._start()
            while next_out < len(jobs):
                for w in range(len(self._procs)):
                    if w not in busy and pending:
                        i, job = pending.popleft()
                        try:
                            self._conns[w].send((i, job))
                        except (BrokenPipeError, ConnectionResetError):  # it died while idle
                            p = self._procs[w]
                            p.join(5)
                            raise WorkerDied(self.describe(job), p.exitcode, f"{self.name} process {p.pid}") from None
                        busy[w] = i
                self._collect(busy, done, jobs)
                if ordered:
                    while next_out in done:
                        yield next_out, done.pop(next_out)
                        next_out += 1
                else:
                    for i in sorted(done):
                        yield i, done.pop(i)
                        next_out += 1
            finished = True
        finally:
            if not finished:  # an error, an interrupt or a caller that stopped early: drop the queued jobs
                self.close(kill=True)

    def _collect(self, busy: dict[int, int], done: dict[int, Any], jobs: list[Any]) -> None:
        """Wait for at least one busy worker to answer (or die)."""
        by_conn = {self._conns[w]: w for w in busy}
        by_sentinel = {self._procs[w].sentinel: w for w in busy}
        for obj in wait([*by_conn, *by_sentinel]):
            w = by_conn.get(obj, by_sentinel.get(obj))
            if w is None or w not in busy:
                continue
            conn = self._conns[w]
            try:
                # a worker that answered and then ended still left its answer in the pipe
                msg = conn.recv() if obj is conn or conn.poll() else None
            except (EOFError, OSError):
                msg = None
            i = busy.pop(w)
            if msg is None:
                p = self._procs[w]
                p.join(5)
                raise WorkerDied(self.describe(jobs[i]), p.exitcode, f"{self.name} process {p.pid}")
            kind, _, payload, *tb = msg
            if kind == "error":
                if tb and not isinstance(payload, CtrnasError):
                    payload.add_note(f"in {self.name} process {self._procs[w].pid}:\n{tb[0]}")
                raise payload
            done[i] = payload

    def __exit__(self, exc_type: type[BaseException] | None, *exc: Any) -> None:
        # leaving on an error or an interrupt: do not wait for the jobs the workers are still running
        self.close(kill=exc_type is not None)

    def close(self, kill: bool = False) -> None:
        """Stop the workers (at once with `kill`, after their current job otherwise) and join them."""
        global _finished_cpu
        procs, conns, self._procs, self._conns = self._procs, self._conns, [], []
        if self._ctx_method == "forkserver":  # spawned workers are our children: getrusage counts them
            _finished_cpu += sum(_cpu_of(p.pid) for p in procs if p.pid is not None)
        for p, c in zip(procs, conns):
            if kill:
                p.terminate()
            else:
                try:
                    c.send(None)
                except OSError:
                    pass
        for p in procs:
            p.join(None if not kill else 10)
            if p.is_alive():
                p.kill()
                p.join()
        for c in conns:
            c.close()
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
            self._old_term = None


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: further SIGTERMs must not cut the cleanup short
    raise Interrupted(signum)
