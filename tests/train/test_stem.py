"""The embedding stem: lookups equal a hand indexing of the tables, row caps fold ids by modulo, and
sparse-gradient mode gives the same gradient as dense mode, as a row-sparse tensor."""

from __future__ import annotations

import torch

from ctrnas.data.schema import DatasetSchema, SparseFeature
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.train.batches import make_batch

SCHEMA = DatasetSchema("label", ("I0",), (SparseFeature("a", 10), SparseFeature("b", 7)))


def _batch(ids):
    ids = torch.tensor(ids, dtype=torch.int64)
    return make_batch(torch.zeros(len(ids), 1), ids, torch.zeros(len(ids)), SCHEMA.sparse_names)


def test_lookup_equals_table_rows_and_row_cap_folds_ids():
    stem = EmbeddingStem(SCHEMA, dim=3, row_cap=4)
    tables = stem.embedding_parameters()
    assert [t.shape[0] for t in tables] == [4, 4]
    b = _batch([[9, 6], [2, 3]])
    out = stem(b.sparse_features)
    want = torch.stack([torch.stack([tables[0][9 % 4], tables[1][6 % 4]]),
                        torch.stack([tables[0][2], tables[1][3]])])
    assert out.shape == (2, 2, 3)
    torch.testing.assert_close(out, want)


def test_sparse_gradients_equal_dense_ones():
    stem = EmbeddingStem(SCHEMA, dim=2)
    b = _batch([[1, 2], [1, 5], [3, 2]])
    w = torch.randn(3, 2, 2)
    (stem(b.sparse_features) * w).sum().backward()
    dense_grads = [t.grad.clone() for t in stem.embedding_parameters()]
    stem.zero_grad(set_to_none=True)
    stem.use_sparse_gradients()
    assert stem.sparse_gradients
    (stem(b.sparse_features) * w).sum().backward()
    for g_dense, t in zip(dense_grads, stem.embedding_parameters()):
        assert t.grad.is_sparse
        torch.testing.assert_close(t.grad.to_dense(), g_dense)
    # only looked-up rows carry gradient: feature a used ids {1, 3}
    assert set(stem.embedding_parameters()[0].grad.coalesce().indices()[0].tolist()) == {1, 3}
