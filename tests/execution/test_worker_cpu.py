"""The CPU seconds of forked workers, which `getrusage(RUSAGE_CHILDREN)` does not see, are counted when the
pool stops."""

from __future__ import annotations

import os
import time

from ctrnas.execution import processes
from ctrnas.execution.processes import ProcessExecutor


def _spin(context, seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return seconds


def test_a_stopped_pool_adds_what_its_workers_spent():
    before = processes.worker_cpu_seconds()
    ex = ProcessExecutor(_spin, None, workers=2)
    assert sorted(r for _, r in ex.imap([0.5, 0.5])) == [0.5, 0.5]
    ex.close()
    spent = processes.worker_cpu_seconds() - before
    if ex._ctx_method == "forkserver":
        tick = 1.0 / os.sysconf("SC_CLK_TCK")  # the kernel counts a process's CPU time in clock ticks
        assert spent >= 1.0 - 2 * tick  # each worker spun 0.5 s of its own CPU at least
    else:  # spawned workers are children: getrusage counts them, and they are not counted twice
        assert spent == 0.0
