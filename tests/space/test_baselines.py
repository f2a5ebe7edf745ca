"""DLRM and DCN-v2 as points of the ctrnas spaces: shipped arch files, exported parameter counts equal to
the baseline modules' for the same data, and the initial population they give a search."""

import dataclasses
import functools
import json

import pytest

from ctrnas.errors import CtrnasError
from ctrnas.space import PRESETS, get_space
from ctrnas.space.baselines import BASELINE_ARCHS, baseline_arch, initial_population, load_arch
from ctrnas.supernet import count_params, export
from ctrnas.supernet.fresh import build_supernet
from ctrnas.supernet.testing import make_schema
from ctrnas.train.baselines import build_baseline


def _undrawn_supernet(schema, config, **kw):
    """A supernet for fresh exports (which re-draw every weight): built undrawn, several times faster."""
    return build_supernet(schema, config, None, drawn=False, **kw)


def _n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


@functools.cache
def _small_supernet():
    """(schema, ctrnas-small supernet without LayerNorm) on 5 dense and 4 sparse fields, built once for the
    module (a few seconds each): the tests export fresh archs from it and never change it."""
    schema = make_schema(n_dense=5, cards=(20, 30, 7, 11))
    return schema, _undrawn_supernet(schema, dataclasses.replace(PRESETS["ctrnas-small"], layernorm=False))


@pytest.mark.parametrize("space", ["ctrnas-small", "ctrnas-full"])
@pytest.mark.parametrize("n_dense, cards", [(13, (60,) * 26), (4, (9, 30, 7))])
def test_exported_baseline_archs_have_the_baselines_parameter_counts(space, n_dense, cards):
    schema = make_schema(n_dense=n_dense, cards=cards)
    config = dataclasses.replace(PRESETS[space], layernorm=False)  # as the final stage trains them
    net = _undrawn_supernet(schema, config, row_cap=50)
    dlrm = export(net, baseline_arch("dlrm-like"), init="fresh")
    assert _n_params(dlrm) == _n_params(build_baseline("dlrm", schema, row_cap=50))
    assert count_params(schema, config, dlrm.arch, include_embeddings=True, row_cap=50) == _n_params(dlrm)
    dcn = export(net, baseline_arch("dcnv2-like"), init="fresh")
    assert _n_params(dcn) == _n_params(build_baseline("dcnv2", schema, row_cap=50))
    assert count_params(schema, config, dcn.arch, include_embeddings=True, row_cap=50) == _n_params(dcn)
    # The stacked DCN-v2 has no weights from the cross output to the logit: n fewer than the parallel form.
    stacked = export(net, baseline_arch("dcnv2-stacked"), init="fresh")
    n = n_dense + 16 * len(cards)
    assert _n_params(stacked) == _n_params(build_baseline("dcnv2", schema, row_cap=50)) - n


def test_dlrm_like_is_dlrm_layer_by_layer():
    schema = make_schema(n_dense=13, cards=(60,) * 26)
    model = export(_undrawn_supernet(schema, dataclasses.replace(PRESETS["ctrnas-small"], layernorm=False)),
                   baseline_arch("dlrm-like"), init="fresh")
    base = build_baseline("dlrm", schema)
    shapes = sorted(tuple(p.shape) for n, p in model.net.named_parameters())
    assert shapes == sorted(tuple(p.shape) for n, p in base.named_parameters() if "stem" not in n)


def test_archs_load_by_name_or_path(tmp_path):
    arch = load_arch("dcnv2-like")
    assert arch.blocks[0].dense_op == "cross" and arch.blocks[0].arg("form") == "full"
    path = tmp_path / "a.json"
    path.write_text(json.dumps(arch.to_json()))
    assert load_arch(path) == arch
    with pytest.raises(CtrnasError, match="missing.json: cannot read architecture.*shipped names: dlrm-like"):
        load_arch(tmp_path / "missing.json")


def test_initial_population_takes_the_archs_that_fit_the_space():
    assert initial_population(get_space("ctrnas-small")) == [baseline_arch(n) for n in BASELINE_ARCHS]
    assert initial_population(get_space("nasrec-small")) == []  # no Cross or interaction in the paper's space
    three = get_space({"base": "ctrnas-small", "num_blocks": 3})
    assert initial_population(three) == []  # the files have 7 blocks


def test_dlrm_like_computes_dlrm_on_the_same_weights():
    import torch

    from ctrnas.supernet.testing import make_batch

    schema, net = _small_supernet()
    model = export(net, baseline_arch("dlrm-like"), init="fresh", seed=3)
    base = build_baseline("dlrm", schema)
    b = model.net.blocks
    mine = [b[0].dense_op.lin, b[1].dense_op.lin, b[2].dense_op.lin, b[3].dense_op.lin, model.net.head]
    theirs = [m for m in base.modules() if isinstance(m, torch.nn.Linear)]  # bottom 2, top 2, output
    with torch.no_grad():
        base.stem.load_state_dict(model.stem.state_dict())
        for a, t in zip(mine, theirs, strict=True):
            t.weight.copy_(a.weight)
            t.bias.copy_(a.bias)
    dense, kjt, _ = make_batch(schema, batch=6)
    torch.testing.assert_close(model(dense, kjt), base(dense, kjt), atol=1e-5, rtol=1e-5)


