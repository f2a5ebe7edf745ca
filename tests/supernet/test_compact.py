"""Crosses of models with narrower tables run on the real positions only (ctrnas.supernet.compact, for
throughput): the same logits as the supernet path and as the padded export, the same training, hand-counted
sizes, and the files round trip."""

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from ctrnas.space import Arch
from ctrnas.supernet import Supernet, count_flops, count_params, export
from ctrnas.supernet.compact import flat_keep
from ctrnas.supernet.io import load_exported, save_exported
from ctrnas.supernet.testing import make_batch, make_schema, train_side_by_side

ROOT = Path(__file__).resolve().parents[2]
CARDS = (50, 7, 30, 11)
WIDTHS = (("C0", 2), ("C1", 0), ("C3", 4))  # C2 keeps the common width 8
DENSE = 3  # make_schema's dense features


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    return Supernet(make_schema(cards=CARDS), {"base": "ctrnas-small", "table_dims": [0, 2, 4, 8]}, emb_dim=8)


def _dcnv2(form="full", out="raw", tables=WIDTHS):
    """The shipped dcnv2-like (a cross over the raw inputs, then a deep tower beside it) with `form`/`out`."""
    arch = Arch.from_json(json.loads((ROOT / "ctrnas/space/archs/dcnv2-like.json").read_text()))
    blocks = list(arch.blocks)
    args = {**dict(blocks[0].dense_args), "form": form, "out": out}
    blocks[0] = dataclasses.replace(blocks[0], dense_args=tuple(sorted(args.items())))
    return dataclasses.replace(arch, blocks=tuple(blocks), table_dims=tables)


def test_positions_kept_by_hand():
    # dense 2, fields of widths 1, 0, 3 at common width 3: x0 = [d0 d1 | a0 a1 a2 | b0 b1 b2 | c0 c1 c2]
    assert flat_keep(2, [1, 0, 3], 3).tolist() == [0, 1, 2, 8, 9, 10]


@pytest.mark.parametrize("form", ["full", "lowrank", "mixture"])
@pytest.mark.parametrize("out", ["raw", "proj"])
def test_compact_cross_equals_the_supernet_path_and_has_the_hand_counted_size(net, form, out):
    arch = _dcnv2(form, out)
    model = export(net, arch, init="inherit")
    padded = export(net, arch, init="inherit", compact=False)
    cross = model.net.blocks[0].dense_op
    n = DENSE + 2 + 0 + 8 + 4  # dense inputs + the tables' widths, against 3 + 4 x 8 padded
    assert len(cross.keep) == n and cross.width == DENSE + 4 * 8
    depth = dict(arch.blocks[0].dense_args)["depth"]
    if form == "full":  # TorchRec's CrossNet: depth x (n x n kernel + n x 1 bias)
        assert sum(p.numel() for p in cross.cross.parameters()) == depth * (n * n + n)
    dense, kjt, _ = make_batch(net.schema, batch=16, seed=3)
    with torch.no_grad():
        torch.testing.assert_close(model(dense, kjt), net(dense, kjt, arch), rtol=0, atol=1e-5)
        torch.testing.assert_close(model(dense, kjt), padded(dense, kjt), rtol=0, atol=1e-5)
    # the analytic counts follow the compact model (FLOPs as torch's counter sees them)
    assert count_params(net.schema, net.space, arch) == sum(p.numel() for p in model.net.parameters())
    assert count_params(net.schema, net.space, arch) < sum(p.numel() for p in padded.net.parameters())
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model.net(dense[:1], model.stem(kjt)[:1])
    assert count_flops(net.schema, net.space, arch) == counter.get_total_flops()


def test_uniform_tables_are_not_compacted(net):
    model = export(net, _dcnv2(tables=()), init="fresh")
    assert model.net.blocks[0].dense_op.width == 0 and len(model.net.blocks[0].dense_op.keep) == 0


