"""Reading files that may come from someone else (a shared model folder, a run folder) without running code.

Every weights file ctrnas reads goes through `load_weights_file`: `torch.load(weights_only=True)`, which
accepts tensors and plain values (dicts, lists, numbers, strings) and refuses anything else, and turns
every failure into one CtrnasError line (torch's own message suggests turning that check off, which
ctrnas never does). Metadata is JSON. tests/security/ plants code in each such file and checks it never runs.
"""

from __future__ import annotations

from pathlib import Path

from ctrnas.errors import CtrnasError


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
    if not path.is_file():
        raise CtrnasError(f"{path}: {what} missing or not a file")
    try:
        with warnings.catch_warnings():  # torch warns about a plain pickle's protocol before refusing it
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError:
        raise CtrnasError(f"{path}: not a {what} ctrnas can open safely: it holds objects other than tensors "
                          "and plain values, and ctrnas never unpickles code") from None
    except (OSError, RuntimeError, EOFError, ValueError, TypeError, KeyError, AttributeError,
            IndexError, UnicodeDecodeError) as e:
        raise CtrnasError(f"{path}: cannot read {what} (damaged, or not a torch file): {one_line(e)}") from None


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
