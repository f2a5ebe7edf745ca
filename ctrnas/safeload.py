"""Reading files that may come from someone else (a shared model folder, a run folder, a dataset) without
running code, hanging or running out of memory.

One reader for every file ctrnas loads:
- `regular_file` opens it without blocking and checks it is a regular file (not a FIFO, a device such as
  /dev/zero, a folder; a symlink counts as what it points to) under a size limit (it and `read_json` live in
  ctrnas.files, which imports no torch, so that the search may use them);
- `read_json` (metadata), `parquet_file` / `parquet_errors` (vocabularies, shards) and `load_weights_file`
  (`torch.load(weights_only=True)`, which accepts tensors and plain values and refuses anything else) decode it
  and turn every decode failure into one `DamagedFile` line, "damaged FILE: reason".
tests/security/ plants code, FIFOs, devices and damaged bytes in each such file.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from ctrnas.errors import CtrnasError, DamagedFile
# the readers of plain files live in ctrnas.files (no torch: the search imports them); named here too
from ctrnas.files import (JSON_LIMIT, check_regular, decode_json, one_line, read_bytes, read_json,  # noqa: F401
                          regular_file)


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
    """The table of a regular Parquet file (`ParquetFile.read(**kw)`); a damaged one is one DamagedFile line.
    Not `read_table`: it goes through pyarrow.dataset, whose import costs ~0.3 s of CPU, for one file."""
    import pyarrow.parquet as pq

    check_regular(path, what)
    with parquet_errors(path, what), pq.ParquetFile(path) as f:
        return f.read(**kw)


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