def test_dcnv2_like_computes_dcnv2_on_the_same_weights():
    """The parallel form: the baseline module loaded with the exported weights gives the same logits, and
    a backward pass the same gradients (so the two train alike from the same start)."""
    import torch

    from ctrnas.supernet.testing import make_batch

    schema, net = _small_supernet()
    model = export(net, baseline_arch("dcnv2-like"), init="fresh", seed=3)
    base = build_baseline("dcnv2", schema)
    b = model.net.blocks
    cross = b[0].dense_op.cross
    assert isinstance(b[1].dense_op.cross, torch.nn.Identity)  # the deep tower's first layer reads x0
    pairs = [(base.deep._mlp[0]._linear, b[1].dense_op.proj), (base.deep._mlp[1]._linear, b[2].dense_op.lin),
             (base.out, model.net.head)]
    with torch.no_grad():
        base.stem.load_state_dict(model.stem.state_dict())
        for l in range(3):
            cross.bias[l].normal_()  # non-zero, so that the bias layout is checked too
            base.cross.kernels[l].copy_(cross.kernels[l])
            base.cross.bias[l].copy_(cross.bias[l])
        for t, a in pairs:
            t.weight.copy_(a.weight)
            t.bias.copy_(a.bias)
    assert sum(p.numel() for p in base.parameters()) == sum(p.numel() for p in model.parameters())
    dense, kjt, labels = make_batch(schema, batch=6)
    y, y_base = model(dense, kjt), base(dense, kjt)
    torch.testing.assert_close(y, y_base, atol=1e-5, rtol=1e-5)
    torch.nn.functional.binary_cross_entropy_with_logits(y, labels).backward()
    torch.nn.functional.binary_cross_entropy_with_logits(y_base, labels).backward()
    for t, a in pairs:
        torch.testing.assert_close(a.weight.grad, t.weight.grad, atol=1e-5, rtol=1e-5)
    for l in range(3):
        torch.testing.assert_close(cross.kernels[l].grad, base.cross.kernels[l].grad, atol=1e-5, rtol=1e-5)


def test_dcnv2_stacked_computes_the_stacked_dcnv2():
    """x0 = [dense | embeddings] -> torchrec CrossNet(3) -> ReLU(Linear 400) -> ReLU(Linear 400) -> logit."""
    import torch
    from torchrec.modules.crossnet import CrossNet

    from ctrnas.supernet.testing import make_batch

    schema, net = _small_supernet()
    model = export(net, baseline_arch("dcnv2-stacked"), init="fresh", seed=3)
    b = model.net.blocks
    n = 5 + 4 * 16
    cross = CrossNet(n, 3)
    with torch.no_grad():
        for l in range(3):
            cross.kernels[l].copy_(b[0].dense_op.cross.kernels[l])
            cross.bias[l].normal_()
            b[0].dense_op.cross.bias[l].copy_(cross.bias[l])
    dense, kjt, _ = make_batch(schema, batch=6)
    x0 = torch.cat([dense, model.stem(kjt).flatten(1)], dim=1)
    h = torch.relu(b[0].dense_op.proj(cross(x0)))
    assert h.shape[1] == 400
    expected = model.net.head(torch.relu(b[1].dense_op.lin(h))).squeeze(1)
    torch.testing.assert_close(model(dense, kjt), expected, atol=1e-5, rtol=1e-5)


