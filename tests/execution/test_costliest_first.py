"""Jobs handed out costliest first come back in job order with the job-order results."""

from __future__ import annotations

import math

import pytest

from ctrnas.execution import ExecutionConfig, SerialExecutor, make_executor
from tests.helpers import timed_jobs


def test_serial_runs_costliest_first_and_returns_in_job_order():
    seen: list[int] = []
    costs = [1.0, 5.0, math.nan, 5.0, 3.0, 0.0]
    with SerialExecutor(timed_jobs.record_order, seen) as ex:
        pairs = list(ex.imap_costliest_first(list(range(6)), costs))
    assert seen == [1, 3, 4, 0, 5, 2]  # by decreasing cost, ties in job order, the NaN last
    assert pairs == [(i, 10 * i) for i in range(6)]


def test_unordered_results_come_as_they_finish_with_their_job_index():
    seen: list[int] = []
    costs = [1.0, 5.0, math.nan, 5.0, 3.0, 0.0]
    with SerialExecutor(timed_jobs.record_order, seen) as ex:
        pairs = list(ex.imap_costliest_first(list(range(6)), costs, ordered=False))
    assert [i for i, _ in pairs] == seen == [1, 3, 4, 0, 5, 2]  # one at a time: each as it finishes
    assert sorted(pairs) == [(i, 10 * i) for i in range(6)]


def test_map_with_costs_equals_map_without():
    with SerialExecutor(timed_jobs.record_order, []) as ex:
        assert ex.map(range(5), [0.0, 4.0, 1.0, 3.0, 2.0]) == ex.map(range(5)) == [0, 10, 20, 30, 40]


def test_costs_must_match_the_jobs():
    with SerialExecutor(timed_jobs.record_order, []) as ex:
        with pytest.raises(ValueError, match="2 costs for 3 jobs"):
            list(ex.imap_costliest_first([0, 1, 2], [1.0, 2.0]))


def test_two_workers_start_the_two_costliest_and_finish_sooner():
    # job order puts the long job last: handed out in job order it would run alone at the end (0.1 + 0.1 +
    # 0.8 s on one worker); costliest first it runs beside the short ones (0.8 s in all)
    jobs = [(0, 0.1), (1, 0.1), (2, 0.1), (3, 0.8)]
    costs = [s for _, s in jobs]
    with make_executor(ExecutionConfig("processes", 2), timed_jobs.started_at) as ex:
        ex.map([(9, 0.0), (9, 0.0)])  # both workers up before the clock matters
        out = ex.map(jobs, costs)
    assert [v for _, v in out] == [0, 10, 20, 30]  # job order
    starts = [t for t, _ in out]
    first_two = sorted(range(4), key=lambda i: starts[i])[:2]
    assert 3 in first_two  # the long job was among the first handed out
    assert starts[3] < max(starts[:3])  # and not started after all the short ones


def test_a_caller_that_stops_early_stops_the_workers():
    # the instant job is handed out first and comes back while the other worker is inside a 5 s job
    ex = make_executor(ExecutionConfig("processes", 2), timed_jobs.started_at)
    pairs = ex.imap_costliest_first([(0, 0.0), (1, 5.0), (2, 5.0), (3, 5.0)], [1.0, 0.0, 0.0, 0.0])
    procs = None
    for _ in pairs:
        procs = list(ex._procs)
        break
    pairs.close()  # the queued and running jobs are dropped: the workers are gone, not left running
    assert procs and not ex._procs and not any(p.is_alive() for p in procs)
