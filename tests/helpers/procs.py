"""Process helpers for tests that start and signal real processes (Linux: reads /proc)."""

from __future__ import annotations

import signal
import time
from pathlib import Path


def as_from_a_terminal() -> None:
    """`preexec_fn` for a child that must take Ctrl-C as a terminal's process does: a shell that starts a
    job in the background (`make test &`) leaves SIGINT ignored, the child inherits that, and Python only
    turns SIGINT into KeyboardInterrupt when it was not ignored at start."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def alive(pid: int) -> bool:
    """Running, sleeping or stopped; a zombie (exited, not yet reaped) counts as gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def wait_gone(pids: list[int], seconds: float = 20.0) -> list[int]:
    """The pids still alive after waiting up to `seconds` for all of them to end."""
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def spawned_children(pid: int) -> list[int]:
    """The multiprocessing workers of `pid`: its spawned children (spawn_main), and the children of its fork
    server (`ctrnas.execution.processes.worker_context`), which forks them for it."""
    procs = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmd = (stat.parent / "cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue
        procs[int(stat.parent.name)] = (int(fields[1]), cmd)
    servers = {p for p, (ppid, cmd) in procs.items() if ppid == pid and b"forkserver" in cmd}
    return [p for p, (ppid, cmd) in procs.items()
            if (ppid == pid and b"spawn_main" in cmd) or ppid in servers]
