"""DLRM's dots of mixed-width tables in two narrower products from the lookups side by side (for
throughput; ctrnas.supernet.compact.split_dots): hand-computed dots, the same logits and training as the padded
export and the supernet path, the same weights by name, and the files round trip."""

import dataclasses

import pytest
import torch

from ctrnas.space.baselines import baseline_arch
from ctrnas.supernet import Supernet, export
from ctrnas.supernet.blocks.interaction import PairDots, SplitPairDots, split_base
from ctrnas.supernet.io import load_exported, save_exported
from ctrnas.supernet.testing import make_batch, make_schema, train_side_by_side

CARDS = (50, 7, 30, 11, 20, 9, 40, 13)
WIDTHS = (8, 16, 32, 0, 8, 16, 8, 8)  # common width 32: one table at it, one dropped


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    return Supernet(make_schema(cards=CARDS), {"base": "ctrnas-small", "table_dims": [0, 8, 16, 32]}, emb_dim=32)


def _dlrm(widths=WIDTHS, **kw):
    tables = tuple((f"C{f}", w) for f, w in enumerate(widths) if w != 32)
    return dataclasses.replace(baseline_arch("dlrm-like"), table_dims=tables, **kw)


def _hand_dots(z, vectors):
    """[z | dots of every pair (i < j) of z, e_1..e_F] by plain loops over zero-padded vectors."""
    rows = [z] + vectors
    out = [z]
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            out.append((rows[i] * rows[j]).sum(1, keepdim=True))
    return torch.cat(out, dim=1)


@pytest.mark.parametrize("widths,common,base", [([1, 0, 3, 2], 3, 1), ([2, 3, 1, 3, 2], 3, 2), ([2, 1, 2], 4, 2)])
def test_split_dots_equal_hand_computed_dots(widths, common, base):
    g = torch.Generator().manual_seed(1)
    z = torch.randn(5, common, generator=g, dtype=torch.float64)
    lookups = [torch.randn(5, w, generator=g, dtype=torch.float64) for w in widths]
    padded = [torch.nn.functional.pad(e, (0, common - e.shape[1])) for e in lookups]
    want = _hand_dots(z, padded)
    dots = SplitPairDots(widths, common, base).double()
    side = torch.cat([e for e in lookups if e.shape[1]], dim=1)
    torch.testing.assert_close(dots(z, side), want)
    torch.testing.assert_close(dots(z, torch.stack(padded, dim=1)), want)  # the dense part's padded tokens
    torch.testing.assert_close(PairDots(len(widths)).double()(z, torch.stack(padded, dim=1)), want)
    # its gradients, and a second backward through them (proxies that take Hessian products)
    z.requires_grad_(True)
    side.requires_grad_(True)
    torch.autograd.gradcheck(dots, (z, side))
    torch.autograd.gradgradcheck(dots, (z, side))


def test_the_base_width_by_hand():
    # 27 rows: base 16 costs 27^2 x 16 + 5^2 x 16 = 12,064; base 8, 27^2 x 16 (no faster under 16) + 13^2 x 24
    mix = [8] * 14 + [16] * 8 + [32] * 4
    assert split_base(mix, 32) == 16
    assert split_base([16] * 26, 32) == 16  # no table at the common width: one product at 16
    assert split_base([32] * 25 + [16], 32) is None  # 2 x 27^2 x 16 is not under 3/4 of 27^2 x 32
    assert split_base([4, 8, 8], 8) is None  # under 16 columns a product costs what 16 cost


def test_the_split_model_has_the_padded_models_weights_and_logits(net):
    arch = _dlrm()
    model = export(net, arch, init="inherit")
    padded = export(net, arch, init="inherit", compact=False)
    inter = [b.dense_op.inter for b in model.net.blocks if b.dense_raw]
    assert model.side_by_side and len(inter) == 1 and isinstance(inter[0], SplitPairDots) and inter[0].base == 16
    assert not padded.side_by_side
    assert {k: v.shape for k, v in model.state_dict().items()} == {k: v.shape for k, v in padded.state_dict().items()}
    dense, kjt, _ = make_batch(net.schema, batch=16, seed=3)
    with torch.no_grad():
        want = net(dense, kjt, arch)
        torch.testing.assert_close(padded(dense, kjt), want, rtol=0, atol=1e-5)
        torch.testing.assert_close(model(dense, kjt), want, rtol=0, atol=1e-5)
        torch.testing.assert_close(model.net(dense, model.stem(kjt)), want, rtol=0, atol=1e-5)