def test_compact_and_padded_models_start_and_train_alike(net):
    """Sliced after the init, the compact model is the padded one without its dead weights: Adagrad steps
    on the same batches keep their logits equal (the padded positions get zero gradients)."""
    arch = _dcnv2("mixture", "raw")
    models = [export(net, arch, init="fresh", seed=4, compact=c) for c in (True, False)]
    train_side_by_side(models, net.schema, 8)
    dense, kjt, _ = make_batch(net.schema, batch=32, seed=99)
    with torch.no_grad():
        torch.testing.assert_close(models[0](dense, kjt), models[1](dense, kjt), rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")  # the shipped dense_part.pt
def test_compact_model_saves_loads_and_serves_the_same_logits(net, tmp_path):
    model = export(net, _dcnv2("lowrank", "raw"), init="fresh", seed=1)
    save_exported(model, tmp_path / "m", init="fresh")
    back = load_exported(tmp_path / "m")
    dense, kjt, _ = make_batch(net.schema, batch=8, seed=6)
    ids = torch.stack([kjt.to_dict()[n].values() for n in net.schema.sparse_names], dim=1)
    scripted = torch.jit.load(str(tmp_path / "m" / "dense_part.pt"))
    served = torch.export.load(str(tmp_path / "m" / "model.pt2")).module()
    with torch.no_grad():
        want = model(dense, kjt)
        torch.testing.assert_close(back(dense, kjt), want, rtol=0, atol=1e-6)
        torch.testing.assert_close(scripted(dense, model.stem(kjt)), want, rtol=0, atol=1e-6)
        torch.testing.assert_close(served(dense, ids), torch.sigmoid(want), rtol=0, atol=1e-6)


def test_a_model_saved_with_padded_crosses_still_loads(net, tmp_path):
    """Model folders written before the compaction hold the padded cross's weights: they load as they were."""
    padded = export(net, _dcnv2("full", "proj"), init="fresh", seed=2, compact=False)
    save_exported(padded, tmp_path / "old", init="fresh")
    back = load_exported(tmp_path / "old")
    assert back.net.blocks[0].dense_op.width == 0
    dense, kjt, _ = make_batch(net.schema, batch=8, seed=7)
    with torch.no_grad():
        torch.testing.assert_close(back(dense, kjt), padded(dense, kjt), rtol=0, atol=1e-6)


@pytest.mark.parametrize("tables", [WIDTHS, ()])
def test_the_stems_one_copy_layout_equals_padding_each_lookup(net, tables):
    """The stem lays the side-by-side lookups out in one copy; each token must be its table's TorchRec
    lookup zero-padded to the common width, as the per-table path (tables in another order) gives it."""
    model = export(net, _dcnv2(tables=tables), init="fresh", seed=3)
    _, kjt, _ = make_batch(net.schema, batch=8, seed=8)
    with torch.no_grad():
        tokens = model.stem(kjt)
        lookup = model.stem.ebc(kjt).to_dict()
        for f, (name, w) in enumerate(zip(model.stem.names, model.stem.widths)):
            want = torch.zeros(8, 8) if w == 0 else torch.nn.functional.pad(lookup[name], (0, 8 - w))
            assert torch.equal(tokens[:, f], want)
        model.stem._keys = list(reversed(model.stem._keys))  # as if the collection came back regrouped
        assert torch.equal(model.stem(kjt), tokens)


@pytest.mark.parametrize("widths,common", [([3] * 4, 3), ([2, 0, 8, 4], 8)])
def test_pair_dots_equal_torchrecs_interaction(widths, common):
    """The exported interaction's one-gather pairs against TorchRec's InteractionArch, on zero-padded tokens
    of `widths` too."""
    from torchrec.models.dlrm import InteractionArch

    from ctrnas.supernet.blocks.interaction import PairDots

    g = torch.Generator().manual_seed(0)
    mask = (torch.arange(common)[None] < torch.tensor(widths)[:, None]).float()
    dense = torch.randn(5, common, generator=g, requires_grad=True)
    tokens = (torch.randn(5, len(widths), common, generator=g) * mask).requires_grad_()
    want = InteractionArch(len(widths))(dense, tokens)
    got = PairDots(len(widths))(dense, tokens)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    grads = torch.autograd.grad(want.square().sum(), (dense, tokens))
    for a, b in zip(torch.autograd.grad(got.square().sum(), (dense, tokens)), grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", ["full", "lowrank", "mixture"])
@pytest.mark.parametrize("out", ["raw", "proj"])
def test_x0_dims_name_the_dimensions_the_compaction_slices(net, form, out):
    """Each tensor of the compact cross is the padded one's at `keep` along `x0_dims`, the rest whole."""
    from ctrnas.supernet.compact import x0_dims

    arch = _dcnv2(form, out)
    compact = export(net, arch, init="inherit").net.blocks[0].dense_op
    padded = export(net, arch, init="inherit", compact=False).net.blocks[0].dense_op
    full = padded.state_dict()
    for name, t in compact.state_dict().items():
        if name == "keep":
            continue
        want = full[name]
        for d in x0_dims(name, want):
            want = want.index_select(d, compact.keep)
        assert torch.equal(t, want), name


def _graft(root, child):
    import types

    from ctrnas.pipeline.fitness.inherit import graft, graft_state

    def trainer(m):
        return types.SimpleNamespace(model=m, optimizers=[], step=0, rows_seen=0)
    state = graft_state(trainer(root))
    return state, graft(trainer(child), state)


@pytest.mark.parametrize("root_compact", [True, False])
@pytest.mark.parametrize("child_compact", [True, False])
def test_the_inherit_rung_grafts_crosses_by_position_whatever_the_layouts(net, root_compact, child_compact):
    """A child of an inherit rung whose tables are narrower than its root's gets the root's cross weights at
    their positions: with the root's weights being the supernet's, the grafted child is the child's own export
    from the supernet (exactly), from a root written in either layout (an older graft file is padded)."""
    root_arch = _dcnv2("full", "proj", tables=(("C0", 2), ("C1", 0), ("C3", 4)))
    child_arch = _dcnv2("full", "proj", tables=(("C0", 0), ("C1", 0), ("C3", 4)))  # one table move: C0 2 -> 0
    root = export(net, root_arch, init="inherit", compact=root_compact)
    child = export(net, child_arch, init="fresh", seed=5, compact=child_compact)
    state, counts = _graft(root, child)
    if not root_compact:
        state.pop("keeps")  # as a graft file written before compaction
    assert counts["fresh"] == 0
    dense, kjt, _ = make_batch(net.schema, batch=16, seed=3)
    with torch.no_grad():
        torch.testing.assert_close(child(dense, kjt), net(dense, kjt, child_arch), rtol=0, atol=1e-5)


def test_a_wider_child_keeps_its_own_draw_where_the_root_had_padding(net):
    root_arch = _dcnv2("full", "proj", tables=(("C0", 0), ("C1", 0), ("C3", 4)))
    child_arch = _dcnv2("full", "proj", tables=(("C0", 2), ("C1", 0), ("C3", 4)))  # C0 0 -> 2
    root = export(net, root_arch, init="inherit")
    child = export(net, child_arch, init="fresh", seed=5)
    drawn = child.net.blocks[0].dense_op.cross.kernels[0].detach().clone()
    _graft(root, child)
    cross, theirs = child.net.blocks[0].dense_op, root.net.blocks[0].dense_op
    kernel, own = cross.cross.kernels[0], cross.keep.tolist()
    new = [i for i, p in enumerate(own) if p not in theirs.keep.tolist()]
    old = [i for i, p in enumerate(own) if p in theirs.keep.tolist()]
    assert len(new) == 2 and len(old) == len(theirs.keep)  # C0's two columns are the child's own
    assert torch.equal(kernel[new][:, new], drawn[new][:, new])
    assert torch.equal(kernel[old][:, old], theirs.cross.kernels[0])
