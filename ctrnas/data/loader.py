"""TorchRec batches streamed from a prepared dataset folder.

Row selection, then shuffling:
  1. The split's rows in file order (shards in order, rows in order) are numbered 0..N-1. The loader takes
     rows [offset, offset + n) with n = min(N - offset, ceil(fraction * N), limit): `fraction` is a share of
     the whole split, so `fraction=0.01` is the warm-up's first 1% and `offset=ceil(0.01 * N)` starts right
     after it. Shuffling never brings in rows from outside this range.
  2. With `shuffle`, the selected pieces of Parquet row groups are put in a seeded random order, the rows
     laid end to end, cut into windows of `shuffle_buffer` rows (rounded down to whole batches), and each
     window is permuted by its own generator seeded with (seed, epoch, window). Every selected row appears
     exactly once per epoch; the same (seed, epoch) gives the same batches.
  3. With `num_workers` > 0, each DataLoader worker streams a contiguous block of windows. A batch's content
     depends only on (seed, epoch, window), so workers yield the same batches as a single process; only
     the order in which they interleave differs (deterministic for a given num_workers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow.parquet as pq
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.data.arrow import column_numpy
from ctrnas.data.dataset import read_meta, require_rows, split_files
from ctrnas.data.schema import DatasetSchema
from ctrnas.errors import CtrnasError
from ctrnas.safeload import parquet_errors, parquet_file

_READ_ROWS = 65_536  # pyarrow record batch size when streaming a row group
_SLAB_ROWS = 32_768  # rows per message from a window to the consumer (one shared-memory transfer per slab)


def fraction_rows(rows: int, fraction: float) -> int:
    """Rows in the first `fraction` of a split of `rows`: ceil(fraction * rows) (0 for fraction <= 0). The one
    place this rounding lives: the loader, the in-memory batches and the pipeline's row offsets all use it."""
    if fraction <= 0.0:
        return 0
    return min(rows, math.ceil(fraction * rows - 1e-9))  # guard 0.07 * 100 = 7.000000000000001


@dataclass(frozen=True)
class _Piece:
    """Rows [lo, hi) of one Parquet row group (row numbers within the row group)."""

    file: int
    row_group: int
    lo: int
    hi: int


def _select(files: list[Path], offset: int, n: int) -> list[_Piece]:
    """The row-group pieces covering split rows [offset, offset + n), in file order."""
    out, start, stop = [], offset, offset + n
    pos = 0
    for fi, f in enumerate(files):
        md = parquet_file(f, "data shard").metadata
        for rg in range(md.num_row_groups):
            m = md.row_group(rg).num_rows
            lo, hi = max(start, pos), min(stop, pos + m)
            if lo < hi:
                out.append(_Piece(fi, rg, lo - pos, hi - pos))
            pos += m
    return out


