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
        "blocks with sparse attention": 1, "block 1 dense fc": 1, "last block dense sum": 1,
        "blocks with fm": 1, "blocks with dense-sparse merge": 1, "blocks reading the raw dense input": 2,
        "blocks reading the embeddings": 1, "total dense width": 96, "total sparse tokens": 24,
        "last block dense width": 32,
    }


def test_feature_matrix_fills_absent_features_with_zero():
    one = Arch.from_json({"format": "ctrnas-arch/1", "blocks": [_block(dense_op="dot")]})
    names, m = feature_matrix([ARCH, one])
    assert names == sorted(names) and len(m) == 2
    col = dict(zip(names, zip(*m)))
    assert col["blocks with dense dot"] == (0.0, 1.0) and col["blocks with dense sum"] == (1.0, 0.0)
    assert col["last block dense dot"] == (0.0, 1.0) and col["total dense width"] == (96.0, 64.0)
