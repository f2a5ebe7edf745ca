"""Encoding of a preparation's raw chunks (ctrnas.data.prepare): dense transforms, vocabulary lookups or hashed
ids, and the tallies that size each embedding table."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.data.transforms import dense_transform, hash_ids
from ctrnas.data.vocab import Vocabulary


def sizes_by_data(cfg: PrepareConfig) -> bool:
    """Whether hashed fields get tables sized by the ids seen (`hash_table_size: data`)."""
    return cfg.sparse_encoding == "hash" and cfg.hash_table_size == "data"


class Encoder:
    """Turns RawBatches into output record batches and keeps the per-split and per-field tallies."""

    def __init__(self, reader, cfg: PrepareConfig, vocabs: list[Vocabulary]):
        self.reader, self.cfg, self.vocabs = reader, cfg, vocabs
        self.buckets = [cfg.buckets(f) for f in reader.sparse_names]
        self.max_id = np.zeros(len(self.buckets), dtype=np.int64)
        self.staged_keys = cfg.sparse_encoding == "vocab"
        # hash ids seen per field (1 byte per bucket), to size the tables by the data after the pass
        self.seen = [np.zeros(b, dtype=bool) for b in self.buckets] if sizes_by_data(cfg) else None
        self.rows: list[Vocabulary | None] = []  # per hashed field: its seen ids -> rows 2.. (or None: as hashed)

    def _dense(self, raw) -> dict:
        cols = {"label": pa.array(raw.labels.astype(np.float32))}
        for j, name in enumerate(self.reader.dense_names):
            cols[name] = pa.array(dense_transform(raw.dense[j], self.cfg.dense_transform))
        return cols

    def _ids(self, j: int, ids: np.ndarray) -> pa.Array:
        self.max_id[j] = max(self.max_id[j], int(ids.max()))
        return pa.array(ids)

    def encode(self, raw) -> pa.RecordBatch:
        cols = self._dense(raw)
        for j, name in enumerate(self.reader.sparse_names):
            if self.vocabs:
                ids = self.vocabs[j].lookup(raw.keys[j], raw.missing[j])
            else:
                ids = hash_ids(raw.keys[j], raw.missing[j], self.buckets[j])
                if self.seen is not None:
                    self.seen[j][ids] = True
            cols[name] = self._ids(j, ids)
        return pa.RecordBatch.from_pydict(cols)

    def stage(self, raw) -> pa.RecordBatch:
        """What the staging file holds: the output batch, except that with vocabularies (not known yet)
        the sparse columns are the uint64 keys, null where missing."""
        if not self.staged_keys:
            return self.encode(raw)
        cols = self._dense(raw)
        for j, name in enumerate(self.reader.sparse_names):
            cols[name] = pa.array(raw.keys[j], mask=raw.missing[j])
        return pa.RecordBatch.from_pydict(cols)

    def unstage(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The output batch of a staged one (vocab lookups; hashed batches are final already)."""
        if self.rows:
            return self._renumber(batch)
        if not self.staged_keys:
            return batch
        cols = {n: batch.column(n) for n in ("label",) + tuple(self.reader.dense_names)}
        for j, name in enumerate(self.reader.sparse_names):
            col = batch.column(name)
            keys = np.frombuffer(col.buffers()[1], dtype=np.uint64, count=len(col), offset=col.offset * 8)
            cols[name] = self._ids(j, self.vocabs[j].lookup(keys, np.asarray(col.is_null())))
        return pa.RecordBatch.from_pydict(cols)

    def size_tables(self) -> None:
        """After the pass: a hashed field with fewer distinct ids than its table has rows gets its seen ids
        re-numbered 2.. in id order (0 stays missing; 1 is an id not seen here, e.g. when scoring new rows),
        so its table has distinct + 2 rows instead of up to `buckets`."""
        rows = []
        for j, seen in enumerate(self.seen):
            seen[0] = False  # id 0 = missing, not a hashed value
            ids = np.flatnonzero(seen).astype(np.uint64)
            small = len(ids) + 2 < self._hashed_rows(j)
            rows.append(Vocabulary.restore(ids, np.arange(2, len(ids) + 2)) if small else None)
        self.seen = None
        if any(v is not None for v in rows):
            self.rows = rows
            self.max_id[:] = 0  # re-measured from the written ids

    def _renumber(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        cols = {n: batch.column(n) for n in batch.schema.names}
        for j, name in enumerate(self.reader.sparse_names):
            ids = np.asarray(cols[name])
            if self.rows[j] is not None:
                ids = self.rows[j].lookup(ids.view(np.uint64), ids == 0)
            cols[name] = self._ids(j, ids)
        return pa.RecordBatch.from_pydict(cols)

    def _hashed_rows(self, j: int) -> int:
        if self.rows and self.rows[j] is not None:
            return self.rows[j].cardinality
        return int(min(self.buckets[j], max(self.max_id[j] + 1, 2)))

    def cardinalities(self) -> list[int]:
        """Vocab: its size + 2; hash: 1 + the largest id written (at most `buckets`), so small-valued
        fields (hour of day, gender) get small tables."""
        if self.vocabs:
            return [v.cardinality for v in self.vocabs]
        return [self._hashed_rows(j) for j in range(len(self.buckets))]

    def transforms(self) -> dict:
        cfg = self.cfg
        out = {n: {"kind": "dense", "transform": cfg.dense_transform, "missing": 0.0} for n in self.reader.dense_names}
        for j, name in enumerate(self.reader.sparse_names):
            if self.vocabs:
                v = self.vocabs[j]
                out[name] = {"kind": "sparse", "encoding": "vocab", "min_count": cfg.min_count, "vocab_size": v.size,
                             "distinct_seen": v.distinct_seen, "ids": "0 missing, 1 out-of-vocabulary, 2.. by frequency"}
            else:
                out[name] = {"kind": "sparse", "encoding": "hash", "buckets": self.buckets[j],
                             "table_rows": self._hashed_rows(j), "ids": "0 missing, 1 + key mod (buckets - 1)"}
                if self.rows and self.rows[j] is not None:
                    out[name].update({"encoding": "hash+rows", "distinct_ids": self.rows[j].size, "ids":
                                      "0 missing, 1 unseen, 2.. the distinct hashed ids (1 + key mod (buckets - 1)) "
                                      "seen, in id order"})
        return out