class CtrBatchLoader:
    """Iterates `torchrec.datasets.utils.Batch`es (or `(Batch, p_true)` pairs with `with_p_true`)."""

    def __init__(self, data_dir: str | Path, split: str = "train", batch_size: int = 512, *, shuffle: bool = False,
                 seed: int = 0, fraction: float | None = None, limit: int | None = None, offset: int = 0,
                 drop_last: bool = False, num_workers: int = 0, with_p_true: bool = False,
                 shuffle_buffer: int = 262_144, epoch: int = 0):
        if batch_size < 1:
            raise CtrnasError(f"loader: batch_size must be >= 1, got {batch_size}")
        if seed < 0:
            raise CtrnasError(f"loader: seed must be >= 0, got {seed}")
        if fraction is not None and not 0 < fraction <= 1:
            raise CtrnasError(f"loader: fraction must be in (0, 1], got {fraction}")
        meta = read_meta(data_dir)
        self.schema = DatasetSchema.from_json(meta["schema"])
        self.files = split_files(data_dir, split)
        self.split_rows = require_rows(data_dir, split)  # an empty split fails here, before any training
        if not 0 <= offset <= self.split_rows:
            raise CtrnasError(f"loader: offset {offset} outside split {split!r} of {self.split_rows} rows")
        if limit is not None and limit < 0:
            raise CtrnasError(f"loader: limit must be >= 0, got {limit}")
        n = self.split_rows - offset
        if fraction is not None:
            n = min(n, fraction_rows(self.split_rows, fraction))
        if limit is not None:
            n = min(n, limit)
        self.rows, self.offset = n, offset
        self.batch_size, self.shuffle, self.seed, self.epoch = batch_size, shuffle, seed, epoch
        self.drop_last, self.num_workers, self.with_p_true = drop_last, num_workers, with_p_true
        self.window = max(1, shuffle_buffer // batch_size) * batch_size
        self.columns = [self.schema.label, *self.schema.dense, *self.schema.sparse_names]
        if with_p_true:
            if self.files and "p_true" not in parquet_file(self.files[0], "data shard").schema_arrow.names:
                raise CtrnasError(f"{data_dir}: with_p_true needs a 'p_true' column (synthetic data only)")
            self.columns.append("p_true")
        self.pieces = _select(self.files, offset, n)
        self._layout: dict[int, tuple] = {}

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for another epoch (shuffle order is a function of (seed, epoch))."""
        self.epoch = epoch

    def __len__(self) -> int:
        return self.rows // self.batch_size if self.drop_last else math.ceil(self.rows / self.batch_size)

    def __iter__(self) -> Iterator:
        stream = _WindowStream(self)
        if self.num_workers > 0:
            it = iter(DataLoader(stream, batch_size=None, num_workers=self.num_workers))
        else:
            it = iter(stream)
        for dense, sparse, labels, p_true in it:
            g = sparse.shape[0]
            b = len(labels) // g
            for i in range(g):
                s, e = i * b, (i + 1) * b
                kjt = self._kjt(sparse[i], b)
                batch = Batch(dense_features=dense[s:e], sparse_features=kjt, labels=labels[s:e])
                yield (batch, p_true[s:e]) if self.with_p_true else batch

    def _kjt(self, values: torch.Tensor, b: int) -> KeyedJaggedTensor:
        """What `KeyedJaggedTensor.from_lengths_sync` builds, with its per-key sums given rather than computed:
        every length is 1, and summing lengths per batch measured ~0.1 s at B=4096 on a busy CPU."""
        cached = self._layout.get(b)
        if cached is None:
            nf = len(self.schema.sparse)
            cached = self._layout[b] = (torch.ones(b * nf, dtype=torch.int32),
                                        torch.arange(b * nf + 1, dtype=torch.int32), [b] * nf,
                                        [i * b for i in range(nf + 1)])
        lengths, offsets, per_key, offset_per_key = cached
        return KeyedJaggedTensor(keys=list(self.schema.sparse_names), values=values, lengths=lengths,
                                 offsets=offsets, stride=b, length_per_key=list(per_key),
                                 offset_per_key=list(offset_per_key))


class _WindowStream(IterableDataset):
    """Yields slabs (dense, sparse ids [batches, F*B] in KJT order, labels, p_true).

    Worker w of n takes windows [K*w/n, K*(w+1)/n) of the K windows."""

    def __init__(self, loader: CtrBatchLoader):
        super().__init__()
        self.ld = loader

    def __iter__(self):
        ld = self.ld
        windows = math.ceil(ld.rows / ld.window)
        info = get_worker_info()
        w, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        k0, k1 = windows * w // nw, windows * (w + 1) // nw
        pieces = list(ld.pieces)
        if ld.shuffle:
            order = np.random.default_rng([ld.seed, ld.epoch]).permutation(len(pieces))
            pieces = [pieces[i] for i in order]
        rows = _Rows(_read(ld, pieces, k0 * ld.window, min(k1 * ld.window, ld.rows)))
        for k in range(k0, k1):
            cols = rows.take(min(ld.window, ld.rows - k * ld.window))
            yield from self._slabs(k, cols, last=k == windows - 1)

    def _slabs(self, k: int, cols: list[np.ndarray], last: bool):
        """A window as slabs of whole batches in batch layout, so workers send one message per slab."""
        ld, sch = self.ld, self.ld.schema
        m, b = len(cols[0]), ld.batch_size
        nd, ns, full = len(sch.dense), len(sch.sparse), m // b
        idx = np.random.default_rng([ld.seed, ld.epoch, k]).permutation(m) if ld.shuffle else None
        labels = _gather(cols[0], idx, np.empty(m, np.float32))  # a copy: Arrow buffers are read-only
        p_true = _gather(cols[-1], idx, np.empty(m, np.float64)) if ld.with_p_true else np.empty(0)
        dense = np.empty((m, nd), dtype=np.float32)
        for j in range(nd):
            _gather(cols[1 + j], idx, dense[:, j])
        # KJT values are key-major (all rows of feature 0, then feature 1, ...): lay out [batches, F, B] once
        sparse = np.empty((full, ns, b), dtype=np.int64)
        head = None if idx is None else idx[: full * b].reshape(full, b)
        for f in range(ns):
            _gather(cols[1 + nd + f][: full * b].reshape(full, b) if idx is None else cols[1 + nd + f], head,
                    sparse[:, f, :])
        g = max(1, _SLAB_ROWS // b)
        for i0 in range(0, full, g):
            i1 = min(full, i0 + g)
            s, e = i0 * b, i1 * b
            yield (torch.from_numpy(dense[s:e]), torch.from_numpy(sparse[i0:i1].reshape(i1 - i0, ns * b)),
                   torch.from_numpy(labels[s:e]), torch.from_numpy(p_true[s:e] if ld.with_p_true else p_true))
        s = full * b
        if s < m and not (ld.drop_last and last):
            tail = [c[s:] if idx is None else c[idx[s:]] for c in cols[1 + nd: 1 + nd + ns]]
            yield (torch.from_numpy(dense[s:]), torch.from_numpy(np.concatenate(tail).reshape(1, -1)),
                   torch.from_numpy(labels[s:]), torch.from_numpy(p_true[s:] if ld.with_p_true else p_true))


def _gather(src: np.ndarray, idx: np.ndarray | None, out: np.ndarray) -> np.ndarray:
    """out = src[idx] (or src when idx is None) in one pass, written in place (out may be strided)."""
    if idx is None:
        out[...] = src
    else:
        np.take(src, idx, out=out, mode="clip")  # 'clip' skips take's buffered copy; idx is in range
    return out


def _read(ld: CtrBatchLoader, pieces: list[_Piece], start: int, stop: int):
    """Column arrays of virtual rows [start, stop) of the laid-out pieces, streamed in record batches."""
    handles: dict[int, pq.ParquetFile] = {}
    pos = 0
    for p in pieces:
        size = p.hi - p.lo
        a, z = max(start, pos), min(stop, pos + size)
        pos += size
        if a >= z:
            if pos >= stop:
                break
            continue
        lo, hi = p.lo + (a - (pos - size)), p.lo + (z - (pos - size))  # rows within the row group
        pf = handles.get(p.file) or handles.setdefault(p.file, parquet_file(ld.files[p.file], "data shard"))
        at = 0
        with parquet_errors(ld.files[p.file], "data shard"):  # a page damaged past its footer
            for rb in pf.iter_batches(batch_size=_READ_ROWS, row_groups=[p.row_group], columns=ld.columns):
                r0, r1 = max(lo, at), min(hi, at + rb.num_rows)
                if r0 < r1:
                    yield [column_numpy(rb.column(i))[r0 - at: r1 - at]
                           for i in range(rb.num_columns)]
                at += rb.num_rows
                if at >= hi:
                    break


class _Rows:
    """Takes exactly m rows at a time from a stream of column-array chunks, keeping the unused rest."""

    def __init__(self, chunks):
        self.chunks, self.rest = chunks, None

    def take(self, m: int) -> list[np.ndarray]:
        parts, have = [], 0
        while have < m:
            c = self.rest if self.rest is not None else next(self.chunks)
            self.rest = None
            need = m - have
            if len(c[0]) > need:
                c, self.rest = [x[:need] for x in c], [x[need:] for x in c]
            parts.append(c)
            have += len(c[0])
        if len(parts) == 1:
            return parts[0]
        return [np.concatenate([p[i] for p in parts]) for i in range(len(parts[0]))]
