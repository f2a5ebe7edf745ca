"""What every reader yields (RawBatch, its Rejects; the CSV core's LinedBatch) and how it opens its inputs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from ctrnas.errors import DataFormatError


@dataclass
class Reject:
    """One rejected raw row: where it is and why."""

    file: str
    line: int
    field: str | None
    reason: str  # short code counted in meta.json: field_count, bad_label, non_numeric_dense, ...
    detail: str  # readable message
    text: str = ""

    def error(self) -> DataFormatError:
        return DataFormatError(self.file, self.line, self.field, self.detail)


@dataclass
class RawBatch:
    """Accepted rows of one chunk before encoding, plus the chunk's rejects."""

    labels: np.ndarray  # float32 0/1, one per output row
    dense: np.ndarray  # float64 [n_dense, n] (feature-major: each feature contiguous), NaN = missing
    keys: np.ndarray  # uint64 [n_sparse, n] category keys (see transforms.py)
    missing: np.ndarray  # bool [n_sparse, n]
    accepted: int  # raw rows accepted (== n unless rows were expanded, e.g. KDD impressions)
    rejects: list[Reject] = field(default_factory=list)
    blank: int = 0
    padded: int = 0  # accepted rows whose missing trailing fields were filled (pad_missing_trailing)
    lines: np.ndarray | None = None  # physical line (Parquet: row) of each output row, when rows map 1:1


@dataclass
class LinedBatch:
    """A batch of string columns with the physical line number of each row, and the bad lines before it."""

    table: pa.RecordBatch
    lines: np.ndarray
    bad: list[Reject]
    # set when `numeric` columns were parsed as float64 by the CSV reader: returns the same rows with
    # every column as text (for messages that quote a value, and pyarrow's exact cast rules)
    as_text: Callable[[], pa.RecordBatch] | None = None
    padded: np.ndarray | None = None  # rows whose missing trailing fields were filled as empty (pad option)


def open_input(path: str | Path) -> pa.NativeFile:
    """An input stream of a raw file; gzip is recognised by its magic bytes, whatever the file is called."""
    with open(path, "rb") as f:
        magic = f.read(2)
    raw = pa.OSFile(str(path), "rb")
    return pa.CompressedInputStream(raw, "gzip") if magic == b"\x1f\x8b" else raw


def input_info(paths: list[str]) -> list[dict]:
    """Name, absolute path and size in bytes of each input file (for meta.json)."""
    return [{"name": Path(p).name, "path": str(Path(p).resolve()), "bytes": os.path.getsize(p)} for p in paths]


def first_line(path: str) -> str:
    """The first non-blank line of a raw file (gzip or not), without its line end ("" for an empty file)."""
    data = b""
    with open_input(path) as f:
        while True:
            chunk = f.read(1 << 16)
            data += chunk
            lines = [x for x in data.split(b"\n") if x.strip()]
            if (lines and b"\n" in data) or not chunk:
                return lines[0].decode("utf-8", "replace").rstrip("\r") if lines else ""
