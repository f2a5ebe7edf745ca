"""Quoted CSV (the `table` reader): a quote opened on a line and not closed on it.

pyarrow would read the following lines into that one value (even with `newlines_in_values` off, up to the end
of the chunk), so rows would no longer be physical lines: the lines swallowed would be neither accepted
nor rejected, and later line numbers would be wrong. A quoted value on one line always has an even number
of quote characters (an escaped quote is doubled), so before a chunk is parsed each line with an odd number
is replaced by a marker line, which pyarrow hands to the invalid-row handler; the handler reports the
original line as an `unbalanced_quote` reject.
"""

from __future__ import annotations

import numpy as np

MARKER = b"ctrnas: unbalanced quote"  # one field: never a whole row of a table with a label and features
DETAIL = "a quote opened on this line is not closed on it (a quoted value may not span lines)"


def odd_lines(buf: bytes, size: int) -> np.ndarray:
    """0-based indexes of the lines of `buf[:size]` holding an odd number of '"' (lines end at LF)."""
    if buf.find(b'"', 0, size) < 0:
        return np.zeros(0, dtype=np.int64)
    a = np.frombuffer(buf, dtype=np.uint8, count=size)
    quotes = np.concatenate([[0], np.cumsum(a == 34)])
    ends = np.flatnonzero(a == 10) + 1  # exclusive end of each LF-terminated line
    if size and a[-1] != 10:
        ends = np.append(ends, size)
    per_line = np.diff(np.concatenate([[0], quotes[ends]]))
    return np.flatnonzero(per_line % 2 == 1)


def mask(buf: bytes, size: int, odd: np.ndarray, first_line: int) -> tuple[bytes, dict[int, str]]:
    """(the chunk with those lines replaced by MARKER, {physical line number: original text})."""
    lines = buf[:size].split(b"\n")
    originals = {}
    for i in odd.tolist():
        cr = b"\r" if lines[i].endswith(b"\r") else b""
        originals[first_line + i] = lines[i].rstrip(b"\r").decode("utf-8", "replace")
        lines[i] = MARKER + cr
    return b"\n".join(lines), originals
