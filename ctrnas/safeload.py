"""Reading files that may come from someone else (a shared model folder, a run folder, a dataset) without
running code, hanging or running out of memory.

One reader for every file ctrnas loads:
- `regular_file` opens it without blocking and checks it is a regular file (not a FIFO, a device such as
  /dev/zero, a folder; a symlink counts as what it points to) under a size limit;
- `read_json` (metadata), `parquet_file` / `parquet_errors` (vocabularies, shards) and `load_weights_file`
  (`torch.load(weights_only=True)`, which accepts tensors and plain values and refuses anything else) decode it
  and turn every decode failure into one `DamagedFile` line, "damaged FILE: reason".
tests/security/ plants code, FIFOs, devices and damaged bytes in each such file.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from typing import Any, Iterator

from ctrnas.errors import CtrnasError, DamagedFile, PathError

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


@contextlib.contextmanager
def parquet_errors(path: str | Path, what: str) -> Iterator[None]:
    """pyarrow's failures on a damaged Parquet file inside the block as one DamagedFile line."""
    import pyarrow as pa

    try:
        yield
    except (pa.ArrowException, OSError, ValueError, EOFError) as e:  # ArrowInvalid is a ValueError
        if isinstance(e, OSError) and e.errno is not None:
            raise  # a real I/O error (a full disk, a lost mount): not the file's fault
        raise DamagedFile(path, f"not a readable Parquet file ({one_line(e)}); the {what} is Parquet") from None


def parquet_file(path: str | Path, what: str):
    """`pyarrow.parquet.ParquetFile` of a regular file; a damaged one is one DamagedFile line."""
    import pyarrow.parquet as pq

    check_regular(path, what)
    with parquet_errors(path, what):
        return pq.ParquetFile(path)


def read_parquet(path: str | Path, what: str, **kw):
    """`pyarrow.parquet.read_table` of a regular file; a damaged one is one DamagedFile line."""
    import pyarrow.parquet as pq

    check_regular(path, what)
    with parquet_errors(path, what):
        return pq.read_table(path, **kw)


def one_line(e: BaseException) -> str:
    """The first non-empty line of an exception's message (torch's are often several lines long)."""
    lines = [s.strip() for s in str(e).splitlines() if s.strip()]
    return lines[0] if lines else type(e).__name__


def load_weights_file(path: str | Path, what: str, mmap: bool = False):
    """`path` read with torch.load(weights_only=True) on the CPU; one-line CtrnasError if it cannot be."""
    import pickle
    import warnings

    import torch

    path = Path(path)
    check_regular(path, what)
    try:
        with warnings.catch_warnings():  # torch warns about a plain pickle's protocol before refusing it
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError:
        raise CtrnasError(f"{path}: not a {what} ctrnas can open safely: it holds objects other than tensors "
                          "and plain values, and ctrnas never unpickles code") from None
    except RecursionError:
        raise DamagedFile(path, f"nested too deeply to be a {what}") from None
    except (OSError, RuntimeError, EOFError, ValueError, TypeError, KeyError, AttributeError,
            IndexError, UnicodeDecodeError) as e:
        raise DamagedFile(path, f"cannot read the {what} (not a torch file): {one_line(e)}") from None


def save_weights_file(obj, path: str | Path, what: str) -> None:
    """torch.save `obj` (tensors and plain values) to `path` atomically: a temp file renamed at the end,
    removed if the write fails; a full disk or another write error is one CtrnasError line."""
    import os

    import torch

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:
        full = "No space left" in str(e) or getattr(e, "errno", None) == 28 or "file write failed" in str(e)
        raise CtrnasError(f"{path}: cannot write the {what}: "
                          + ("no space left on the device (or quota reached); free some space and run the same "
                             "command again" if full else one_line(e))) from None
    finally:
        tmp.unlink(missing_ok=True)
