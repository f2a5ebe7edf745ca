"""Batch splitting across ranks: slices put back together are the global batch, padding is marked."""

from __future__ import annotations

import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.distributed.data import PAD_LABEL, rank_rows, real_rows, select_kjt_rows, slice_batch


def _batch(rows: int) -> Batch:
    # feature a: row i has i % 3 ids (10*i, 10*i+1, ...); feature b: one id 1000+i
    lengths_a = [i % 3 for i in range(rows)]
    values_a = [10 * i + j for i in range(rows) for j in range(i % 3)]
    kjt = KeyedJaggedTensor.from_lengths_sync(
        keys=["a", "b"], values=torch.tensor(values_a + [1000 + i for i in range(rows)]),
        lengths=torch.tensor(lengths_a + [1] * rows))
    return Batch(torch.arange(rows, dtype=torch.float32).view(rows, 1), kjt, torch.arange(rows) % 2 * 1.0)


def test_rank_rows_cover_every_row_once():
    for rows in range(0, 12):
        for world in (1, 2, 3, 4):
            spans = [rank_rows(rows, r, world) for r in range(world)]
            covered = [i for start, stop, _ in spans for i in range(start, stop)]
            assert covered == list(range(rows))
            assert len({per for *_, per in spans}) == 1  # every rank the same (padded) size


def test_slices_concatenate_to_the_global_batch():
    b = _batch(7)
    dense, ids_a, ids_b, labels = [], [], [], []
    for r in range(3):
        s = slice_batch(b, r, 3)
        assert s.labels.shape[0] == 3
        keep = real_rows(s.labels)
        d = s.sparse_features.to_dict()
        dense += s.dense_features[keep].view(-1).tolist()
        ids_a += [x.tolist() for x, k in zip(d["a"].to_dense(), keep) if k]
        ids_b += [x.tolist() for x, k in zip(d["b"].to_dense(), keep) if k]
        labels += s.labels[keep].tolist()
    assert dense == list(range(7))
    assert ids_a == [[10 * i + j for j in range(i % 3)] for i in range(7)]
    assert ids_b == [[1000 + i] for i in range(7)]
    assert labels == [i % 2 * 1.0 for i in range(7)]


def test_short_rank_is_padded_with_marked_rows():
    s = slice_batch(_batch(5), 1, 2)  # rows 3, 4 and one pad
    assert s.labels.tolist()[:2] == [1.0, 0.0] and s.labels[2].item() == PAD_LABEL
    assert real_rows(s.labels).tolist() == [True, True, False]


def test_select_kjt_rows_handles_repeats_and_order():
    k = _batch(4).sparse_features
    out = select_kjt_rows(k, torch.tensor([2, 2, 0])).to_dict()
    assert [x.tolist() for x in out["a"].to_dense()] == [[20, 21], [20, 21], []]
    assert [x.tolist() for x in out["b"].to_dense()] == [[1002], [1002], [1000]]
