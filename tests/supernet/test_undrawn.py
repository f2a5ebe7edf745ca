"""A supernet built undrawn (zeros where its modules would draw) exports with fresh weights the same model,
weight for weight, as a drawn one, and leaves the global RNG as it was. (Loading a saved model builds one
undrawn: the save and load tests of tests/supernet and tests/serve cover that path.)"""

import numpy as np
import pytest
import torch

from ctrnas.space import get_space
from ctrnas.supernet import export
from ctrnas.supernet.fresh import build_supernet, undrawn
from ctrnas.supernet.testing import make_schema

SCHEMA = make_schema(n_dense=5, cards=(40, 7, 30, 11, 60))
SPACES = {  # every block type at small widths; table and first-order choices too
    "nasrec-full": {"base": "nasrec-full", "num_blocks": 4, "dense_dims": [8, 12], "sparse_tokens": [2, 3],
                    "attention_heads": 2},
    "ctrnas-small-cin": {"base": "ctrnas-small-cin", "num_blocks": 4, "dense_dims": [8, 12],
                         "sparse_tokens": [2, 3], "table_dims": [0, 4, 8, 16], "emb_dims": [8, 16]},
}


def _archs(space, n: int, seed: int):
    rng = np.random.default_rng(seed)
    return [space.sample(rng) for _ in range(n)]


def _assert_same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], atol=0, rtol=0, msg=k)


@pytest.mark.parametrize("name", sorted(SPACES))
def test_a_fresh_export_of_an_undrawn_supernet_is_the_drawn_ones(name):
    space = get_space(SPACES[name]).for_fields(SCHEMA.sparse_names, 16)
    drawn = build_supernet(SCHEMA, space, seed=3, row_cap=25)
    state = torch.random.get_rng_state()
    bare = build_supernet(SCHEMA, space, None, row_cap=25, drawn=False)
    assert torch.equal(state, torch.random.get_rng_state())
    # nothing was drawn: every weight is a zero, or a one where a LayerNorm scale starts
    values = torch.cat([p.detach().flatten().unique() for p in bare.parameters()]).unique()
    assert set(values.tolist()) <= {0.0, 1.0}
    archs = _archs(space, 12, seed=0)
    if space.config.emb_dims:  # the other-width path is covered
        assert any(a.emb_dim not in (None, drawn.emb_dim) for a in archs)
    for i, arch in enumerate(archs):
        for dense_init in ("nasrec", "torchrec"):
            _assert_same_weights(export(drawn, arch, init="fresh", seed=i, dense_init=dense_init),
                                 export(bare, arch, init="fresh", seed=i, dense_init=dense_init))


def test_undrawn_modules_do_not_draw():
    torch.manual_seed(0)
    before = torch.random.get_rng_state()
    with undrawn():
        lin, emb = torch.nn.Linear(5, 3), torch.nn.EmbeddingBag(7, 4)
        w = torch.nn.init.xavier_normal_(torch.empty(3, 3))
    assert torch.equal(before, torch.random.get_rng_state())
    assert not any(t.detach().any() for t in (lin.weight, lin.bias, emb.weight, w))
