"""Feature transforms: dense count transforms and categorical keys -> hashed ids, vectorised over Arrow.

Dense (NASRec, AutoCTR and BARS conventions; docs/nasrec.md, Data), missing -> 0 in every case:
  log1p       x' = ln(max(x, 0) + 1)                      NASRec (`log(max(x,0)+1)`)
  log_square  x' = floor(ln(x)^2) if x > 2 else x         AutoCTR / BARS Criteo_x4 (Kaggle winners' bucketing)
  none        x' = x

Categorical values become a uint64 *key* first, by the field's declared syntax:
  hex  value = int(s, 16) if s is 1-16 hex digits        (Criteo C1..C26: 8 hex digits)
  dec  value = int(s) if s is -?[0-9]{1,20} within [-2^63, 2^64), negative ones as 64-bit two's complement
Any other string gets the 64-bit FNV-1a hash of its UTF-8 bytes as key (one longer than 4 KiB: BLAKE2b's 64
bits, in linear time), so no categorical value is ever an error. Keys are exact (collision-free) for every
well-formed value, which the vocabulary relies on.

Hash encoding (NASRec's modulo hashing, `x.fmod(num_embeddings-1)+1`): id = 1 + key mod (buckets - 1);
id 0 is reserved for a missing value. NASRec additionally reduces Avazu/KDD values modulo 2^31-1 before
this step; we do not (statistically the same, and Criteo, its main benchmark, is identical).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa

DENSE_TRANSFORMS = ("log1p", "log_square", "none")

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
LONG_VALUE = 4096  # bytes: a longer categorical value is hashed with BLAKE2b (see `fnv1a64`)

_NIBBLE = np.full(256, 255, dtype=np.uint8)
for _c in b"0123456789":
    _NIBBLE[_c] = _c - 48
for _c in b"abcdef":
    _NIBBLE[_c] = _c - 87
for _c in b"ABCDEF":
    _NIBBLE[_c] = _c - 55


def dense_transform(values: np.ndarray, kind: str) -> np.ndarray:
    """Apply a dense transform to float64 values with NaN for missing; returns float32 with missing -> 0."""
    x = np.asarray(values, dtype=np.float64)
    if kind == "log1p":
        # fmax(NaN, 0) = 0 and log1p(0) = 0: missing values come out as 0 without a masked pass
        return np.log1p(np.fmax(x, 0.0)).astype(np.float32)
    missing = np.isnan(x)
    if kind == "log_square":
        with np.errstate(invalid="ignore", divide="ignore"):
            big = np.floor(np.log(np.where(x > 2, x, 3.0)) ** 2)
        out = np.where(x > 2, big, x)
    elif kind == "none":
        out = x.copy()
    else:
        raise ValueError(f"unknown dense transform {kind!r} (known: {', '.join(DENSE_TRANSFORMS)})")
    out[missing] = 0.0
    return out.astype(np.float32)


def _string_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes, starts, lengths) of a string array without copying; nulls have length 0."""
    arr = arr.cast(pa.string()) if arr.type != pa.string() else arr
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32, count=len(arr) + 1, offset=arr.offset * 4)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and len(bufs[2]) else np.zeros(1, np.uint8)
    starts = offsets[:-1].astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)
    if arr.null_count:
        lengths[np.asarray(arr.is_null())] = 0
    return data, starts, lengths


def fnv1a64(arr: pa.Array) -> np.ndarray:
    """64-bit FNV-1a hash of each string's UTF-8 bytes, in time linear in their total length: the strings
    sorted longest first, so the ones still going at byte position p are a prefix of them (one vectorised step
    per position). FNV-1a goes one byte after another, so a value longer than `LONG_VALUE` bytes (a damaged
    row, not a category) gets BLAKE2b's 64 bits instead: one C pass over its bytes."""
    data, starts, lengths = _string_parts(arr)
    h = np.full(len(starts), _FNV_OFFSET, dtype=np.uint64)
    for i in np.flatnonzero(lengths > LONG_VALUE):
        s, n = int(starts[i]), int(lengths[i])
        h[i] = np.uint64(int.from_bytes(hashlib.blake2b(data[s:s + n].tobytes(), digest_size=8).digest(), "little"))
    short = np.flatnonzero((lengths > 0) & (lengths <= LONG_VALUE))
    if len(short) == 0:
        return h
    order = short[np.argsort(-lengths[short], kind="stable")]
    lens, first, hs = lengths[order], starts[order], h[order]
    ascending = lens[::-1]
    for p in range(int(lens[0])):
        k = len(lens) - int(np.searchsorted(ascending, p, side="right"))  # strings longer than p
        hs[:k] = (hs[:k] ^ data[first[:k] + p].astype(np.uint64)) * _FNV_PRIME
    h[order] = hs
    return h


