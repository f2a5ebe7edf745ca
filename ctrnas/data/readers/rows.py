"""The shared reader: label/dense/sparse columns of string batches -> validated RawBatch with rejects.

Format readers (criteo.py, avazu.py, kdd2012.py, table.py) declare their columns and override the hooks
`parse_label` (labels + bad rows), `derive` (extra features) and `expand` (one raw row -> several).
A row's first problem in column order (label, then dense features) is the one reported.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ctrnas.data.readers.base import CsvStream, LinedBatch, RawBatch, Reject, blank_rows, prefetch
from ctrnas.data.readers.values import parse_numbers, row_text, show
from ctrnas.data.transforms import column_keys
from ctrnas.errors import DataFormatError


class Problems:
    """First problem of each row of a batch, in the order fields are checked."""

    def __init__(self, n: int):
        self.bad = np.zeros(n, dtype=bool)
        self.items: dict[int, tuple[str | None, str, str]] = {}

    def add(self, mask: np.ndarray, field: str | None, reason: str, detail) -> None:
        """Record `reason` for rows in `mask` not yet bad; `detail(i)` gives the message of row i."""
        new = mask & ~self.bad
        for i in np.flatnonzero(new):
            self.items[int(i)] = (field, reason, detail(int(i)))
        self.bad |= new


class DelimitedReader:
    """Streams delimited text files of one format into RawBatches."""

    format = "delimited"
    label_column = "label"
    quoting = False  # the ad-log formats never quote; a user's CSV may
    keys_always: frozenset[str] = frozenset()  # keys the hooks need even in a scan without keys
    labeled = True  # False (`without_label`): rows have no label column; labels are NaN

    def __init__(self, paths: list[str], cfg, columns: list[str], dense: list[str],
                 sparse: list[tuple[str, str]], delimiter: str, header: bool = False):
        self.paths, self.cfg = [str(p) for p in paths], cfg
        self.columns, self.delimiter, self.header = columns, delimiter, header
        self.dense_columns = dense  # raw columns read as numbers
        self.sparse_columns = sparse  # (raw column, key syntax)
        self.dense_names: tuple[str, ...] = tuple(dense)
        self.sparse_names: tuple[str, ...] = tuple(n for n, _ in sparse)

    def without_label(self) -> None:
        """Read rows that lack the label column (rows to score, ctrnas predict)."""
        self.labeled = False
        self.columns = [c for c in self.columns if c != self.label_column]

    # ---- hooks -----------------------------------------------------------------------------------------
    def check_header(self, path: str) -> None:
        """Formats with a header line validate it here (raise DataFormatError naming line 1)."""

    def parse_label(self, table: pa.RecordBatch, problems: Problems) -> np.ndarray:
        """Binary labels '0'/'1'; anything else (or missing) is a bad row."""
        col = table.column(self.label_column)
        one = np.asarray(pc.fill_null(pc.equal(col, "1"), False))
        zero = np.asarray(pc.fill_null(pc.equal(col, "0"), False))
        problems.add(np.asarray(col.is_null()), self.label_column, "missing_label", lambda i: "missing label")
        problems.add(~(one | zero), self.label_column, "bad_label",
                     lambda i: f"label must be 0 or 1, got {show(col, i)!r}")
        return one.astype(np.float32)

    def derive(self, table: pa.RecordBatch, dense: np.ndarray, keys: np.ndarray, missing: np.ndarray,
               problems: Problems) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Add or replace features (all rows of the batch); mark bad rows in `problems`."""
        return dense, keys, missing

    def expand(self, table: pa.RecordBatch, keep: np.ndarray, labels, dense, keys, missing):
        """Turn accepted rows into output rows (identity unless a format expands rows)."""
        return labels, dense, keys, missing

    def paddable(self) -> int:
        """How many fields `pad_missing_trailing` may fill: the trailing run of category columns (never the
        label or a number), the ones a copy that strips trailing empty fields can have lost."""
        sparse = {c for c, _ in self.sparse_columns} - set(self.dense_columns) - {self.label_column}
        n = 0
        for c in reversed(self.columns):
            if c not in sparse:
                break
            n += 1
        return n

    # ---- streaming -------------------------------------------------------------------------------------
    def lined_batches(self, path: str) -> Iterator[tuple[LinedBatch, str, bool]]:
        """(batch with line numbers, file name, whether all-empty rows are blank lines) of one input."""
        self.check_header(path)
        stream = CsvStream(path, self.columns, self.delimiter, skip_rows=1 if self.header else 0,
                           block_size=self.cfg.block_size, quoting=self.quoting, numeric=tuple(self.dense_columns),
                           pad=self.paddable() if self.cfg.pad_missing_trailing else 0, paddable=self.paddable())
        for lb in stream:
            yield lb, stream.file, True

    def batches(self, keys: bool = True) -> Iterator[RawBatch]:
        """RawBatches of all inputs in order; `keys=False` skips category keys the hooks do not need."""
        remaining = self.cfg.limit
        for path in self.paths:
            rows = 0
            for lb, file, blanks in prefetch(self.lined_batches(path)):
                raw = self.convert(lb, file, remaining, blanks, keys)
                rows += raw.accepted + len(raw.rejects)
                if remaining is not None:
                    remaining -= raw.accepted
                yield raw
                if remaining is not None and remaining <= 0:
                    return
            if rows == 0:  # an empty download, or a header alone: no dataset comes of it
                raise DataFormatError(path, None, None, "no data rows (the file is empty, or holds only "
                                      f"{'a header and ' if self.header else ''}blank lines)")

    def convert(self, lb: LinedBatch, file: str, limit: int | None = None, blanks: bool = True,
                want_keys: bool = True) -> RawBatch:
        t, n = lb.table, lb.table.num_rows
        blank = blank_rows(t) if n and blanks else np.zeros(n, dtype=bool)
        problems = Problems(n)
        problems.bad |= blank  # blank rows are dropped, not rejected
        if not self.labeled:
            labels = np.full(n, np.nan, dtype=np.float32)
        else:
            labels = self.parse_label(t, problems) if n else np.zeros(0, np.float32)
        dense = np.full((len(self.dense_columns), n), np.nan)
        for j, name in enumerate(self.dense_columns):
            col = t.column(name)
            vals, bad, nonfinite = parse_numbers(col)
            dense[j] = vals
            problems.add(bad, name, "non_numeric_dense", lambda i, c=col: f"not a number: {show(c, i)!r}")
            problems.add(nonfinite, name, "non_finite_dense", lambda i, c=col: f"not a finite number: {show(c, i)!r}")
        keys = np.zeros((len(self.sparse_columns), n), dtype=np.uint64)
        missing = np.zeros((len(self.sparse_columns), n), dtype=bool)
        for j, (name, syntax) in enumerate(self.sparse_columns):
            if want_keys or name in self.keys_always:
                keys[j], missing[j] = column_keys(t.column(name), syntax)
        dense, keys, missing = self.derive(t, dense, keys, missing, problems)
        if problems.items and lb.as_text is not None:
            # rejects quote the raw text of their values: redo this chunk from its text columns
            return self.convert(replace(lb, table=lb.as_text(), as_text=None), file, limit, blanks, want_keys)
        keep = ~problems.bad
        lines = lb.lines
        rejects = [r for r in lb.bad if r.reason != "blank"]
        n_blank = int(blank.sum()) + (len(lb.bad) - len(rejects))
        rejects += [Reject(file, int(lines[i]), f, reason, detail, row_text(t, i, self.delimiter))
                    for i, (f, reason, detail) in problems.items.items()]
        rejects.sort(key=lambda r: r.line)
        if limit is not None and keep.sum() > limit:
            # stop right after the limit-th accepted row: later rows were never read
            last = np.flatnonzero(keep)[limit - 1] if limit > 0 else -1
            cut_line = int(lines[last]) if last >= 0 else 0
            keep[last + 1:] = False
            blank[last + 1:] = False
            rejects = [r for r in rejects if r.line <= cut_line]
            n_blank = int(blank.sum()) + sum(r.reason == "blank" and r.line <= cut_line for r in lb.bad)
        if not keep.all():
            labels, dense, keys, missing = labels[keep], dense[:, keep], keys[:, keep], missing[:, keep]
        padded = int((keep & lb.padded).sum()) if lb.padded is not None else 0
        labels, dense, keys, missing = self.expand(t, keep, labels, dense, keys, missing)
        out_lines = lines[keep] if len(labels) == int(keep.sum()) else None
        return RawBatch(labels, dense, keys, missing, int(keep.sum()), rejects, n_blank, padded, out_lines)
