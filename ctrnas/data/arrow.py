"""Arrow columns as numpy arrays without importing pandas.

pyarrow's `Array.to_numpy` imports pandas on its first call (its conversion options live there): ~0.5 s of
CPU and ~50 MB in every process that reads a batch, training workers included. Prepared shards hold
null-free fixed-width columns, which are views of their values buffer.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def column_numpy(arr: pa.Array) -> np.ndarray:
    """A read-only numpy view of a null-free int/uint/float Arrow array; other arrays go through to_numpy."""
    t = arr.type
    kind = "f" if pa.types.is_floating(t) else "i" if pa.types.is_signed_integer(t) else \
        "u" if pa.types.is_unsigned_integer(t) else None
    if kind is None or arr.null_count:
        return arr.to_numpy(zero_copy_only=False)
    width = t.bit_width // 8
    return np.frombuffer(arr.buffers()[1], dtype=np.dtype(f"<{kind}{width}"), count=len(arr),
                         offset=arr.offset * width)