def _hex8(c: np.ndarray) -> np.ndarray | None:
    """Values of consecutive 8-hex-digit strings (the bytes `c`, 8 per value), or None if any byte is not hex.

    Byte arithmetic instead of a table lookup: c is a hex digit iff c - '0' < 10 or (c | 0x20) - 'a' < 6
    (uint8 wrap-around), and its value is (c & 15) + 9 * (c >> 6). The 8 nibbles of a value are then packed
    within one little-endian uint64 word (first digit in the lowest byte) with shifts and masks."""
    if not ((c - np.uint8(48) < 10) | ((c | np.uint8(32)) - np.uint8(97) < 6)).all():
        return None
    nib = (c & np.uint8(15)) + (c >> np.uint8(6)) * np.uint8(9)
    w = nib.view("<u8")  # byte k = digit k (k = 0 most significant)
    lo = np.uint64(0x000F000F000F000F)
    w = ((w & lo) << np.uint64(4)) | ((w >> np.uint64(8)) & lo)  # 16-bit lane j: byte value of digits 2j, 2j+1
    w = (w | (w >> np.uint64(8))) & np.uint64(0x0000FFFF0000FFFF)  # 32-bit lane i: bytes 2i, 2i+1 (LE)
    w = (w | (w >> np.uint64(16))) & np.uint64(0xFFFFFFFF)  # the 4 value bytes, most significant first
    return w.astype(np.uint32).byteswap().astype(np.uint64)


