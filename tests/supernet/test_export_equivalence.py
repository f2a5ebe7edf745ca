"""The exported model equals the supernet path: forward and gradients of the shared weights."""

import copy
import weakref

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ctrnas.errors import ArchValidationError
from ctrnas.space import get_space
from ctrnas.supernet import Supernet, export

from ctrnas.supernet.testing import make_batch, make_schema

# Small widths keep 60 archs per space fast; odd sizes catch off-by-one slicing.
TINY = {"num_blocks": 5, "dense_dims": [4, 8, 12], "sparse_tokens": [2, 3, 5], "merge_tokens": 2,
        "attention_heads": 2}


def tiny_space(base):
    return get_space({"base": base, **TINY})


_HOLDERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _grad_holder(net):
    """A copy of `net` to write its gradients into, made once per supernet (a deepcopy per arch took most of
    the time of the 60-arch tests); made again if the supernet's parameters changed shape or device."""
    held = _HOLDERS.get(net)
    if held is None or [(p.shape, p.device) for p in held.parameters()] != [(p.shape, p.device)
                                                                            for p in net.parameters()]:
        held = _HOLDERS[net] = copy.deepcopy(net)
    return held


def assert_grads_are_the_slices(net, model, arch, tol=1e-5):
    """The exported model's gradients equal the supernet's gradients at the subnet's slices, elementwise,
    and the supernet has no gradient outside them (equal total |grad|)."""
    grads = _grad_holder(net)
    with torch.no_grad():  # export the supernet's gradients as if they were its weights (every one overwritten)
        for p, g in zip(grads.parameters(), net.parameters(), strict=True):
            p.copy_(g.grad if g.grad is not None else torch.zeros_like(g))
    total = 0.0
    for (n, g), (n2, p) in zip(export(grads, arch).net.named_parameters(), model.net.named_parameters()):
        assert n == n2
        grad = p.grad if p.grad is not None else torch.zeros_like(p)
        torch.testing.assert_close(grad, g.detach(), atol=tol, rtol=tol)
        total += float(g.detach().abs().sum())
    outside = sum(float(p.grad.abs().sum()) for n, p in net.named_parameters()
                  if p.grad is not None and not n.startswith("stem.")) - total
    assert total > 0 and abs(outside) < 1e-4 * total


def check_equal(net, arch, batch, grads=True):
    dense, kjt, labels = batch
    net.zero_grad(set_to_none=True)
    y_super = net(dense, kjt, arch)
    model = export(net, arch)
    y_exp = model(dense, kjt)
    assert y_super.shape == (dense.shape[0],)
    torch.testing.assert_close(y_exp, y_super, atol=1e-6, rtol=0)
    if not grads:
        return
    F.binary_cross_entropy_with_logits(y_super, labels).backward()
    F.binary_cross_entropy_with_logits(y_exp, labels).backward()
    # The stem is shared as a whole: equal elementwise.
    for (n1, p1), (n2, p2) in zip(net.stem.named_parameters(), model.stem.named_parameters()):
        assert n1 == n2
        torch.testing.assert_close(p2.grad, p1.grad, atol=1e-6, rtol=0)
    assert_grads_are_the_slices(net, model, arch)


@pytest.mark.parametrize("base", ["nasrec-full", "nasrec-small", "ctrnas-full"])
def test_export_equals_supernet_path_for_60_archs(base):
    torch.manual_seed(0)
    schema = make_schema()
    space = tiny_space(base)
    net = Supernet(schema, space)
    batch = make_batch(schema, batch=8, seed=1)
    rng = np.random.default_rng(0)
    archs = {}
    while len(archs) < 60:
        a = space.sample(rng)
        archs[a.key()] = a
    partial = 0
    for a in archs.values():
        check_equal(net, a, batch)
        partial += any(not (p.dense and p.sparse) for p in a.live_parts().values())
    assert partial >= 10  # blocks with only their dense or only their sparse part live are covered


