"""Architecture features: hand-counted on a two-block architecture."""

from ctrnas.space import Arch
from ctrnas.space.features import arch_features, feature_matrix


def _block(**kw):
    b = {"dense_idx": [0], "sparse_idx": [0], "dense_left_idx": 0, "dense_right_idx": 0, "dense_op": "fc",
         "sparse_op": "efc", "dense_dim": 64, "sparse_tokens": 8, "dense_sparse_merge": False, "fm": True}
    b.update(kw)
    return b


ARCH = Arch.from_json({"format": "ctrnas-arch/1", "blocks": [
    _block(),
    # Sum reads left/right (stem and block 1), not dense_idx; its sparse input is block 1 only
    _block(dense_idx=[1], sparse_idx=[1], dense_left_idx=0, dense_right_idx=1, dense_op="sum",
           sparse_op="attention", dense_dim=32, sparse_tokens=16, dense_sparse_merge=True, fm=False),
]})


def test_features_of_a_hand_built_arch():
    f = arch_features(ARCH)
    assert f == {
        "blocks with dense fc": 1, "blocks with dense sum": 1, "blocks with sparse efc": 1,
        "blocks with sparse attention": 1, "first dense op fc": 1, "last block dense sum": 1,
        "blocks with fm": 1, "blocks with dense-sparse merge": 1, "blocks reading the raw dense input": 2,
        "blocks reading the embeddings": 1, "total dense width": 96, "total sparse tokens": 24,
        "last block dense width": 32,
    }


def test_parts_the_output_does_not_read_do_not_count():
    # block 2 reads nothing of block 1 (stem only) and block 3 reads only block 2's dense output, so block 1
    # is dead and block 2's sparse part (attention) is dead; block 3 is the last block, always computed
    dead = Arch.from_json({"format": "ctrnas-arch/1", "blocks": [
        _block(dense_op="dot", dense_dim=256),
        _block(sparse_op="attention", fm=False, dense_dim=16),
        _block(dense_idx=[2], sparse_idx=[0], fm=False, dense_dim=32),
    ]})
    assert set(dead.live_parts()) == {2, 3} and not dead.live_parts()[2].sparse
    f = arch_features(dead)
    assert "blocks with dense dot" not in f and "blocks with sparse attention" not in f
    assert f["blocks with dense fc"] == 2 and f["first dense op fc"] == 1 and f["blocks with sparse efc"] == 1
    assert f["total dense width"] == 48 and f["total sparse tokens"] == 8 and f["blocks with fm"] == 0
    assert f["blocks reading the raw dense input"] == 1 and f["blocks reading the embeddings"] == 1


def test_feature_matrix_fills_absent_features_with_zero():
    one = Arch.from_json({"format": "ctrnas-arch/1", "blocks": [_block(dense_op="dot")]})
    names, m = feature_matrix([ARCH, one])
    assert names == sorted(names) and len(m) == 2
    col = dict(zip(names, zip(*m)))
    assert col["blocks with dense dot"] == (0.0, 1.0) and col["blocks with dense sum"] == (1.0, 0.0)
    assert col["last block dense dot"] == (0.0, 1.0) and col["total dense width"] == (96.0, 64.0)


def test_interaction_reads_the_embeddings_and_none_has_no_tokens():
    # block 2's interaction reads the raw embeddings whatever its sparse_idx ([1]) says; its `none` sparse
    # op makes no tokens and reads nothing, so block 1's sparse part is dead
    arch = Arch.from_json({"format": "ctrnas-arch/1", "blocks": [
        _block(fm=False),
        _block(dense_idx=[1], sparse_idx=[1], dense_op="interaction", sparse_op="none", fm=False, dense_dim=16),
    ]})
    assert not arch.live_parts()[1].sparse
    f = arch_features(arch)
    assert f["blocks reading the embeddings"] == 1 and f["blocks with sparse none"] == 1
    assert f["total sparse tokens"] == 0 and "blocks with sparse efc" not in f
    assert f["first dense op fc"] == 1 and f["last block dense interaction"] == 1
