"""Loader: exact row selection against a pyarrow read, seeded shuffling, workers, KJT layout."""

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.data.dataset import DatasetWriter, split_files
from ctrnas.data.loader import CtrBatchLoader
from ctrnas.data.schema import DatasetSchema, SparseFeature
from ctrnas.errors import CtrnasError

N = 1_000
SCHEMA = DatasetSchema("label", ("rid", "x"), (SparseFeature("a", 7), SparseFeature("b", 1000)))
ARROW = pa.schema([("label", pa.float32()), ("rid", pa.float32()), ("x", pa.float32()), ("a", pa.int64()),
                   ("b", pa.int64())])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """N train rows in 4 shards of 300 rows, row groups of <= 70 rows; `rid` is the row number."""
    d = tmp_path_factory.mktemp("tiny")
    w = DatasetWriter(d, ARROW, rows_per_shard=300)
    r = np.arange(N)
    for s in range(0, N, 70):
        i = r[s: s + 70]
        w.write("train", pa.table({"label": (i % 3 == 0).astype(np.float32), "rid": i.astype(np.float32),
                                   "x": (i * 0.5).astype(np.float32), "a": i % 7, "b": (i * 13) % 1000}))
    w.write("val", pa.table({"label": np.zeros(5, np.float32), "rid": np.arange(5, dtype=np.float32),
                             "x": np.zeros(5, np.float32), "a": np.zeros(5, np.int64), "b": np.zeros(5, np.int64)}))
    w.finish({"schema": SCHEMA.to_json()})
    return d


def _rids(loader) -> list[list[int]]:
    return [b.dense_features[:, 0].long().tolist() for b in loader]


def test_unshuffled_batches_equal_a_pyarrow_read(data):
    t = pq.read_table(split_files(data, "train"))
    ld = CtrBatchLoader(data, "train", batch_size=64)
    batches = list(ld)
    assert len(batches) == len(ld) == math.ceil(N / 64)
    dense = torch.cat([b.dense_features for b in batches]).numpy()
    assert np.array_equal(dense, np.stack([t.column("rid").to_numpy(), t.column("x").to_numpy()], 1))
    assert np.array_equal(torch.cat([b.labels for b in batches]).numpy(), t.column("label").to_numpy())
    for name in ("a", "b"):
        got = torch.cat([b.sparse_features[name].values() for b in batches]).numpy()
        assert np.array_equal(got, t.column(name).to_numpy())
    b = batches[0]
    assert b.dense_features.dtype == torch.float32 and b.labels.dtype == torch.float32
    assert b.sparse_features.keys() == ["a", "b"] and (b.sparse_features.lengths() == 1).all()
    # key-major KJT values: feature a's 64 ids, then feature b's
    assert b.sparse_features.values()[:64].tolist() == [i % 7 for i in range(64)]
    ones = torch.ones(128, dtype=torch.int32)
    ref = KeyedJaggedTensor.from_lengths_sync(["a", "b"], b.sparse_features.values(), ones)
    k = b.sparse_features
    assert k.length_per_key() == ref.length_per_key() == [64, 64] and k.offset_per_key() == ref.offset_per_key()
    assert torch.equal(k.offsets(), ref.offsets()) and k.stride() == ref.stride() == 64


def test_fraction_limit_and_offset_take_exactly_the_expected_rows(data):
    assert sum(_rids(CtrBatchLoader(data, batch_size=32, fraction=0.01)), []) == list(range(10))
    assert sum(_rids(CtrBatchLoader(data, batch_size=32, fraction=0.137)), []) == list(range(137))
    got = sum(_rids(CtrBatchLoader(data, batch_size=50, offset=10, limit=300)), [])
    assert got == list(range(10, 310))  # crosses a shard boundary at 300
    got = sum(_rids(CtrBatchLoader(data, batch_size=50, offset=990, limit=300)), [])
    assert got == list(range(990, 1000))
    # shuffling stays inside the selection: the warm-up's first 1% plus the rows right after it
    sh = sum(_rids(CtrBatchLoader(data, batch_size=8, offset=10, fraction=0.05, shuffle=True, seed=3)), [])
    assert sorted(sh) == list(range(10, 60)) and sh != list(range(10, 60))


def test_shuffled_epoch_yields_every_row_exactly_once(data):
    ld = CtrBatchLoader(data, batch_size=64, shuffle=True, seed=1, shuffle_buffer=256)
    rows = sum(_rids(ld), [])
    assert sorted(rows) == list(range(N))
    assert rows != list(range(N))
    # row-group order is shuffled: the first window draws from more than the first 256 rows
    assert max(rows[:256]) > 256


def test_same_seed_same_batches_other_seed_or_epoch_differs(data):
    kw = dict(batch_size=100, shuffle=True, shuffle_buffer=300)
    a = _rids(CtrBatchLoader(data, seed=5, **kw))
    assert a == _rids(CtrBatchLoader(data, seed=5, **kw))
    assert a != _rids(CtrBatchLoader(data, seed=6, **kw))
    ld = CtrBatchLoader(data, seed=5, **kw)
    ld.set_epoch(1)
    assert _rids(ld) != a


