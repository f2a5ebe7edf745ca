"""Atomic file writes: a file is written beside its final path under a temporary name and renamed over it,
so a reader (or a resumed run) never sees half a file. The temporary name, `.NAME.tmp-PID[SUFFIX]`, is one
that `ctrnas.data.ownership` knows as transient.

And the reading side of plain files (`regular_file`, `read_bytes`, `read_json`): a file that may come from
someone else is opened only when it is a regular file under a size limit, and every decode failure is one
`DamagedFile` line. `ctrnas.safeload` adds Parquet and weights files on top."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, Iterator

from ctrnas.errors import DamagedFile, PathError


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


def one_line(e: BaseException) -> str:
    """The first non-empty line of an exception's message (torch's are often several lines long)."""
    lines = [s.strip() for s in str(e).splitlines() if s.strip()]
    return lines[0] if lines else type(e).__name__


MB = 1 << 20
# the most bytes ctrnas reads whole from one JSON file (a search checkpoint of a long search is tens of MB);
# CTRNAS_MAX_JSON_MB raises it
JSON_LIMIT = int(float(os.environ.get("CTRNAS_MAX_JSON_MB", "512")) * MB)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def regular_file(path: str | Path, what: str, limit: int | None = None) -> int:
    """An open read-only descriptor of `path` (the caller closes it) once it is known to be a regular file of
    at most `limit` bytes. Opened without blocking, so a FIFO is refused rather than waited on."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise PathError(path, f"no such file (the {what})") from None
    except OSError as e:
        raise PathError(path, f"cannot open the {what}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PathError(path, f"is {_kind(st.st_mode)}, not a regular file; the {what} must be a plain file")
        if limit is not None and st.st_size > limit:
            raise DamagedFile(path, f"{st.st_size:,} bytes, over the limit of {limit:,} for a {what}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_regular(path: str | Path, what: str, limit: int | None = None) -> int:
    """`regular_file`'s checks alone; the file's size in bytes."""
    fd = regular_file(path, what, limit)
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def read_bytes(path: str | Path, what: str, limit: int = JSON_LIMIT) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (a file that grows past it while read is refused)."""
    fd = regular_file(path, what, limit)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise DamagedFile(path, f"over the limit of {limit:,} bytes for a {what}")
    return data


def decode_json(data: bytes, path: str | Path, what: str, **kw) -> Any:
    """JSON `data` of the file at `path` decoded; every failure one DamagedFile line."""
    try:
        return json.loads(data.decode("utf-8"), **kw)
    except UnicodeDecodeError as e:
        raise DamagedFile(path, f"not UTF-8 text (byte {e.start}); the {what} is JSON") from None
    except RecursionError:
        raise DamagedFile(path, f"nested too deeply to be a {what}") from None
    except ValueError as e:
        raise DamagedFile(path, f"not JSON ({one_line(e)}); the {what} is JSON") from None


def read_json(path: str | Path, what: str, limit: int = JSON_LIMIT, **kw) -> Any:
    """A JSON file (a regular file of at most `limit` bytes, UTF-8) decoded; every failure one line."""
    return decode_json(read_bytes(path, what, limit), path, what, **kw)
