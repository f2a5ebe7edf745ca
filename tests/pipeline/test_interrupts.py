"""`ctrnas run` with training workers, stopped from outside: no worker outlives the run, a stop signal
gives one line and no worker traceback (real processes, the test recipe)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.procs import as_from_a_terminal, spawned_children, wait_gone

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path("/proc").exists(), reason="reads /proc")]


def _run_until_workers(tests_recipe_path, data_dir, out: Path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "ctrnas", "run", str(tests_recipe_path), "--set", f"data.path={data_dir}",
           "--set", f"output={out}", "--set", "final.workers=2", "--set", "train.progress=false"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=as_from_a_terminal)
    deadline = time.monotonic() + 300
    while len(workers := spawned_children(proc.pid)) < 2:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the final stage's workers did not start"
        time.sleep(0.2)
    time.sleep(1.0)  # let them get into their first training
    return proc, workers


def test_sigkill_of_the_run_leaves_no_worker(tests_data, tests_recipe_path, data_dir, tmp_path):
    proc, workers = _run_until_workers(tests_recipe_path, data_dir, tmp_path / "run")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert wait_gone(workers, 30) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_gives_one_line_and_no_worker_traceback(tests_data, tests_recipe_path, data_dir, tmp_path,
                                                             sig):
    proc, workers = _run_until_workers(tests_recipe_path, data_dir, tmp_path / "run")
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # Ctrl-C reaches the whole process group
    else:
        os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig  # the shell's convention: 130 for Ctrl-C, 143 for SIGTERM
    assert "Traceback" not in err and "leaked" not in err, err
    how = "stopped by SIGTERM" if sig == signal.SIGTERM else "interrupted"
    assert [line for line in err.splitlines() if "re-run" in line] == [
        f"ctrnas run: {how}; re-run the same command to finish"]
    assert wait_gone(workers, 30) == []
