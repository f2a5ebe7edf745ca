"""Raw values in messages (cut to a readable length) and numbers parsed with pyarrow's exact rules."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SHOWN_CHARS = 100  # of a value quoted in a message or rejects.tsv


def cut(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` for a message: its start and its length when longer than `limit` (a 1 MB value helps no one)."""
    return text if len(text) <= limit else f"{text[:limit]}...[{len(text):,} chars]"


def show(arr: pa.Array, i: int):
    """Value `i` of `arr` for a message: None if null, undecodable bytes replaced, long text cut."""
    s = arr[i]
    if not s.is_valid:
        return None
    try:
        v = s.as_py()
    except UnicodeDecodeError:
        v = s.as_buffer().to_pybytes().decode("utf-8", "replace")
    return cut(v) if isinstance(v, str) else v


def row_text(table: pa.RecordBatch, i: int, delimiter: str) -> str:
    """The raw text of row `i`, rebuilt from its fields (for rejects.tsv)."""
    vals = [show(c, i) for c in table.columns]
    return cut(delimiter.join("" if v is None else str(v) for v in vals), 500)


def parse_numbers(arr: pa.Array, kind: pa.DataType = pa.float64()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values with NaN for null, unparsable mask, non-finite mask) of a string column.

    pyarrow's cast fails as a whole on the first bad string; splitting the failing range in halves finds
    k bad values in O(k log n) casts and keeps pyarrow's exact number syntax for every value.
    """
    n = len(arr)
    out = np.full(n, np.nan)
    bad = np.zeros(n, dtype=bool)

    def go(lo: int, hi: int) -> None:
        part = arr.slice(lo, hi - lo)
        try:
            vals = pc.cast(part, kind)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            if hi - lo == 1:
                bad[lo] = True
                return
            mid = (lo + hi) // 2
            go(lo, mid)
            go(mid, hi)
            return
        out[lo:hi] = vals.to_numpy(zero_copy_only=False)  # nulls -> NaN

    if n:
        go(0, n)
    # "nan"/"inf" parse as numbers but are no counts; a null stays NaN and means missing
    nonfinite = ~np.isfinite(out) & ~bad & ~np.asarray(arr.is_null())
    out[nonfinite] = np.nan
    return out, bad, nonfinite
