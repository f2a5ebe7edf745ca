"""Job functions that say when they ran; module-level so worker processes can import them."""

from __future__ import annotations

import time


def started_at(state, job: tuple[int, float]) -> tuple[float, int]:
    """(when it started, on the machine's monotonic clock; its value) after sleeping the job's seconds."""
    value, seconds = job
    start = time.monotonic()
    time.sleep(seconds)
    return start, value * 10


def record_order(seen: list, job: int) -> int:
    """Appends the job to `seen` (one process: the serial executor's context is the list itself)."""
    seen.append(job)
    return job * 10