def _hex_fixed(data: np.ndarray, start: int, m: int, width: int) -> np.ndarray | None:
    """Values of `m` consecutive hex strings of exactly `width` (even, <= 16) digits, or None if any is not hex."""
    if width == 8:
        return _hex8(data[start:start + m * 8])
    nib = _NIBBLE[data[start:start + m * width]].reshape(m, width)
    if (nib == 255).any():
        return None
    packed = (nib[:, 0::2] << 4) | nib[:, 1::2]
    pad = np.zeros((m, 8 - width // 2), dtype=np.uint8)
    return np.ascontiguousarray(np.hstack([pad, packed])).view(">u8").ravel().astype(np.uint64)


def _hex_keys_packed(arr: pa.Array) -> np.ndarray | None:
    """Keys of a string column whose values are all empty/null or 8 hex digits (Criteo, Avazu), else None.

    The offsets alone prove the layout: if the values of length 8 hold every byte of the data, all other
    slots (nulls included) are empty and the present values lie back to back from the first offset."""
    if arr.type != pa.string() or len(arr) == 0:
        return None
    bufs = arr.buffers()
    if bufs[2] is None:
        return None
    offsets = np.frombuffer(bufs[1], dtype=np.int32, count=len(arr) + 1, offset=arr.offset * 4)
    lengths = np.diff(offsets)
    present = lengths == 8
    m = int(np.count_nonzero(present))
    if m == 0 or int(offsets[-1]) - int(offsets[0]) != 8 * m:
        return None
    vals = _hex8(np.frombuffer(bufs[2], dtype=np.uint8, count=8 * m, offset=int(offsets[0])))
    if vals is None or m == len(arr):
        return vals
    keys = np.zeros(len(arr), dtype=np.uint64)
    keys[present] = vals
    return keys


def hex_keys(arr: pa.Array) -> np.ndarray:
    """Keys of a hex-syntax column (nulls get key 0; use the null mask to tell them apart)."""
    import pyarrow.compute as pc  # here: its import is ~0.3 s of CPU, and loading a transform needs none

    fast = _hex_keys_packed(arr)
    if fast is not None:
        return fast
    data, starts, lengths = _string_parts(arr)
    n = len(lengths)
    keys = np.zeros(n, dtype=np.uint64)
    present = lengths > 0
    if not present.any():
        return keys
    m = int(present.sum())
    width = int(lengths[present][0])
    # Fast path (all of Criteo): every present value has the same even width, stored back to back.
    if width <= 16 and width % 2 == 0 and (lengths[present] == width).all():
        vals = _hex_fixed(data, int(starts[present][0]), m, width)
        if vals is not None:
            keys[present] = vals
            return keys
    ok = np.asarray(pc.fill_null(pc.match_substring_regex(arr, r"^[0-9a-fA-F]{1,16}$"), False))
    if ok.any():
        padded = pc.utf8_lpad(arr.filter(pa.array(ok)), 16, "0")
        d2, s2, _ = _string_parts(padded)
        keys[ok] = _hex_fixed(d2, int(s2[0]), int(ok.sum()), 16)
    other = present & ~ok
    if other.any():
        keys[other] = fnv1a64(arr.filter(pa.array(other)))
    return keys


def dec_keys(arr: pa.Array) -> np.ndarray:
    """Keys of a decimal-syntax column (nulls get key 0)."""
    import pyarrow.compute as pc  # here: its import is ~0.3 s of CPU, and loading a transform needs none

    if pa.types.is_integer(arr.type):
        return np.asarray(pc.fill_null(arr.cast(pa.int64(), safe=False), 0)).view(np.uint64).copy()
    if not pa.types.is_string(arr.type) and not pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.string())
    # Fast paths: the whole column parses (Avazu `id` needs uint64). pyarrow also reads "0x1f" and
    # zero-padded 30-digit strings as integers; we hash those instead (the slow path below), so a value's
    # key never depends on its neighbours in the batch.
    longest = pc.max(pc.binary_length(arr)).as_py() or 0
    if longest <= 20 and not pc.any(pc.match_substring(arr, "x", ignore_case=True)).as_py():
        for target in (pa.int64(), pa.uint64()):
            try:
                vals = np.asarray(pc.fill_null(pc.cast(arr, target), 0))
                return vals.view(np.uint64).copy() if vals.dtype == np.int64 else vals.astype(np.uint64)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
    n = len(arr)
    keys = np.zeros(n, dtype=np.uint64)
    present = ~np.asarray(arr.is_null())
    small = np.asarray(pc.fill_null(pc.match_substring_regex(arr, r"^-?[0-9]{1,18}$"), False))
    if small.any():
        keys[small] = np.asarray(pc.cast(arr.filter(pa.array(small)), pa.int64())).view(np.uint64)
    big = np.asarray(pc.fill_null(pc.match_substring_regex(arr, r"^-?[0-9]{19,20}$"), False))
    for i in np.flatnonzero(big):  # rare: near the 64-bit limits, exact in Python ints
        v = int(arr[int(i)].as_py())
        if -(2**63) <= v < 2**64:
            keys[i] = np.uint64(v % 2**64)
        else:
            big[i] = False
    rest = present & ~small & ~big
    if rest.any():
        keys[rest] = fnv1a64(arr.filter(pa.array(rest)))
    return keys


def column_keys(arr: pa.Array, syntax: str) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 keys, missing mask) of a categorical column of the given syntax ('hex' or 'dec')."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    missing = np.asarray(arr.is_null())
    if syntax == "hex":
        return hex_keys(arr), missing
    if syntax == "dec":
        return dec_keys(arr), missing
    raise ValueError(f"unknown key syntax {syntax!r}")


def hash_ids(keys: np.ndarray, missing: np.ndarray, buckets: int) -> np.ndarray:
    """Modulo hashing: id = 1 + key mod (buckets - 1); missing -> 0. Ids lie in [0, buckets)."""
    if buckets < 2:
        raise ValueError(f"hash buckets must be >= 2, got {buckets}")
    ids = np.remainder(keys, np.uint64(buckets - 1)).view(np.int64)  # < 2^63: the view is exact
    ids += 1
    ids[missing] = 0
    return ids
