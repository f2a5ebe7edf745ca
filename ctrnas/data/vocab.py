"""Min-count vocabularies built in streaming from uint64 category keys (AutoCTR / BARS convention).

Ids: 0 = missing value, 1 = out-of-vocabulary (seen fewer than `min_count` times: the per-field OOV bucket),
2.. = values seen at least `min_count` times, most frequent first (ties by key), so a table's hot rows are
at the front. AutoCTR keeps values seen *more than* 10 times, i.e. `min_count = 11` here; BARS'
`min_categr_count` is `min_count` as is. Counts cover every accepted row, before the split, as AutoCTR's
preprocess.py counts the whole file (FuxiCTR fits on the training split only: a difference in which rare
values reach the OOV bucket, not in any label).

Memory grows with the number of distinct values (16 bytes each while counting), never with rows: each
chunk is reduced to its unique keys at once, and the buffered uniques are merged whenever they outgrow the
running table (amortised doubling).
"""

from __future__ import annotations

import numpy as np

MISSING_ID, OOV_ID = 0, 1


class KeyCounter:
    """Exact count of each distinct uint64 key over a stream of chunks."""

    def __init__(self):
        self.keys = np.zeros(0, dtype=np.uint64)
        self.counts = np.zeros(0, dtype=np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_size = 0

    def add(self, keys: np.ndarray) -> None:
        if len(keys) == 0:
            return
        u, c = np.unique(keys, return_counts=True)
        self._pending.append((u, c.astype(np.int64)))
        self._pending_size += len(u)
        if self._pending_size > max(len(self.keys), 1 << 20):
            self._merge()

    def _merge(self) -> None:
        if not self._pending:
            return
        keys = np.concatenate([self.keys] + [u for u, _ in self._pending])
        counts = np.concatenate([self.counts] + [c for _, c in self._pending])
        self.keys, inv = np.unique(keys, return_inverse=True)
        self.counts = np.bincount(inv, weights=counts, minlength=len(self.keys)).astype(np.int64)
        self._pending, self._pending_size = [], 0

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted distinct keys, their counts)."""
        self._merge()
        return self.keys, self.counts


class Vocabulary:
    """Maps keys to ids: frequent keys -> 2.., rare/unseen -> OOV_ID, missing -> MISSING_ID."""

    def __init__(self, keys: np.ndarray, counts: np.ndarray, min_count: int):
        keep = counts >= min_count
        k, c = keys[keep], counts[keep]
        order = np.lexsort((k, -c))  # most frequent first, ties by key
        self.size = len(k)
        self.cardinality = self.size + 2
        self.distinct_seen = len(keys)
        ids = np.empty(len(k), dtype=np.int64)
        ids[order] = np.arange(2, len(k) + 2, dtype=np.int64)
        self._keys, self._ids = k, ids  # k is sorted (np.unique order), ready for searchsorted

    @classmethod
    def from_counter(cls, counter: KeyCounter, min_count: int) -> "Vocabulary":
        keys, counts = counter.result()
        return cls(keys, counts, min_count)

    @classmethod
    def restore(cls, keys: np.ndarray, ids: np.ndarray) -> "Vocabulary":
        """The vocabulary `entries()` came from (a saved one: ctrnas.data.preprocess)."""
        order = np.argsort(keys, kind="stable")
        v = cls.__new__(cls)
        v._keys, v._ids = np.asarray(keys, np.uint64)[order], np.asarray(ids, np.int64)[order]
        v.size = v.distinct_seen = len(order)
        v.cardinality = v.size + 2
        return v

    def entries(self) -> tuple[np.ndarray, np.ndarray]:
        """(kept keys, their ids), sorted by key."""
        return self._keys, self._ids

    def lookup(self, keys: np.ndarray, missing: np.ndarray) -> np.ndarray:
        """Ids of `keys` (int64), MISSING_ID where `missing`."""
        out = np.full(len(keys), OOV_ID, dtype=np.int64)
        if self.size:
            pos = np.searchsorted(self._keys, keys)
            pos = np.minimum(pos, self.size - 1)
            hit = self._keys[pos] == keys
            out[hit] = self._ids[pos[hit]]
        out[missing] = MISSING_ID
        return out
