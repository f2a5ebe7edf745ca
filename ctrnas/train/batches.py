"""Batch sources the trainer reads: anything with `len()` (batches per epoch), `rows`, and
`batches(start)` yielding `torchrec.datasets.utils.Batch` from batch number `start` on, in the same
order every time (so a run resumed at step k sees exactly the batches an uninterrupted run saw).

`TensorBatches` holds a small dataset in memory (tests, synthetic checks); `dataset_batches` adapts
`ctrnas.data.loader` to the same protocol for prepared dataset folders. `TensorRows` holds the rows a fitness
scores on (`ctrnas.pipeline.fitness`) and cuts them into batches built as the trainer's are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Protocol, Sequence

import numpy as np
import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.data.loader import fraction_rows


class BatchSource(Protocol):
    rows: int

    def __len__(self) -> int: ...

    def batches(self, start: int = 0, epoch: int = 0) -> Iterator[Batch]: ...


def make_batch(dense: torch.Tensor, ids: torch.Tensor, labels: torch.Tensor, names: Sequence[str]) -> Batch:
    """A Batch from [B, n_dense] floats, [B, F] int64 ids (one per row and feature) and [B] labels."""
    b, f = ids.shape
    kjt = KeyedJaggedTensor.from_lengths_sync(
        keys=list(names), values=ids.t().reshape(-1).contiguous(), lengths=torch.ones(b * f, dtype=torch.int32))
    return Batch(dense_features=dense.float(), sparse_features=kjt, labels=labels.float())


@dataclass
class TensorRows:
    """Rows held in memory: dense [N, n_dense] float32, ids [N, F] int64 (one per feature), labels [N]."""

    dense: torch.Tensor
    ids: torch.Tensor
    labels: torch.Tensor
    names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def slice(self, start: int, stop: int) -> "TensorRows":
        return TensorRows(self.dense[start:stop], self.ids[start:stop], self.labels[start:stop], self.names)

    def batch(self, start: int, stop: int, device: torch.device | None = None
              ) -> tuple[torch.Tensor, KeyedJaggedTensor, torch.Tensor]:
        """(dense, KJT, labels) of rows [start, stop), built as the trainer's in-memory batches are, on
        `device` when given (the scored model's)."""
        b = make_batch(self.dense[start:stop], self.ids[start:stop], self.labels[start:stop], self.names)
        if device is not None and device.type != "cpu":
            b = b.to(device, non_blocking=True)
        return b.dense_features, b.sparse_features, b.labels

    def batches(self, batch_size: int, limit: int | None = None, device: torch.device | None = None
                ) -> list[tuple[torch.Tensor, KeyedJaggedTensor, torch.Tensor]]:
        n = len(self) if limit is None else min(limit, len(self))
        return [self.batch(s, min(s + batch_size, n), device) for s in range(0, n, batch_size)]


class TensorBatches:
    """In-memory rows served in batches; optional seeded shuffle, then the first `fraction` of them."""

    def __init__(self, dense: torch.Tensor, ids: torch.Tensor, labels: torch.Tensor, names: Sequence[str],
                 batch_size: int, shuffle_seed: int | None = None, fraction: float = 1.0):
        n = labels.shape[0]
        order = np.arange(n)
        if shuffle_seed is not None:
            order = np.random.default_rng(shuffle_seed).permutation(n)
        self.order = torch.from_numpy(order[: fraction_rows(n, fraction)])
        self.dense, self.ids, self.labels, self.names = dense, ids, labels, list(names)
        self.batch_size = batch_size
        self.rows = len(self.order)

    def __len__(self) -> int:
        return math.ceil(self.rows / self.batch_size)

    def batches(self, start: int = 0, epoch: int = 0) -> Iterator[Batch]:
        for i in range(start, len(self)):
            idx = self.order[i * self.batch_size:(i + 1) * self.batch_size]
            yield make_batch(self.dense[idx], self.ids[idx], self.labels[idx], self.names)


class LoaderBatches:
    """A `ctrnas.data.loader.CtrBatchLoader` as a BatchSource: each epoch reshuffles by (seed, epoch), and
    `start` skips whole batches (they are read but not trained on, so a resumed run sees the same ones)."""

    def __init__(self, loader):
        self.loader = loader
        self.rows = loader.rows

    def __len__(self) -> int:
        return len(self.loader)

    def batches(self, start: int = 0, epoch: int = 0) -> Iterator[Batch]:
        self.loader.set_epoch(epoch)
        for i, batch in enumerate(self.loader):
            if i >= start:
                yield batch


def dataset_batches(data_dir, split: str, batch_size: int, *, shuffle: bool = False, seed: int = 0,
                    fraction: float | None = None, limit: int | None = None, offset: int = 0) -> LoaderBatches:
    """Batches of one split of a prepared dataset folder (see `ctrnas.data.loader`)."""
    from ctrnas.data.loader import CtrBatchLoader

    return LoaderBatches(CtrBatchLoader(data_dir, split, batch_size, shuffle=shuffle, seed=seed,
                                        fraction=fraction, limit=limit, offset=offset))