@pytest.mark.parametrize("base, seed", [("nasrec-full", 0), ("nasrec-small", 1)])
def test_export_equals_supernet_path_at_default_widths(base, seed):
    torch.manual_seed(seed)
    schema = make_schema(n_dense=13, cards=(40,) * 8)
    net = Supernet(schema, base)
    batch = make_batch(schema, batch=4, seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(2):
        check_equal(net, get_space(base).sample(rng), batch, grads=False)


def test_export_equals_supernet_path_in_eval_mode(schema):
    # eval + no_grad lets nn.MultiheadAttention take its fused fast path: both sides must take the same one
    torch.manual_seed(0)
    space = tiny_space("nasrec-full")
    net = Supernet(schema, space).eval()
    dense, kjt, _ = make_batch(schema, seed=6)
    rng = np.random.default_rng(6)
    with torch.no_grad():
        for _ in range(10):
            a = space.sample(rng)
            torch.testing.assert_close(export(net, a).eval()(dense, kjt), net(dense, kjt, a), atol=1e-6, rtol=0)


def test_full_supernet_trains_every_op(schema):
    torch.manual_seed(0)
    net = Supernet(schema, tiny_space("nasrec-full"))
    dense, kjt, labels = make_batch(schema, seed=2)
    y = net(dense, kjt, full=True)
    assert y.shape == (8,) and torch.isfinite(y).all()
    F.binary_cross_entropy_with_logits(y, labels).backward()
    for i, blk in enumerate(net.blocks, 1):
        for name, mod in [*blk.dense_ops.items(), *blk.sparse_ops.items(), ("fm", blk.fm), ("merge", blk.merge)]:
            grads = [p.grad for p in mod.parameters()]
            assert all(g is not None for g in grads), (i, name)
            assert sum(g.abs().sum() for g in grads) > 0, (i, name)


def test_subnet_view_uses_shared_weights_and_lists_only_used_params(schema):
    torch.manual_seed(0)
    space = tiny_space("nasrec-full")
    net = Supernet(schema, space)
    dense, kjt, labels = make_batch(schema, seed=3)
    rng = np.random.default_rng(4)
    for _ in range(5):
        a = space.sample(rng)
        view = net.subnet(a)
        net.zero_grad(set_to_none=True)
        y = view(dense, kjt)
        torch.testing.assert_close(y, net(dense, kjt, a), atol=0, rtol=0)
        F.binary_cross_entropy_with_logits(y, labels).backward()
        touched = {id(p) for p in net.parameters() if p.grad is not None and p.grad.abs().sum() > 0}
        listed = {id(p) for p in view.parameters()}
        assert touched <= listed
        # params listed but without gradient can only be exactly-zero contributions (none expected here)
        assert listed - touched == set()
        assert sum(p.numel() for p in view.parameters()) < sum(p.numel() for p in net.parameters())


def test_supernet_rejects_missing_or_foreign_arch(schema):
    net = Supernet(schema, tiny_space("nasrec-small"))
    dense, kjt, _ = make_batch(schema)
    with pytest.raises(ArchValidationError):
        net(dense, kjt)
    foreign = tiny_space("nasrec-full").sample(np.random.default_rng(0))
    while all(b.dense_op in ("fc", "dot") and b.sparse_op == "efc" for b in foreign.blocks):
        foreign = tiny_space("nasrec-full").sample(np.random.default_rng(1))
    with pytest.raises(ArchValidationError):
        net(dense, kjt, foreign)


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")  # the 0-dense case
@pytest.mark.parametrize("n_dense, cards", [(0, (5, 6)), (1, (3,)), (40, (4, 4))])
def test_unusual_schemas(n_dense, cards):
    # no dense features; a single sparse field; more dense features than the widest block (binary ops pad to 40)
    torch.manual_seed(0)
    schema = make_schema(n_dense=n_dense, cards=cards)
    space = get_space({"base": "nasrec-full", "num_blocks": 3, "dense_dims": [4, 8], "sparse_tokens": [2, 3],
                       "attention_heads": 2})
    net = Supernet(schema, space)
    batch = make_batch(schema, batch=5)
    rng = np.random.default_rng(0)
    for _ in range(10):
        check_equal(net, space.sample(rng), batch)
    assert net(batch[0], batch[1], full=True).shape == (5,)


def test_training_the_path_equals_training_the_export(schema):
    # export(train(supernet path)) == train(export(supernet)): the path updates exactly the exported slices
    space = tiny_space("nasrec-full")
    rng = np.random.default_rng(8)
    batches = [make_batch(schema, batch=8, seed=s) for s in range(3)]
    for _ in range(5):
        torch.manual_seed(0)
        net = Supernet(schema, space)
        arch = space.sample(rng)
        model = export(net, arch)
        before_net = {n: p.detach().clone() for n, p in net.named_parameters()}
        before_model = {n: p.detach().clone() for n, p in model.named_parameters()}
        for m, fwd in ((net, lambda d, k: net(d, k, arch)), (model, model)):
            opt = torch.optim.Adagrad(m.parameters(), lr=0.1, eps=1e-2)
            for dense, kjt, labels in batches:
                opt.zero_grad()
                F.binary_cross_entropy_with_logits(fwd(dense, kjt), labels).backward()
                opt.step()
        for (n1, p1), (n2, p2) in zip(export(net, arch).named_parameters(), model.named_parameters()):
            assert n1 == n2
            torch.testing.assert_close(p1, p2, atol=1e-5, rtol=1e-5)
        # and nothing outside the subnet's slices moved: the supernet's update, exported as if it were
        # weights, is the exported model's update, and it holds all of the supernet's movement
        moved = copy.deepcopy(net)
        with torch.no_grad():
            for (n, p), q in zip(moved.named_parameters(), net.parameters()):
                p.copy_(q - before_net[n])
        total = 0.0
        for (n1, d), (n2, p) in zip(export(moved, arch).named_parameters(), model.named_parameters()):
            torch.testing.assert_close(d, p.detach() - before_model[n2], atol=1e-5, rtol=1e-5)
            total += float(d.detach().abs().sum())
        everywhere = sum(float((p.detach() - before_net[n]).abs().sum()) for n, p in net.named_parameters())
        assert total > 0 and abs(everywhere - total) < 1e-4 * total


def layernorms(module):
    """Names of the nn.LayerNorm modules (ElasticLayerNorm included) under `module`."""
    return [n for n, m in module.named_modules() if isinstance(m, torch.nn.LayerNorm)]


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
@pytest.mark.parametrize("base", ["nasrec-full", "nasrec-small", "ctrnas-full"])
def test_layernorm_off_export_equals_supernet_path_without_layernorms(base):
    # `layernorm: false` (NASRec --use_layernorm 0): every op's LN is the identity in supernet and export;
    # only the Attention encoder's two residual LNs (ln1, ln2) stay, as in NASRec's Transformer.
    torch.manual_seed(0)
    schema = make_schema()
    space = get_space({"base": base, **TINY, "layernorm": False})
    net = Supernet(schema, space)
    assert all(n.endswith((".enc.ln1", ".enc.ln2")) for n in layernorms(net))
    batch = make_batch(schema, batch=8, seed=1)
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = space.sample(rng)
        check_equal(net, a, batch)
        model = export(net, a)
        assert all(n.endswith((".enc.ln1", ".enc.ln2")) for n in layernorms(model))
        if base == "nasrec-small":
            assert layernorms(model) == []
    scripted = torch.jit.script(model.net)  # nn.Identity in place of the LNs still compiles
    dense, kjt, _ = batch
    torch.testing.assert_close(scripted(dense, model.stem(kjt)), model(dense, kjt), atol=1e-6, rtol=0)


def test_layernorm_off_changes_the_function_and_on_is_the_default(schema):
    # Same seed, same weights apart from the LNs: switching LN off must change the output (the norms were
    # really removed), and an explicit `layernorm: true` builds exactly the default supernet.
    space_on = get_space({"base": "nasrec-full", **TINY})
    space_off = get_space({"base": "nasrec-full", **TINY, "layernorm": False})
    assert space_on.config.layernorm and get_space("nasrec-full").config.layernorm
    torch.manual_seed(0)
    net_on = Supernet(schema, space_on)
    torch.manual_seed(0)
    net_explicit = Supernet(schema, get_space({"base": "nasrec-full", **TINY, "layernorm": True}))
    torch.manual_seed(0)
    net_off = Supernet(schema, space_off)
    sd_on, sd_off = net_on.state_dict(), net_off.state_dict()
    assert set(sd_off) < set(sd_on)
    assert {k for k in sd_on if k not in sd_off} == {
        k for k in sd_on if ".ln." in k or k.endswith(("enc.ln0.weight", "enc.ln0.bias"))}
    for k, v in net_explicit.state_dict().items():
        torch.testing.assert_close(v, sd_on[k], atol=0, rtol=0)
    dense, kjt, _ = make_batch(schema, seed=5)
    a = space_on.sample(np.random.default_rng(5))
    assert not torch.allclose(net_on(dense, kjt, a), net_off(dense, kjt, a))


def test_fresh_export_draws_tables_with_the_chosen_embedding_init():
    schema = make_schema(cards=(5000, 40))
    net = Supernet(schema, tiny_space("nasrec-small"))
    arch = net.space.sample(np.random.default_rng(0))
    tr = export(net, arch, init="fresh", seed=3, embedding_init="torchrec")
    nr = export(net, arch, init="fresh", seed=3, embedding_init="nasrec")
    dense = lambda m: {n: p for n, p in m.named_parameters() if "embedding_bags" not in n}  # noqa: E731
    tables = lambda m: [p for n, p in sorted(m.named_parameters()) if "embedding_bags" in n]  # noqa: E731
    # only the tables differ; the dense weights are the same Xavier draws
    assert all(torch.equal(p, dense(nr)[n]) for n, p in dense(tr).items())
    for t_tr, t_nr in zip(tables(tr), tables(nr)):
        rows, dim = t_tr.shape
        bound = (1.0 / rows) ** 0.5  # TorchRec's EmbeddingBagConfig default: U(-sqrt(1/rows), sqrt(1/rows))
        assert t_tr.abs().max() <= bound and t_tr.abs().max() > 0.9 * bound
        assert t_tr.std().item() == pytest.approx(bound / 3 ** 0.5, rel=0.1)
        assert t_nr.std().item() == pytest.approx((2.0 / (rows + dim)) ** 0.5, rel=0.1)  # Xavier-normal
    # the same seed gives the same model
    again = export(net, arch, init="fresh", seed=3, embedding_init="torchrec")
    assert all(torch.equal(a, b) for a, b in zip(tr.state_dict().values(), again.state_dict().values()))
    with pytest.raises(ValueError, match="embedding_init"):
        export(net, arch, init="fresh", embedding_init="glorot")
