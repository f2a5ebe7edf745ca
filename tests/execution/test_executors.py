"""Serial, processes and Ray give the same results; a dead worker is named with its job and signal;
workers end with their parent and a stop signal is handled once (real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctrnas.errors import RecipeError, WorkerDied
from ctrnas.execution import ExecutionConfig, SerialExecutor, make_executor
from ctrnas.execution.processes import ProcessExecutor
from tests.helpers import jobs
from tests.helpers.procs import as_from_a_terminal, wait_gone

JOBS = [(v, 1000 + 7 * v) for v in range(9)]
ROOT = Path(__file__).resolve().parents[2]


def _expected():
    return [jobs.seeded_draw(0.5, j) for j in JOBS]


def test_config_resolves_the_stage_workers_unless_it_names_its_own():
    assert ExecutionConfig().resolve(1) == ("serial", 1)
    assert ExecutionConfig().resolve(3) == ("processes", 3)
    assert ExecutionConfig("serial", 4).resolve(3) == ("serial", 1)
    assert ExecutionConfig("ray", address="auto").resolve(2) == ("ray", 2)
    assert ExecutionConfig(workers=2).resolve(5) == ("processes", 2)
    with pytest.raises(RecipeError, match="execution.backend"):
        ExecutionConfig("mpi")
    with pytest.raises(RecipeError, match="execution.address"):
        ExecutionConfig("processes", address="auto")


def test_serial_and_processes_give_the_same_results_in_job_order():
    with SerialExecutor(jobs.seeded_draw, 0.5) as ex:
        serial = ex.map(JOBS)
    assert serial == _expected()
    with make_executor(ExecutionConfig("processes", 2), jobs.seeded_draw, 0.5) as ex:
        assert ex.map(JOBS) == serial
        unordered = list(ex.imap(JOBS, ordered=False))  # the same pool serves a second batch
    assert sorted(unordered) == list(enumerate(serial))


def test_setup_builds_the_context_once_per_worker():
    with make_executor(ExecutionConfig("processes", 2), jobs.seeded_draw, {"base": 1.0},
                       setup=jobs.add_setup) as ex:
        assert ex.map(JOBS) == [jobs.seeded_draw(2.0, j) for j in JOBS]


@pytest.mark.parametrize("backend", ["serial", "processes"])
def test_a_job_error_reaches_the_caller_as_itself(backend):
    with make_executor(ExecutionConfig(backend, 2), jobs.fail_on, 3) as ex:
        with pytest.raises(RecipeError, match="job 3 refused"):  # as itself, file and key kept
            ex.map(range(6))
        with pytest.raises(ValueError, match="plain failure in job -3"):
            ex.map([1, -3, 2])
        assert ex.map([1, 2]) == [1, 2]  # usable after a failure


def test_a_worker_killed_by_a_signal_is_reported_with_its_job_and_the_signal():
    with ProcessExecutor(jobs.kill_self_on, 4, workers=2, describe=lambda j: f"arch #{j}") as ex:
        with pytest.raises(WorkerDied) as err:
            ex.map(range(8))
    text = str(err.value)
    assert "arch #4" in text and "SIGKILL" in text and "signal 9" in text
    assert "\n" not in text


def test_a_failure_stops_the_queued_jobs(tmp_path):
    with ProcessExecutor(jobs.note_pid_and_sleep, str(tmp_path), workers=1) as ex:
        it = ex.imap([0.2] * 10)
        next(it)
        it.close()  # the caller stops early: the worker is stopped, queued jobs never run
    assert len(list(tmp_path.iterdir())) <= 2


def test_an_error_in_the_block_does_not_wait_for_running_jobs(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="caller failed"):
        with ProcessExecutor(jobs.note_pid_and_sleep, str(tmp_path), workers=2) as ex:
            it = ex.imap([0.1, 600.0, 600.0], ordered=False)
            assert next(it)[0] == 0
            raise RuntimeError("caller failed")
    assert time.monotonic() - t0 < 60  # not the 600 s the other jobs would take
    assert wait_gone([int(p.name) for p in tmp_path.iterdir()]) == []


@pytest.mark.slow
def test_ray_gives_the_serial_results():
    pytest.importorskip("ray")
    import ray

    # one private Ray for the results and both failures (each start costs seconds)
    with make_executor(ExecutionConfig("ray", 2), jobs.draw_fail_or_kill, (0.5, 5, 2),
                       describe=lambda j: f"arch #{j}") as ex:
        assert ex.map(JOBS) == _expected()
        assert sorted(ex.imap(JOBS, ordered=False)) == list(enumerate(_expected()))
        with pytest.raises(RecipeError, match="job 5 refused"):  # a job's error
            ex.map([1, 5])
        with pytest.raises(WorkerDied, match="a Ray actor died while running arch #2"):  # a killed actor
            ex.map([1, 2, 3])
    assert not ray.is_initialized()  # a private local Ray is shut down on close


def _start_driver(folder: Path, workers: int = 2) -> tuple[subprocess.Popen, list[int]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.jobs", str(folder), str(workers)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=as_from_a_terminal)
    deadline = time.monotonic() + 120
    while len(list(folder.iterdir())) < workers:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "workers did not start"
        time.sleep(0.1)
    return proc, [int(p.name) for p in folder.iterdir()]


@pytest.mark.skipif(not Path("/proc").exists(), reason="reads process states from /proc")
def test_workers_exit_when_their_parent_is_sigkilled(tmp_path):
    proc, pids = _start_driver(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wait_gone(pids) == []


@pytest.mark.skipif(not Path("/proc").exists(), reason="reads process states from /proc")
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, 128 + signal.SIGINT)])
def test_a_stop_signal_is_handled_once_in_the_parent(tmp_path, sig, code):
    proc, pids = _start_driver(tmp_path)
    # SIGINT to the whole group, as a terminal's Ctrl-C does; SIGTERM to the parent, as `kill` does
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("driver: interrupted"), err
    assert "Traceback" not in err and "leaked" not in err
    assert wait_gone(pids) == []
