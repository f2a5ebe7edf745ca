"""Atomic file writes: a file is written beside its final path under a temporary name and renamed over it,
so a reader (or a resumed run) never sees half a file. The temporary name, `.NAME.tmp-PID[SUFFIX]`, is one
that `ctrnas.data.ownership` knows as transient."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_path(path: str | Path, suffix: str = "", fsync: bool = False) -> Iterator[Path]:
    """A temporary path beside `path` to write; renamed over `path` when the block ends without an error,
    removed when it raises. `suffix`: for writers that pick the format by extension; `fsync`: flush the file
    to disk before the rename (a checkpoint that must survive a power loss)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}{suffix}")
    try:
        yield tmp
        if fsync:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


FULL = "no space left on the device (or quota reached); free some space and run the same command again"
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def disk_full(e: BaseException) -> bool:
    """Whether `e` says a write failed for lack of space: an OSError's errno or message (pyarrow's name no
    errno), or torch's zip writer's "file write failed"."""
    if isinstance(e, OSError) and e.errno in _FULL_ERRNOS:
        return True
    text = str(e)
    return isinstance(e, (OSError, RuntimeError)) and ("No space left" in text or "Disk quota exceeded" in text
                                                       or "file write failed" in text)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write text to `path` via a temp file and rename, so readers never see half a file."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def atomic_write_bytes(path: str | Path, data: bytes, fsync: bool = False) -> None:
    """Write bytes to `path` via a temp file and rename."""
    with atomic_path(path, fsync=fsync) as tmp:
        tmp.write_bytes(data)