def test_split_and_padded_models_start_and_train_alike(net):
    arch = _dlrm()
    models = [export(net, arch, init="fresh", seed=4, compact=c) for c in (True, False)]
    for m in models:
        m.stem.use_sparse_gradients()
    def same_grads(models):
        grads = [{n: p.grad.to_dense() for n, p in m.named_parameters() if p.grad is not None} for m in models]
        assert grads[0].keys() == grads[1].keys()
        for n in grads[0]:
            torch.testing.assert_close(grads[0][n], grads[1][n], rtol=1e-4, atol=1e-6)

    train_side_by_side(models, net.schema, 6, check=same_grads)
    dense, kjt, _ = make_batch(net.schema, batch=32, seed=99)
    with torch.no_grad():
        torch.testing.assert_close(models[0](dense, kjt), models[1](dense, kjt), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("why", ["uniform", "field_fm", "under 3/4"])
def test_no_split_when_it_does_not_apply(net, why):
    widths = {"uniform": [32] * 8, "field_fm": WIDTHS, "under 3/4": [32] * 7 + [16]}[why]
    if why == "field_fm":  # the fields' FM reads the tokens beside the interaction
        net = Supernet(net.schema, {"base": "ctrnas-small", "table_dims": [0, 8, 16, 32], "field_fm": [False, True]},
                       emb_dim=32)
    model = export(net, _dlrm(widths, field_fm=why == "field_fm"), init="fresh")
    assert not model.side_by_side
    assert all(type(b.dense_op.inter) is PairDots for b in model.net.blocks if b.dense_raw)


def test_no_split_when_another_op_reads_the_tokens(net):
    """The dlrm-like arch with its last block's sparse op reading the tokens (efc) into the head."""
    arch = _dlrm()
    blocks = list(arch.blocks)
    blocks[-1] = dataclasses.replace(blocks[-1], sparse_op="efc")
    arch = dataclasses.replace(arch, blocks=tuple(blocks))
    model = export(net, arch, init="inherit")
    assert not model.side_by_side
    dense, kjt, _ = make_batch(net.schema, batch=8, seed=5)
    with torch.no_grad():
        torch.testing.assert_close(model(dense, kjt), net(dense, kjt, arch), rtol=0, atol=1e-5)


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")  # the shipped dense_part.pt
def test_split_model_saves_loads_and_serves_the_same_logits(net, tmp_path):
    model = export(net, _dlrm(), init="fresh", seed=1)
    assert model.side_by_side
    save_exported(model, tmp_path / "m", init="fresh", torch_export=True)
    back = load_exported(tmp_path / "m")
    assert back.side_by_side
    dense, kjt, _ = make_batch(net.schema, batch=8, seed=6)
    ids = torch.stack([kjt.to_dict()[n].values() for n in net.schema.sparse_names], dim=1)
    scripted = torch.jit.load(str(tmp_path / "m" / "dense_part.pt"))
    dense_pt2 = torch.export.load(str(tmp_path / "m" / "dense_part.pt2")).module()
    served = torch.export.load(str(tmp_path / "m" / "model.pt2")).module()
    with torch.no_grad():
        want = model(dense, kjt)
        torch.testing.assert_close(back(dense, kjt), want, rtol=0, atol=1e-6)
        tokens = model.stem(kjt)  # the dense part's documented input: padded tokens [B, F, E]
        torch.testing.assert_close(scripted(dense, tokens), want, rtol=0, atol=1e-6)
        torch.testing.assert_close(scripted(dense, model.stem.lookups(kjt)), want, rtol=0, atol=1e-6)
        torch.testing.assert_close(dense_pt2(dense, tokens), want, rtol=0, atol=1e-6)
        torch.testing.assert_close(served(dense, ids), torch.sigmoid(want), rtol=0, atol=1e-6)


def test_flops_follow_the_split_model(net):
    """count_flops counts the product at the base width where the export splits (torch's counter over the
    exported model agrees), and at the common width where it does not; the parameters are the same either way."""
    from tests.supernet.test_counting import counted_flops

    from ctrnas.supernet import count_flops, count_params

    batch = make_batch(net.schema, batch=4, seed=7)
    rows = len(WIDTHS) + 1
    for arch, dot_width in ((_dlrm(), 16), (_dlrm([32] * 7 + [16]), 32)):
        model = export(net, arch, init="inherit")
        assert model.side_by_side == (dot_width == 16)
        flops = count_flops(net.schema, net.space, arch)
        assert flops == counted_flops(model, batch)
        padded = export(net, arch, init="inherit", compact=False)
        assert counted_flops(padded, batch) - flops == 2 * rows * rows * (32 - dot_width)
        assert count_params(net.schema, net.space, arch) == sum(p.numel() for p in model.net.parameters())
