"""Split each global batch across ranks, so N ranks together train on exactly the batches one process would.

Rank r takes rows [r*P, (r+1)*P) of a global batch of B rows, P = ceil(B / N). TorchRec's sharded
backward needs the same batch size on every rank (its all-gathers are fixed-size), so a rank left short
(the last rank, or the last batch of an epoch) is padded with copies of row 0 whose label is `PAD_LABEL`;
the trainer gives those rows zero weight and evaluation drops them. Concatenating the ranks' real rows in
rank order gives the global batch back, which is what makes N ranks' loss trajectory equal one process's.
"""

from __future__ import annotations

import math
from typing import Iterator

import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

PAD_LABEL = -1.0


def rank_rows(rows: int, rank: int, world_size: int) -> tuple[int, int, int]:
    """(start, stop, per_rank): rank's real rows are [start, stop); it is padded up to per_rank rows."""
    per = max(math.ceil(rows / world_size), 1)
    start = min(rank * per, rows)
    return start, min(start + per, rows), per


def select_kjt_rows(kjt: KeyedJaggedTensor, rows: torch.Tensor) -> KeyedJaggedTensor:
    """The KJT of the given rows (any order, repeats allowed) of every key; any number of ids per row."""
    keys, b = kjt.keys(), kjt.stride()
    lengths = kjt.lengths().view(len(keys), b).long()
    starts = (torch.cumsum(kjt.lengths().long(), 0) - kjt.lengths().long()).view(len(keys), b)
    sel_len, sel_start = lengths[:, rows].reshape(-1), starts[:, rows].reshape(-1)
    total = int(sel_len.sum())
    # position j of the output reads values[start of its segment + its offset within the segment]
    seg = torch.repeat_interleave(torch.arange(sel_len.numel()), sel_len)
    within = torch.arange(total) - torch.repeat_interleave(torch.cumsum(sel_len, 0) - sel_len, sel_len)
    index = sel_start[seg] + within
    weights = kjt.weights_or_none()
    return KeyedJaggedTensor(keys=keys, values=kjt.values()[index], lengths=sel_len.to(kjt.lengths().dtype),
                             weights=None if weights is None else weights[index], stride=int(rows.numel()))


def slice_batch(batch: Batch, rank: int, world_size: int) -> Batch:
    """This rank's rows of a global batch, padded to the common per-rank size (padding labelled PAD_LABEL)."""
    n = batch.labels.shape[0]
    start, stop, per = rank_rows(n, rank, world_size)
    real = stop - start
    rows = torch.cat([torch.arange(start, stop), torch.zeros(per - real, dtype=torch.long)])
    labels = batch.labels[rows].clone()
    labels[real:] = PAD_LABEL
    return Batch(dense_features=batch.dense_features[rows],
                 sparse_features=select_kjt_rows(batch.sparse_features, rows), labels=labels)


def real_rows(labels: torch.Tensor) -> torch.Tensor:
    """Mask of the rows that are data, not padding."""
    return labels != PAD_LABEL


class RankBatches:
    """A BatchSource (see `ctrnas.train.batches`) that yields this rank's slice of every global batch.

    `len()` stays the number of global batches, so every rank takes the same number of steps and the
    collectives line up. Every rank reads the whole global batch and keeps its slice: simple and exact; a
    loader that reads only its own rows is the next step when reading, not the model, is the bottleneck.
    """

    def __init__(self, source, rank: int, world_size: int):
        self.source, self.rank, self.world_size = source, rank, world_size
        self.rows = source.rows

    def __len__(self) -> int:
        return len(self.source)

    def batches(self, start: int = 0, epoch: int = 0) -> Iterator[Batch]:
        for batch in self.source.batches(start, epoch):
            yield slice_batch(batch, self.rank, self.world_size)
