"""CIN (xDeepFM) in the supernet: a hand-computed layer, slices equal the xDeepFM baseline's own CIN on the same
weights, export equals the supernet path (values and gradients), and hand-counted params/FLOPs."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ctrnas.space import get_space
from ctrnas.space.baselines import baseline_arch, home_space
from ctrnas.supernet import Supernet, count_flops, count_params, export
from ctrnas.supernet.blocks.base import OpInput
from ctrnas.supernet.blocks.cin import CIN, MAX_MAPS, cin_layers
from ctrnas.supernet.layout import BlockIO, Dims
from ctrnas.supernet.testing import make_batch, make_schema
from ctrnas.train.baselines.xdeepfm import CIN as BaselineCIN
from tests.supernet.test_export_equivalence import TINY, check_equal

DIMS = Dims(n_dense=3, n_sparse=4, emb=2, max_dense=6, max_tokens=3, merge_tokens=0, heads=1, layernorm=True)


def _io(d, dense_in=3, **args):
    return BlockIO(index=1, dense_ops=("cin",), dense_args=tuple(sorted(args.items())), sparse_ops=(),
                   dense_idx=(0,), sparse_idx=(0,), left=0, right=0, dense_dim=d, tokens=0, merge=False, fm=False,
                   dense_in=dense_in, dense_cols=tuple(range(dense_in)), tok_in=0, tok_cols=(), left_w=0, right_w=0)


def test_one_layer_by_hand():
    """Two tokens a, b of width 1 and one map: x1 = ReLU(w . [aa, ab, ba, bb] + c); a second layer of one map
    reads [x1 a, x1 b]."""
    a, b = 2.0, -1.0
    x0 = torch.tensor([[[a], [b]]])
    w1, c1 = torch.tensor([[0.5, 1.0, -2.0, 3.0]]), torch.tensor([0.25])
    x1 = max(0.0, 0.5 * a * a + 1.0 * a * b - 2.0 * b * a + 3.0 * b * b + 0.25)  # 2 - 2 + 4 + 3 + 0.25 = 7.25
    w2, c2 = torch.tensor([[1.0, 2.0]]), torch.tensor([-1.0])
    x2 = max(0.0, 1.0 * x1 * a + 2.0 * x1 * b - 1.0)  # 14.5 - 14.5 - 1 -> 0
    assert x1 == 7.25 and x2 == 0.0
    out = cin_layers(x0, [(w1, c1), (w2, c2)])
    torch.testing.assert_close(out, torch.tensor([[x1, x2]]))


def test_the_subnet_path_is_the_xdeepfm_baselines_cin_on_the_sliced_weights():
    """depth 2 of 8 maps: the xDeepFM baseline's CIN (its own module) loaded with the first 8 rows of each layer
    (and, in layer 2, the columns of the first 8 maps' pairs), then the projection's columns of those maps."""
    torch.manual_seed(0)
    op = CIN(DIMS, 1)
    dense, raw = torch.randn(5, 3), torch.randn(5, 4, 2)
    io = _io(6, depth=2, maps=8)
    y = op(io, OpInput(dense, raw, None, None, None, None, raw))
    m = 5  # z and 4 fields
    ref = BaselineCIN(m, (8, 8))
    with torch.no_grad():
        ref.layers[0].weight.copy_(op.layers[0].weight[:8])
        ref.layers[0].bias.copy_(op.layers[0].bias[:8])
        ref.layers[1].weight.copy_(op.layers[1].weight[:8, :8 * m])
        ref.layers[1].bias.copy_(op.layers[1].bias[:8])
    z = F.linear(dense, op.proj.weight, op.proj.bias)
    pooled = ref(torch.cat([z.unsqueeze(1), raw], dim=1))
    cols = list(range(8)) + list(range(MAX_MAPS, MAX_MAPS + 8))
    lin = F.linear(pooled, op.lin.weight[:6][:, cols], op.lin.bias[:6])
    torch.testing.assert_close(y, torch.relu(F.layer_norm(lin, (6,), op.ln.weight[:6], op.ln.bias[:6])))


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # the shipped dense_part.pt
def test_export_equals_supernet_path_for_archs_with_cin():
    torch.manual_seed(0)
    schema = make_schema()
    space = get_space({"base": "ctrnas-small", **TINY, "dense_ops": ["fc", "dot", "cross", "cin", "concat"]})
    net = Supernet(schema, space)
    batch = make_batch(schema, batch=8, seed=1)
    dense, kjt, _ = batch
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(40):
        arch = space.sample(rng)
        cin = [arch.blocks[i - 1] for i, p in arch.live_parts().items()
               if p.dense and arch.blocks[i - 1].dense_op == "cin"]
        if not cin:
            continue
        shapes = {(b.arg("depth"), b.arg("maps")) for b in cin}
        new, seen = shapes - seen, seen | shapes
        check_equal(net, arch, batch)  # values, and gradients equal to the supernet's at the slices
        model = export(net, arch)
        y = net(dense, kjt, arch)
        if new:  # scripting costs a tenth of a second: once per CIN shape
            torch.testing.assert_close(torch.jit.script(model.net)(dense, model.stem(kjt)), y, atol=1e-5, rtol=1e-5)
        assert count_params(schema, space, arch) == sum(p.numel() for p in model.net.parameters())
    assert len(seen) >= 5
    assert torch.isfinite(net(dense, kjt, full=True)).all()  # the full supernet runs the CIN at its largest


def test_params_and_flops_by_hand():
    """dense_in 3 -> E = 2 projection, m = 5 tokens, 2 layers of 8 maps, 16 pooled -> 6, LN(6)."""
    p, f = CIN.cost(DIMS, _io(6, depth=2, maps=8))
    assert p == (3 * 2 + 2) + (25 * 8 + 8) + (40 * 8 + 8) + (16 * 6 + 6) + 12
    assert f == 2 * 3 * 2 + 2 * (2 * 25 * 8 + 25) + 2 * (2 * 40 * 8 + 40) + 2 * 16 * 6
    p_e, _ = CIN.cost(DIMS, _io(6, dense_in=2, depth=1, maps=8))  # dense input already E wide: no projection
    assert p_e == (25 * 8 + 8) + (8 * 6 + 6) + 12


def test_xdeepfm_like_is_a_point_of_its_home_space_and_exports():
    schema = make_schema()
    arch = baseline_arch("xdeepfm-like")
    assert home_space("xdeepfm-like") == "ctrnas-small-cin"
    space = get_space("ctrnas-small-cin")
    space.validate(arch)
    net = Supernet(schema, space)
    dense, kjt, _ = make_batch(schema)
    torch.testing.assert_close(export(net, arch)(dense, kjt), net(dense, kjt, arch), atol=1e-5, rtol=1e-5)
    assert count_flops(schema, space, arch) > 0
