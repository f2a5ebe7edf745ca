"""`pad_missing_trailing`: read a row with too few fields as if its missing fields were empty at the end.

Some public Criteo copies strip a line's trailing tabs, so a row whose last categories are empty has 37 or
38 fields instead of 40. With the option, such a row is read with those fields missing (meta.json counts
them as rows.padded); without it, it is a `field_count` reject. Only the trailing category fields may be
missing (a row short of its label or a number field, e.g. a bare `0`, is a reject: not a stripped row), and a
row with too many fields is always a reject.

pyarrow hands a short row to the invalid-row handler, which can only skip it; the handler records it (as a
Reject with reason PADDED, never reported), and `merge` parses the recorded lines with the missing
delimiters appended and puts them back among the chunk's rows in line order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ctrnas.data.readers.records import LinedBatch, Reject
from ctrnas.data.readers.values import cut

PADDED = "padded"  # internal reason of a row to pad; never reaches rejects.tsv


def short_row(file: str, line: int, text: str, missing: int):
    return Reject(file, line, None, PADDED, str(missing), text)


def pending(bad) -> bool:
    return any(r.reason == PADDED for r in bad)


def merge(batch: pa.RecordBatch, lines: np.ndarray, bad: list, parse, delimiter: str):
    """The LinedBatch of `batch` (text columns) with the short rows in `bad` padded and merged in line order.
    `parse(bytes)` parses delimited text as the stream does."""
    short = sorted((r for r in bad if r.reason == PADDED), key=lambda r: r.line)
    rest = [r for r in bad if r.reason != PADDED]
    extra = parse("".join(r.text + delimiter * int(r.detail) + "\n" for r in short).encode()) if short else None
    if extra is not None and extra.num_rows != len(short):
        # a padded line still did not fit (quotes in a user's CSV): report them all as field-count rejects
        rest += [Reject(r.file, r.line, None, "field_count", f"too few fields ({r.detail} missing), and padding "
                        "did not make the line fit", cut(r.text, 500)) for r in short]
        extra, short = None, []
    n = batch.num_rows
    mask = np.zeros(n, dtype=bool)
    if extra is not None and len(short):
        table = pa.Table.from_batches([batch, extra.cast(batch.schema)])
        all_lines = np.concatenate([lines, np.array([r.line for r in short], dtype=np.int64)])
        order = np.argsort(all_lines, kind="stable")
        batch = table.take(pa.array(order)).combine_chunks().to_batches()[0]
        lines, mask = all_lines[order], order >= n
    return LinedBatch(batch, lines, sorted(rest, key=lambda r: r.line), None, mask)
