"""Where jobs run: this process, spawned local processes, or Ray actors, behind one interface.

An executor runs `fn(context, job)` for each job, where `context` is built once per worker from a
`state` shipped once (`setup(state)`, or the state itself): a warmed-up supernet for scoring, the
recipe and data for training. Results come back in job order (`map`, `imap`) or as they finish
(`imap(ordered=False)`), so every backend gives the serial results exactly when each job carries its
own seed. Worker processes ignore Ctrl-C (the parent handles it once), exit when their parent dies, and
a worker that dies is reported with its job and the signal (`ctrnas.errors.WorkerDied`).

This package is core: it imports no model code.

    with make_executor(ExecutionConfig("processes", 2), score_one, state=fitness) as ex:
        results = ex.map(jobs)
"""

from ctrnas.execution.base import Executor, SerialExecutor
from ctrnas.execution.config import BACKENDS, ExecutionConfig
from ctrnas.execution.factory import make_executor

__all__ = ["BACKENDS", "ExecutionConfig", "Executor", "SerialExecutor", "make_executor"]
