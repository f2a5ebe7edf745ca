"""Job functions for executor tests; module-level so spawned workers and Ray actors can import them."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

from ctrnas.errors import CtrnasError, RecipeError


def seeded_draw(offset: float, job: tuple[int, int]) -> float:
    """A result that depends on the job's own seed only: equal across backends iff seeds travel with jobs."""
    value, seed = job
    return offset + value + float(np.random.default_rng(seed).normal())


def add_setup(state: dict) -> float:
    return state["base"] * 2


def fail_on(bad: int, job: int) -> int:
    if job == bad:
        raise RecipeError("recipe.yaml", "search.workers", f"job {job} refused")
    if job == -bad:
        raise ValueError(f"plain failure in job {job}")
    return job


def kill_self_on(bad: int, job: int) -> int:
    if job == bad:
        os.kill(os.getpid(), signal.SIGKILL)
    return job


def fail_or_kill_self_on(bad: tuple[int, int], job: int) -> int:
    """`fail_on(bad[0], job)`, then `kill_self_on(bad[1], job)`: both failures from one executor."""
    return kill_self_on(bad[1], fail_on(bad[0], job))


def draw_fail_or_kill(state: tuple[float, int, int], job: tuple[int, int] | int) -> float | int:
    """A pair job is `seeded_draw(state[0], job)`, a number `fail_or_kill_self_on(state[1:], job)`: results and
    both failures from one executor (a private Ray costs seconds to start)."""
    if isinstance(job, int):
        return fail_or_kill_self_on(state[1:], job)
    return seeded_draw(state[0], job)


def note_pid_and_sleep(folder: str, seconds: float) -> int:
    """Opens a progress bar, as a training does (tqdm makes its lock with the first one), notes the pid, sleeps."""
    from tqdm import tqdm

    with tqdm(total=1, disable=True):
        Path(folder, str(os.getpid())).write_text("")
        time.sleep(seconds)
    return os.getpid()


def main(folder: str, workers: int) -> int:
    """A parent in the way the CLI runs one: workers sleep; a stop signal prints one line and exits."""
    from ctrnas.execution.processes import ProcessExecutor

    try:
        with ProcessExecutor(note_pid_and_sleep, folder, workers=workers) as ex:
            ex.map([600.0] * workers)
    except KeyboardInterrupt as e:
        print(f"driver: interrupted ({e})", file=sys.stderr)
        return 128 + getattr(e, "signum", signal.SIGINT)
    except CtrnasError as e:
        print(f"driver: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], int(sys.argv[2])))