def test_labels_and_ids_stay_with_their_row_when_shuffled(data):
    for b in CtrBatchLoader(data, batch_size=128, shuffle=True, seed=2, shuffle_buffer=500):
        r = b.dense_features[:, 0].long()
        assert torch.equal(b.labels, (r % 3 == 0).float())
        assert torch.equal(b.dense_features[:, 1], r.float() * 0.5)
        assert torch.equal(b.sparse_features["a"].values(), r % 7)
        assert torch.equal(b.sparse_features["b"].values(), (r * 13) % 1000)


def test_drop_last_and_len(data):
    ld = CtrBatchLoader(data, batch_size=64, drop_last=True, shuffle=True, seed=0, shuffle_buffer=200)
    sizes = [len(b.labels) for b in ld]
    assert len(sizes) == len(ld) == N // 64 and set(sizes) == {64}
    assert len(CtrBatchLoader(data, batch_size=64)) == math.ceil(N / 64)
    assert len(CtrBatchLoader(data, "val", batch_size=2)) == 3
    with pytest.raises(CtrnasError, match="split 'test' has 0 rows"):  # before any training, not NaN after it
        CtrBatchLoader(data, "test", batch_size=2, shuffle=True, num_workers=2)
    assert len(CtrBatchLoader(data, "val", batch_size=2, offset=5)) == 0  # rows selected away: no error


def test_workers_yield_the_same_batches(data):
    kw = dict(batch_size=40, shuffle=True, seed=9, shuffle_buffer=200)
    one = _rids(CtrBatchLoader(data, **kw))
    two = _rids(CtrBatchLoader(data, num_workers=2, **kw))
    assert sorted(map(tuple, one)) == sorted(map(tuple, two))
    assert two == _rids(CtrBatchLoader(data, num_workers=2, **kw))  # deterministic order too


def test_with_p_true_follows_its_rows(tmp_path):
    from ctrnas.data.dataset import load_schema
    from ctrnas.data.synthetic import generate

    generate("avazu", 2_000, seed=0, out=tmp_path, chunk_rows=2048, calibration_rows=4096, cardinality_cap=100)
    names = load_schema(tmp_path).sparse_names
    t = pq.read_table(split_files(tmp_path, "val"))
    # avazu's only dense feature is constant, so p_true is a function of the sparse ids alone
    ids = np.stack([t.column(c).to_numpy() for c in names], 1)
    truth = dict(zip(map(tuple, ids.tolist()), t.column("p_true").to_numpy()))
    got = 0
    for b, p in CtrBatchLoader(tmp_path, "val", batch_size=64, shuffle=True, seed=1, with_p_true=True):
        rows = np.stack([b.sparse_features[c].values().numpy() for c in names], 1)
        assert p.dtype == torch.float64 and [truth[tuple(r)] for r in rows.tolist()] == p.tolist()
        got += len(p)
    assert got == t.num_rows


def test_with_p_true_needs_the_column_and_bad_arguments_are_errors(data):
    with pytest.raises(CtrnasError, match="p_true"):
        CtrBatchLoader(data, with_p_true=True)
    with pytest.raises(CtrnasError, match="fraction"):
        CtrBatchLoader(data, fraction=1.5)
    with pytest.raises(CtrnasError, match="offset"):
        CtrBatchLoader(data, offset=N + 1)
    with pytest.raises(CtrnasError, match="split"):
        CtrBatchLoader(data, "dev")


def test_batches_feed_the_embedding_stem(data):
    from ctrnas.supernet.stem import EmbeddingStem

    b = next(iter(CtrBatchLoader(data, batch_size=16)))
    stem = EmbeddingStem(SCHEMA, dim=4)
    out = stem(b.sparse_features)
    w = stem.ebc.embedding_bags["t_b"].weight
    assert out.shape == (16, 2, 4) and torch.allclose(out[:, 1], w[torch.arange(16) * 13 % 1000])


@settings(max_examples=25, deadline=None)
@given(offset=st.integers(0, N), limit=st.one_of(st.none(), st.integers(0, 2 * N)),
       fraction=st.one_of(st.none(), st.floats(0.001, 1.0)), batch=st.integers(1, 400), shuffle=st.booleans())
def test_any_selection_is_the_expected_row_range(data, offset, limit, fraction, batch, shuffle):
    n = N - offset
    if fraction is not None:
        n = min(n, math.ceil(fraction * N - 1e-9))
    if limit is not None:
        n = min(n, limit)
    ld = CtrBatchLoader(data, batch_size=batch, offset=offset, limit=limit, fraction=fraction, shuffle=shuffle,
                        seed=offset, shuffle_buffer=300)
    rows = _rids(ld)
    assert len(rows) == len(ld) and all(len(r) == batch for r in rows[:-1])
    got = sum(rows, [])
    assert (sorted(got) if shuffle else got) == list(range(offset, offset + n))
