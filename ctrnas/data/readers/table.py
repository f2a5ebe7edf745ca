"""A user's own ads log: CSV (with a header line) or Parquet, with the label, dense and sparse columns
named in the settings' `table:` section. Other columns are ignored.

label: a number equal to 0 or 1 (or a boolean); dense: numbers, empty/null = missing; sparse: integers or
text (integers are keyed by value, any other text by the FNV-1a hash of its bytes). For Parquet the "line"
of an error is the 1-based row number.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ctrnas.data.readers.base import LinedBatch
from ctrnas.data.readers.records import first_line
from ctrnas.data.readers.values import parse_numbers, show
from ctrnas.data.readers.rows import DelimitedReader, Problems
from ctrnas.errors import DataFormatError, RecipeError

PARQUET_SUFFIXES = (".parquet", ".pq")


def _header(path: str, delimiter: str) -> list[str]:
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
        first = f.readline().decode("utf-8", "replace").rstrip("\r\n")
    return [c.strip().strip('"') for c in first.split(delimiter)]


class TableReader(DelimitedReader):
    format = "table"
    quoting = True  # "a, b" fields; a quoted value may not span lines (line numbers stay physical)

    def __init__(self, paths: list[str], cfg):
        t = cfg.table
        if t is None:
            raise RecipeError("prepare settings", "table", "`prepare table` needs the column roles: "
                              "table: {label: ..., dense: [...], sparse: [...]} (or --label/--dense/--sparse)")
        self.label_column = t.label
        declared = [t.label, *t.dense, *t.sparse]
        dup = {c for c in declared if declared.count(c) > 1}
        if dup:
            raise RecipeError("prepare settings", "table", f"column(s) {sorted(dup)} named twice")
        super().__init__(paths, cfg, [], list(t.dense), [(c, "dec") for c in t.sparse], t.delimiter, header=True)
        self.declared = declared

    def _columns_of(self, path: str) -> list[str]:
        if path.endswith(PARQUET_SUFFIXES):
            names = pq.ParquetFile(path).schema_arrow.names
        else:
            names = _header(path, self.delimiter)
        for c in self.declared:
            if c not in names:
                raise DataFormatError(Path(path).name, None if path.endswith(PARQUET_SUFFIXES) else 1, c,
                                      f"column not found (has: {', '.join(names[:50])})")
        return names

    def without_label(self) -> None:
        super().without_label()
        self.declared = [c for c in self.declared if c != self.label_column]

    def check_header(self, path: str) -> None:
        self.columns = self._columns_of(path)

    def parse_label(self, table: pa.RecordBatch, problems: Problems) -> np.ndarray:
        col = table.column(self.label_column)
        if pa.types.is_boolean(col.type):
            col = col.cast(pa.int8())
        vals, bad, nonfinite = parse_numbers(col)
        problems.add(np.asarray(col.is_null()), self.label_column, "missing_label", lambda i: "missing label")
        problems.add(bad | nonfinite | (~np.isnan(vals) & (vals != 0) & (vals != 1)), self.label_column,
                     "bad_label", lambda i: f"label must be 0 or 1, got {show(col, i)!r}")
        return (vals == 1).astype(np.float32)

    def lined_batches(self, path: str) -> Iterator[tuple[LinedBatch, str, bool]]:
        if not path.endswith(PARQUET_SUFFIXES):
            yield from super().lined_batches(path)
            return
        self.check_header(path)
        first = 1
        for batch in pq.ParquetFile(path).iter_batches(batch_size=65536, columns=self.declared):
            cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in batch.columns]
            # an empty string is a missing value, as an empty CSV field is
            cols = [pc.if_else(pc.equal(c, ""), pa.scalar(None, c.type), c) if pa.types.is_string(c.type) else c
                    for c in cols]
            batch = pa.RecordBatch.from_arrays(cols, names=batch.schema.names)
            lines = np.arange(first, first + batch.num_rows, dtype=np.int64)
            first += batch.num_rows
            # in Parquet an all-null row is a row (with a missing label), not a blank line
            yield LinedBatch(batch, lines, []), Path(path).name, False

    def describe(self) -> dict:
        t = self.cfg.table
        return {"format": "table", "label": t.label, "dense": list(t.dense), "sparse": list(t.sparse)}


def has_labels(cfg, path: str) -> bool:
    """Whether a table file holds the label column: by its Parquet schema or its CSV header."""
    t = cfg.table
    if path.endswith(PARQUET_SUFFIXES):
        return t.label in pq.ParquetFile(path).schema_arrow.names
    return t.label in [c.strip().strip('"') for c in first_line(path).split(t.delimiter)]
