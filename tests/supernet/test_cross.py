"""Cross (DCN-v2) in the supernet: equal to TorchRec's cross networks on the same weights, elastic slices
equal fresh smaller modules, export equals the supernet path, and hand-counted params/FLOPs."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torchrec.modules.crossnet import CrossNet, LowRankCrossNet, LowRankMixtureCrossNet

from ctrnas.space import Arch, BlockChoice, get_space
from ctrnas.space.ops import CROSS_EXPERTS
from ctrnas.supernet import Supernet, count_flops, count_params, export
from ctrnas.supernet.blocks.base import OpInput, as_index
from ctrnas.supernet.blocks.cross import MAX_DEPTH, MAX_RANK, Cross
from ctrnas.supernet.blocks.crossnets import (ScriptableCrossNet, ScriptableLowRankCrossNet,
                                              ScriptableLowRankMixtureCrossNet)
from ctrnas.supernet.layout import BlockIO, Dims
from ctrnas.supernet.testing import make_batch, make_schema

DIMS = Dims(n_dense=3, n_sparse=4, emb=2, max_dense=6, max_tokens=3, merge_tokens=0, heads=1, layernorm=True)


def _io(i, dense_cols, tok_cols, d, **args):
    return BlockIO(index=i, dense_ops=("cross",), dense_args=tuple(sorted(args.items())), sparse_ops=(),
                   dense_idx=(0,) if i == 1 else (0, 1), sparse_idx=(0,) if i == 1 else (0, 1), left=0, right=0,
                   dense_dim=d, tokens=0, merge=False, fm=False, dense_in=len(dense_cols), dense_cols=tuple(dense_cols),
                   tok_in=len(tok_cols), tok_cols=tuple(tok_cols), left_w=0, right_w=0)


def _x0_positions(i, dense_cols, tok_cols):
    """Where the subnet's x0 entries sit in block i's max-size x0, computed here from the layout rule."""
    off = DIMS.dense_in_max(i)
    return list(dense_cols) + [off + t * DIMS.emb + e for t in tok_cols for e in range(DIMS.emb)]


def _reference(op, form, depth, r, pos):
    """TorchRec's own module (not ours) of the subnet's size, loaded with the sliced supernet weights."""
    n = len(pos)
    p = torch.tensor(pos)
    with torch.no_grad():
        if form == "full":
            ref = CrossNet(n, depth)
            for l in range(depth):
                ref.kernels[l].copy_(op.full_w[l])
                ref.bias[l].copy_(op.full_b[l][:, None])
        elif form == "lowrank":
            ref = LowRankCrossNet(n, depth, low_rank=r)
            for l in range(depth):
                ref.W_kernels[l].copy_(op.low_w[l][p][:, :r])
                ref.V_kernels[l].copy_(op.low_v[l][:r][:, p])
                ref.bias[l].copy_(op.low_b[l][p])
        else:
            ref = LowRankMixtureCrossNet(n, depth, num_experts=CROSS_EXPERTS, low_rank=r)
            for l in range(depth):
                ref.U_kernels[l].copy_(op.mix_u[l][:, p][:, :, :r])
                ref.V_kernels[l].copy_(op.mix_v[l][:, :r][:, :, p])
                ref.C_kernels[l].copy_(op.mix_c[l][:, :r, :r])
                ref.bias[l].copy_(op.mix_b[l][p][:, None])
            for k in range(CROSS_EXPERTS):
                ref.gates[k].weight.copy_(op.gates[k:k + 1, p])
    return ref


def _pairs(op, ref, form, depth, r, pos):
    """(supernet weight slice's grad, reference param's grad) for every cross weight the subnet uses."""
    p = torch.tensor(pos)
    out = []
    for l in range(depth):
        if form == "full":
            out += [(op.full_w[l].grad, ref.kernels[l].grad), (op.full_b.grad[l][:, None], ref.bias[l].grad)]
        elif form == "lowrank":
            out += [(op.low_w[l].grad[p][:, :r], ref.W_kernels[l].grad),
                    (op.low_v[l].grad[:r][:, p], ref.V_kernels[l].grad),
                    (op.low_b.grad[l][p], ref.bias[l].grad)]
        else:
            out += [(op.mix_u[l].grad[:, p][:, :, :r], ref.U_kernels[l].grad),
                    (op.mix_v[l].grad[:, :r][:, :, p], ref.V_kernels[l].grad),
                    (op.mix_c[l].grad[:, :r, :r], ref.C_kernels[l].grad),
                    (op.mix_b.grad[l][p][:, None], ref.bias[l].grad)]
    if form == "mixture":
        out += [(op.gates.grad[k:k + 1, p], ref.gates[k].weight.grad) for k in range(CROSS_EXPERTS)]
    return out


# (block, dense cols, token cols, width, form, depth, rank): the largest subnet, and sliced ones (fewer
# input columns from two sources, lower rank, fewer layers, narrower output).
CASES = [
    (1, range(3), range(4), 6, "full", MAX_DEPTH, None),
    (2, range(9), range(7), 6, "lowrank", MAX_DEPTH, MAX_RANK),
    (2, range(9), range(7), 6, "mixture", MAX_DEPTH, MAX_RANK),
    (1, range(3), range(4), 4, "full", 1, None),
    (2, [0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4], 5, "lowrank", 2, 8),
    (2, [0, 1, 2, 4], [0, 1, 2, 3, 5], 3, "mixture", 1, 16),
]


@pytest.mark.parametrize("i, dcols, tcols, d, form, depth, r", CASES)
def test_cross_path_equals_torchrec_module_on_the_same_weights(i, dcols, tcols, d, form, depth, r):
    torch.manual_seed(0)
    op = Cross(DIMS, i)
    with torch.no_grad():  # non-zero biases and LN affine, so that slicing them is checked too
        for b in (op.full_b, op.low_b, op.mix_b, op.ln.weight, op.ln.bias, op.proj.bias):
            b.normal_()
    dense = torch.randn(5, len(dcols), requires_grad=True)
    sparse = torch.randn(5, len(tcols), DIMS.emb, requires_grad=True)
    args = {"depth": depth, "form": form, "rank": r or 8, "out": "proj"}
    io = _io(i, dcols, tcols, d, **args)
    y = op(io, OpInput(dense, sparse, None, None, as_index(io.dense_cols), as_index(io.tok_cols)))

    pos = _x0_positions(i, dcols, tcols)
    ref = _reference(op, form, depth, r, pos)
    dense2, sparse2 = dense.detach().clone().requires_grad_(), sparse.detach().clone().requires_grad_()
    proj_w = op.proj.weight.detach()[:d][:, pos].clone().requires_grad_()
    x_l = ref(torch.cat([dense2, sparse2.flatten(1)], dim=1))
    y_ref = F.relu(F.layer_norm(F.linear(x_l, proj_w, op.proj.bias.detach()[:d]), (d,), op.ln.weight.detach()[:d],
                                op.ln.bias.detach()[:d]))
    torch.testing.assert_close(y, y_ref, atol=1e-5, rtol=1e-5)

    w = torch.randn_like(y)
    (y * w).sum().backward()
    (y_ref * w).sum().backward()
    torch.testing.assert_close(dense.grad, dense2.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sparse.grad, sparse2.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(op.proj.weight.grad[:d][:, pos], proj_w.grad, atol=1e-5, rtol=1e-5)
    for g_super, g_ref in _pairs(op, ref, form, depth, r, pos):
        torch.testing.assert_close(g_super, g_ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cls, base, kw", [(ScriptableCrossNet, CrossNet, {}),
                                           (ScriptableLowRankCrossNet, LowRankCrossNet, {"low_rank": 3}),
                                           (ScriptableLowRankMixtureCrossNet, LowRankMixtureCrossNet,
                                            {"low_rank": 3, "num_experts": 4})])
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # the shipped dense_part.pt
def test_scriptable_crossnets_equal_torchrec_forward(cls, base, kw):
    torch.manual_seed(0)
    m = cls(7, 2, **kw)
    with torch.no_grad():
        for b in m.bias:
            b.normal_()
    x = torch.randn(4, 7)
    torch.testing.assert_close(torch.jit.script(m)(x), base.forward(m, x), atol=1e-6, rtol=1e-6)


TINY = {"dense_ops": ["fc", "dot", "cross", "interaction", "concat"], "sparse_ops": ["efc", "none"], "num_blocks": 4,
        "dense_dims": [4, 8, 12], "sparse_tokens": [2, 3, 5], "merge_tokens": 2}


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # the shipped dense_part.pt
def test_export_equals_supernet_path_for_archs_with_cross():
    torch.manual_seed(0)
    schema = make_schema()
    space = get_space(TINY)
    net = Supernet(schema, space)
    dense, kjt, labels = make_batch(schema, batch=8, seed=1)
    rng = np.random.default_rng(0)
    forms = set()
    grads = copy.deepcopy(net)  # one copy, every parameter overwritten per arch (a deepcopy each took ~6 s)
    for _ in range(80):
        arch = space.sample(rng)
        live = [arch.blocks[i - 1] for i, p in arch.live_parts().items() if p.dense]
        cross = [b for b in live if b.dense_op == "cross"]
        if not cross:
            continue
        seen = ({b.arg("form") for b in cross} | {f"out {b.arg('out')}" for b in cross} |
                {f"depth {b.arg('depth')}" for b in cross} | {b.dense_op for b in live if b.dense_op == "concat"})
        new, forms = seen - forms, forms | seen
        net.zero_grad(set_to_none=True)
        y = net(dense, kjt, arch)
        model = export(net, arch)
        y_exp = model(dense, kjt)
        torch.testing.assert_close(y_exp, y, atol=1e-5, rtol=1e-5)
        if new:  # scripting costs a tenth of a second: once per form is enough to show each one scripts
            torch.testing.assert_close(torch.jit.script(model.net)(dense, model.stem(kjt)), y, atol=1e-5, rtol=1e-5)
        F.binary_cross_entropy_with_logits(y, labels).backward()
        F.binary_cross_entropy_with_logits(y_exp, labels).backward()
        # Gradients compared elementwise: export the supernet's gradients as if they were weights.
        with torch.no_grad():
            for p, g in zip(grads.parameters(), net.parameters()):
                p.copy_(g.grad if g.grad is not None else torch.zeros_like(g))
        for (n, g), (n2, p) in zip(export(grads, arch).net.named_parameters(), model.net.named_parameters()):
            assert n == n2
            torch.testing.assert_close(p.grad if p.grad is not None else torch.zeros_like(p), g, atol=1e-5, rtol=1e-5)
    assert forms == {"full", "lowrank", "mixture", "out proj", "out raw", "concat"} | {f"depth {d}" for d in range(4)}


def _one_cross_block(form, depth, rank, out="proj"):
    """F = 3 fields of E = 4 and 2 dense features: x0 is n = 2 + 3 * 4 = 14 wide; output width 5."""
    schema = make_schema(n_dense=2, cards=(10, 20, 30))
    space = get_space({"num_blocks": 1, "dense_ops": ["cross"], "sparse_ops": ["efc"], "dense_dims": [5],
                       "sparse_tokens": [2], "dense_sparse_merge": [False], "fm": [False], "emb_dim": 4,
                       "attention_heads": 1})
    b = BlockChoice(dense_idx=(0,), sparse_idx=(0,), dense_left_idx=0, dense_right_idx=0, dense_op="cross",
                    sparse_op="efc", dense_dim=5, sparse_tokens=2, dense_sparse_merge=False, fm=False,
                    dense_args=(("depth", depth), ("form", form), ("out", out), ("rank", rank)))
    return schema, space, Arch((b,))


# Shared by both: projection 14 -> 5 and LN(5); EFC over tokens 3 -> 2 and LN(E); head (5 + 2 * 4) -> 1.
REST_P = (14 * 5 + 5 + 10) + (3 * 2 + 2 + 8) + (13 + 1)
REST_F = 2 * 14 * 5 + 2 * 4 * 3 * 2 + 2 * 13


def test_params_and_flops_of_a_one_layer_full_rank_cross():
    schema, space, arch = _one_cross_block("full", 1, 8)
    assert count_params(schema, space, arch) == (14 * 14 + 14) + REST_P == 325
    assert count_flops(schema, space, arch) == 2 * 14 * 14 + REST_F == 606


def test_params_and_flops_of_a_two_layer_low_rank_cross():
    schema, space, arch = _one_cross_block("lowrank", 2, 8)
    # per layer V (8 x 14), W (14 x 8), bias 14; FLOPs 2 x (8 x 14) twice
    assert count_params(schema, space, arch) == 2 * (2 * 14 * 8 + 14) + REST_P == 591
    assert count_flops(schema, space, arch) == 2 * (2 * 8 * 14 + 2 * 14 * 8) + REST_F == 1110


def test_params_and_flops_of_an_unprojected_cross_and_of_depth_zero():
    # out raw: x_L (14 wide) goes to the head as it is: no projection, no LN; head (14 + 2 * 4) -> 1
    schema, space, arch = _one_cross_block("full", 1, 8, out="raw")
    efc_p, efc_f = 3 * 2 + 2 + 8, 2 * 4 * 3 * 2
    assert count_params(schema, space, arch) == (14 * 14 + 14) + efc_p + (22 + 1) == 249
    assert count_flops(schema, space, arch) == 2 * 14 * 14 + efc_f + 2 * 22 == 484
    # depth 0: no cross layer, whatever the form; the projection 14 -> 5 + LN(5) is a deep layer over x0
    for form in ("full", "lowrank", "mixture"):
        schema, space, arch = _one_cross_block(form, 0, 8)
        assert count_params(schema, space, arch) == (14 * 5 + 5 + 10) + efc_p + 14 == 115
        assert count_flops(schema, space, arch) == 2 * 14 * 5 + efc_f + 2 * 13 == 214


@pytest.mark.parametrize("form, depth, rank, out", [("full", 1, 8, "proj"), ("lowrank", 2, 8, "proj"),
                                                    ("mixture", 3, 16, "proj"), ("full", 3, 8, "raw"),
                                                    ("mixture", 2, 8, "raw"), ("mixture", 0, 8, "proj")])
def test_counts_equal_the_exported_torchrec_model(form, depth, rank, out):
    from torch.utils.flop_counter import FlopCounterMode
    schema, space, arch = _one_cross_block(form, depth, rank, out)
    torch.manual_seed(0)
    model = export(Supernet(schema, space), arch)
    assert count_params(schema, space, arch) == sum(p.numel() for p in model.net.parameters())
    dense, kjt, _ = make_batch(schema, batch=4)
    tokens = model.stem(kjt)
    with FlopCounterMode(display=False) as fc:
        model.net(dense, tokens)
    assert count_flops(schema, space, arch) == fc.get_total_flops() / 4


def test_the_full_supernet_trains_every_cross_form():
    torch.manual_seed(0)
    schema = make_schema()
    net = Supernet(schema, get_space(TINY))
    dense, kjt, labels = make_batch(schema)
    F.binary_cross_entropy_with_logits(net(dense, kjt, full=True), labels).backward()
    for blk in net.blocks:
        op = blk.dense_ops["cross"]
        assert op.low_w[MAX_DEPTH - 1].grad.abs().sum() > 0 and op.mix_u[MAX_DEPTH - 1].grad.abs().sum() > 0
    assert net.blocks[0].dense_ops["cross"].full_w[0].grad.abs().sum() > 0  # block 1 reads only the raw inputs


@pytest.mark.parametrize("form, depth", [("full", 3), ("lowrank", 2), ("mixture", 1), ("lowrank", 0)])
def test_unprojected_cross_is_the_torchrec_module_output_itself(form, depth):
    torch.manual_seed(0)
    op = Cross(DIMS, 1)
    with torch.no_grad():
        for b in (op.full_b, op.low_b, op.mix_b):
            b.normal_()
    dense, sparse = torch.randn(5, 3), torch.randn(5, 4, DIMS.emb)
    io = _io(1, range(3), range(4), 6, depth=depth, form=form, rank=8, out="raw")
    y = op(io, OpInput(dense, sparse, None, None, as_index(io.dense_cols), as_index(io.tok_cols)))
    x0 = torch.cat([dense, sparse.flatten(1)], dim=1)
    expected = x0 if depth == 0 else _reference(op, form, depth, 8, _x0_positions(1, range(3), range(4)))(x0)
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)