def test_dcnv2_like_and_the_baseline_start_from_the_same_weights_under_one_init():
    """`reinit` draws by sorted parameter name; the two modules list theirs in the same order and shapes, so a
    fresh `dcnv2-like` and the DCN-v2 baseline re-drawn with the same seed are the same network, weight for
    weight (which is why they train to the same numbers, docs/results.md)."""
    import torch

    from ctrnas.supernet.export import reinit

    schema, net = _small_supernet()
    for dense_init in ("nasrec", "torchrec"):
        model = export(net, baseline_arch("dcnv2-like"), init="fresh", seed=4, embedding_init="torchrec",
                       dense_init=dense_init)
        base = reinit(build_baseline("dcnv2", schema), 4, "torchrec", dense_init)
        mine = [p for _, p in sorted(model.named_parameters())]
        theirs = [p for _, p in sorted(base.named_parameters())]
        assert [p.shape for p in mine] == [p.shape for p in theirs]
        for a, b in zip(mine, theirs):
            torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_deepfm_like_is_a_deep_tower_plus_an_fm_term_summed_into_the_logit():
    """logit = head(ReLU(W3 h2) + P fm(t)), h2 = ReLU(W2 ReLU(W1 [dense | e_1..e_F])), t = ReLU(A e + c) the
    32 EFC tokens mixed from the raw embeddings and fm(t) = sum_{s<s'} t_s * t_s' per channel (Rendle's FM),
    computed here from the exported weights by hand; it fits both ctrnas spaces, its parameters counted alike."""
    import torch

    from ctrnas.space.baselines import home_space
    from ctrnas.supernet.testing import make_batch

    arch = baseline_arch("deepfm-like")
    for space in ("ctrnas-small", "ctrnas-full"):
        get_space(space).validate(arch)
    assert home_space("deepfm-like") == "ctrnas-small" and load_arch("deepfm-like") == arch
    n_dense, cards, E = 5, (20, 30, 7, 11), 16
    schema = make_schema(n_dense=n_dense, cards=cards)
    config = dataclasses.replace(PRESETS["ctrnas-small"], layernorm=False)
    model = export(_undrawn_supernet(schema, config), arch, init="fresh", seed=3)
    n, F = n_dense + E * len(cards), len(cards)
    expected = (n * 400 + 400) + 2 * (400 * 400 + 400) + (F * 32 + 32) + (E * 400 + 400) + (400 + 1) + sum(cards) * E
    assert _n_params(model) == expected
    assert count_params(schema, config, arch, include_embeddings=True) == expected

    b = model.net.blocks
    dense, kjt, labels = make_batch(schema, batch=6)
    with torch.no_grad():
        e = model.stem(kjt)  # [B, F, E]
        h = torch.relu(b[0].dense_op.proj(torch.cat([dense, e.flatten(1)], dim=1)))
        h = torch.relu(b[1].dense_op.lin(h))
        A, c = b[2].sparse_op.lin.weight, b[2].sparse_op.lin.bias  # [32, F], [32]
        t = torch.relu(torch.einsum("sf,bfe->bse", A, e) + c[None, :, None])  # EFC's tokens [B, 32, E]
        pairs = sum(t[:, s] * t[:, u] for s in range(32) for u in range(s + 1, 32))  # [B, E]
        h = torch.relu(b[2].dense_op.lin(h)) + b[2].fm.lin(pairs)
        torch.testing.assert_close(model(dense, kjt), model.net.head(h).squeeze(1), atol=1e-4, rtol=1e-4)

    # trains: one step of SGD lowers the loss on its batch, and every weight (the FM's too) gets a gradient
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(dense, kjt), labels)
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.net.parameters())
    opt.step()
    with torch.no_grad():
        after = torch.nn.functional.binary_cross_entropy_with_logits(model(dense, kjt), labels)
    assert after < loss


def test_deepfm_terms_like_computes_deepfm_on_deepfms_weights():
    """`deepfm-terms-like` exported with LayerNorms off, given the DeepFM baseline's weights (its tower's four
    linear maps, its tables, its first-order weights; the baseline's dense linear term and bias zeroed, which
    the arch's logit has no place for), gives DeepFM's logits: LR(x) + FM(e) + MLP([dense | e_1..e_F])."""
    import torch

    from ctrnas.errors import ArchValidationError
    from ctrnas.space.baselines import home_space
    from ctrnas.supernet.testing import make_batch

    arch = baseline_arch("deepfm-terms-like")
    assert home_space("deepfm-terms-like") == "ctrnas-small-fm"
    with pytest.raises(ArchValidationError):  # its logit terms are not choices of ctrnas-small
        get_space("ctrnas-small").validate(arch)
    schema = make_schema(n_dense=5, cards=(20, 30, 7, 11))
    config = dataclasses.replace(PRESETS["ctrnas-small-fm"], layernorm=False)
    model = export(_undrawn_supernet(schema, config), arch, init="fresh", seed=3)
    ref = build_baseline("deepfm", schema, 16)
    assert _n_params(ref) == _n_params(model) + 5 + 1 + 1  # + the dense linear term (weights, bias) and a bias
    ours = [m for m in model.net.modules() if isinstance(m, torch.nn.Linear)]
    theirs = [m for m in ref.deep.modules() if isinstance(m, torch.nn.Linear)]
    assert [m.weight.shape for m in ours] == [m.weight.shape for m in theirs]
    with torch.no_grad():
        for a, b in zip(ours, theirs):
            b.weight.copy_(a.weight)
            b.bias.copy_(a.bias)
        ref.stem.load_state_dict(model.stem.state_dict())
        ref.linear.weights.load_state_dict(model.first_order.state_dict())
        ref.linear.dense.weight.zero_()
        ref.linear.dense.bias.zero_()
        ref.linear.bias.zero_()
        dense, kjt, _ = make_batch(schema, batch=6)
        torch.testing.assert_close(model(dense, kjt), ref(dense, kjt), atol=1e-4, rtol=1e-4)
