"""NTK trace / Eigen-NAS, HNAS, NASI, jacov, EPE-NAS, GraSP, Fisher, Zen and Dextr against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from ctrnas.errors import CtrnasError
from ctrnas.proxies import get_proxy
from ctrnas.proxies.nasi import AdaptiveNu

DENSE = ("bottom.weight", "bottom.bias", "fc1.weight", "fc1.bias", "out.weight", "out.bias")
LINEAR_W = ("bottom.weight", "fc1.weight", "out.weight")


def np_batch(raw, i=0):
    return raw[i][0][0].numpy().astype(np.float64), raw[i][2], raw[i][1].numpy().astype(np.float64)


def np_ntk(h, model, raw, n):
    P = h.np_params(model)
    dense, ids, _ = np_batch(raw)
    rows = []
    for i in range(n):
        e = np.zeros(len(dense))
        e[i] = 1.0
        _, _, g, _ = h.np_forward_backward(P, dense, ids, dy=e)
        rows.append(np.concatenate([g[k].ravel() for k in DENSE]))
    J = np.stack(rows)
    return J @ J.T


@pytest.mark.parametrize("method", ["layerwise", "vmap", "loop"])
def test_ntk_trace_and_spectrum_equal_numpy(ctr, h, method):
    model, batches, raw = ctr
    K = np_ntk(h, model, raw, 6)
    ev = np.linalg.eigvalsh(K)
    res = get_proxy("ntk_trace", num_samples=6, method=method).score(model, batches)
    assert res.value == pytest.approx(np.trace(K), rel=1e-5)
    assert res.terms["lambda_min"] == pytest.approx(ev[0], rel=1e-3)
    assert res.terms["cond"] == pytest.approx(ev[-1] / ev[0], rel=1e-3)
    assert res.terms["knas"] == pytest.approx(math.sqrt(abs(K.mean())), rel=1e-5)


def test_hnas_is_minus_kappa_over_m_plus_penalty(ctr, h):
    model, batches, raw = ctr
    K = np_ntk(h, model, raw, 6)
    ev = np.linalg.eigvalsh(K)
    M = math.sqrt(np.trace(K) / 6)
    want = -(ev[-1] / ev[0] / M + 0.5 * (M * M - 10.0) ** 2)
    got = get_proxy("hnas", num_samples=6, mu=0.5, nu=10.0).score(model, batches).value
    assert got == pytest.approx(want, rel=1e-3)


def test_nasi_trace_approximation_and_constrained_fitness(ctr, h):
    model, batches, raw = ctr
    dense, ids, y = np_batch(raw)
    _, _, g, _ = h.np_forward_backward(h.np_params(model), dense, ids, y=y)
    t = sum(np.sum(g[k] ** 2) for k in DENSE)
    assert get_proxy("nasi").score(model, batches, h.bce).value == pytest.approx(t, rel=1e-5)
    nu = 0.75 * t
    r = get_proxy("nasi", mu=2.0, nu=nu).score(model, batches, h.bce)
    assert r.value == pytest.approx(t - 2.0 * (t - nu), rel=1e-5)
    assert get_proxy("nasi", mu=2.0, nu=2 * t).score(model, batches, h.bce).value == pytest.approx(t, rel=1e-5)


def test_adaptive_nu_is_running_mean_with_nu0():
    nu = AdaptiveNu(nu0=10.0)
    assert nu.value() == 10.0
    nu.update(4.0)
    nu.update(1.0)
    assert nu.value() == pytest.approx((10 + 4 + 1) / 3)


def test_jacov_equals_numpy_on_dense_and_embedding_inputs(ctr, h):
    model, batches, raw = ctr
    P = h.np_params(model)
    dense, ids, _ = np_batch(raw)
    _, _, _, acts = h.np_forward_backward(P, dense, ids, dy=np.ones(len(dense)))
    # d Σ logits / d h, then through bottom to the dense input
    a = acts["a"]
    dh = ((np.ones((len(dense), 1)) @ P["out.weight"]) * (a > 0)) @ P["fc1.weight"]
    J = np.concatenate([dh[:, :4] @ P["bottom.weight"], dh[:, 4:]], axis=1)
    v = np.linalg.eigvalsh(np.corrcoef(J))
    want = -np.sum(np.log(v + 1e-5) + 1 / (v + 1e-5))
    assert get_proxy("jacov").score(model, batches).value == pytest.approx(want, rel=1e-4)


def small_classifier():
    torch.manual_seed(0)  # only builds the module; weights are overwritten below
    m = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    x = torch.randn(12, 5, generator=g)
    y = torch.tensor([0, 1, 2] * 4)
    return m, [((x,), y)]


def test_epe_nas_equals_numpy_and_refuses_ctr(ctr, h):
    m, batches = small_classifier()
    W1, b1, W2 = (p.detach().double().numpy() for p in (m[0].weight, m[0].bias, m[2].weight))
    x, y = batches[0][0][0].double().numpy(), batches[0][1].numpy()
    J = ((W2.sum(0)[None, :]) * ((x @ W1.T + b1) > 0)) @ W1
    s = []
    for c in range(3):
        s.append(np.sum(np.log(np.abs(np.corrcoef(J[y == c])) + 1e-5)))
    want = sum(abs(a - b) for a in s for b in s) / 3
    assert get_proxy("epe_nas").score(m, batches).value == pytest.approx(want, rel=1e-6)
    model, cb, _ = ctr
    with pytest.raises(CtrnasError, match="classification"):
        get_proxy("epe_nas").score(model, cb)


def np_grad_fn(h, model, raw):
    dense, ids, y = np_batch(raw)
    P0 = h.np_params(model)

    def grad(P):
        return h.np_forward_backward(P, dense, ids, y=y)[2]
    return P0, grad


def test_grasp_equals_finite_difference_hessian_vector_product(ctr, h):
    model, batches, raw = ctr
    P, grad = np_grad_fn(h, model, raw)
    g = grad(P)
    eps = 1e-6
    Pp = {k: (v + eps * g[k] if k in LINEAR_W else v) for k, v in P.items()}
    Pm = {k: (v - eps * g[k] if k in LINEAR_W else v) for k, v in P.items()}
    gp, gm = grad(Pp), grad(Pm)
    thg = sum(np.sum(P[k] * (gp[k] - gm[k]) / (2 * eps)) for k in LINEAR_W)
    assert get_proxy("grasp").score(model, batches, h.bce).value == pytest.approx(-thg, rel=1e-4)
    assert get_proxy("grasp", form="thesis").score(model, batches, h.bce).value == pytest.approx(abs(thg), rel=1e-4)


def test_fisher_equals_numpy_activation_gradient_products(ctr, h):
    model, batches, raw = ctr
    P = h.np_params(model)
    dense, ids, y = np_batch(raw)
    logit, _, g, acts = h.np_forward_backward(P, dense, ids, y=y)
    B = len(dense)
    dy = (1 / (1 + np.exp(-logit)) - y) / B
    da = (dy[:, None] @ P["out.weight"]) * (acts["a"] > 0)
    dz = (da @ P["fc1.weight"])[:, :4]
    want = sum(0.5 * np.sum(np.mean((act * gr) ** 2, axis=0))
               for act, gr in ((acts["z"], dz), (acts["a"], da), (logit[:, None], dy[:, None])))
    assert get_proxy("fisher").score(model, batches, h.bce).value == pytest.approx(want, rel=1e-5)


def test_zen_equals_numpy_with_documented_draws(ctr, h):
    model, batches, raw = ctr
    P = h.np_params(model)
    B = raw[0][2].shape[0]
    g = torch.Generator().manual_seed(5)
    shapes = [(B, 3), (B, 4), (B, 4)]
    x = [torch.randn(s, generator=g).double().numpy() for s in shapes]
    e = [torch.randn(s, generator=g).double().numpy() for s in shapes]

    def feat(xs):
        z = xs[0] @ P["bottom.weight"].T + P["bottom.bias"]
        return np.maximum(np.concatenate([z, xs[1], xs[2]], 1) @ P["fc1.weight"].T + P["fc1.bias"], 0)
    d = np.mean(np.abs(feat(x) - feat([a + 1e-2 * b for a, b in zip(x, e)])).sum(1))
    assert get_proxy("zen", seed=5).score(model, batches).value == pytest.approx(math.log(d), rel=1e-4)


def test_zen_batchnorm_term_is_log_std_of_bn_input():
    m = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    batches = [((torch.zeros(16, 4),), torch.zeros(16, dtype=torch.long))]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 4, generator=g)
    pre = (x @ m[0].weight.T + m[0].bias).detach().double().numpy()
    want = 0.5 * math.log(np.mean(np.var(pre, axis=0)))
    assert get_proxy("zen").score(m, batches).terms["bn"] == pytest.approx(want, rel=1e-5)


def test_dextr_curvature_of_a_scaled_isometry_is_one_over_radius_times_scale():
    D, s, r = 6, 3.0, 2.0
    q, _ = torch.linalg.qr(torch.randn(D, D, generator=torch.Generator().manual_seed(1)))
    m = nn.Linear(D, D, bias=False)
    with torch.no_grad():
        m.weight.copy_(s * q)
    batches = [((torch.randn(4, D),), torch.zeros(4))]
    res = get_proxy("dextr", radius=r).score(m, batches)
    assert res.terms["curvature"] == pytest.approx(1 / (s * r), rel=1e-4)
    A, B = math.log1p(res.terms["fmi"]), math.log1p(1 / (s * r))
    assert res.value == pytest.approx(A * B / (A + B), rel=1e-4)


@pytest.mark.parametrize("rows", [None, 5])
def test_dextr_fmi_uses_batch_matrices_of_ctr_activations(ctr, h, rows):
    model, batches, raw = ctr
    P = h.np_params(model)
    dense, ids, _ = np_batch(raw)
    _, _, _, acts = h.np_forward_backward(P, dense, ids, dy=np.zeros(len(dense)))
    mats = [P["emb"][0][ids[:, 0]], P["emb"][1][ids[:, 1]], acts["z"], acts["a"], np.maximum(acts["a"], 0)]
    want = 0.0
    for X in mats:
        sv = np.linalg.svd(X[:rows], compute_uv=False)
        want += sv.min() / sv.max()
    res = get_proxy("dextr", fmi_rows=rows).score(model, batches)
    assert res.terms["fmi"] == pytest.approx(want, rel=1e-4)
    assert res.meta["curve_space"] == "last_linear_input"
    assert res.terms["curvature"] > 0


@pytest.mark.parametrize("method", ["vmap", "loop"])
def test_ntk_parameter_chunking_gives_the_same_kernel(ctr, h, method):
    model, batches, _ = ctr
    whole = get_proxy("ntk_trace", num_samples=6, method=method).score(model, batches).value
    tiny = get_proxy("ntk_trace", num_samples=6, method=method, max_jacobian_mb=1e-4)
    res = tiny.score(model, batches)
    assert res.value == pytest.approx(whole, rel=1e-6)


def test_layerwise_ntk_equals_vmap_on_a_cnn_with_several_outputs(h):
    """Conv/BN parameters go through vmap, the 3-output Linear through the identity; rows (sample, class)."""
    model = h.TinyCNN()
    batches = h.cnn_batches()
    fast = get_proxy("ntk_trace", num_samples=4).score(model, batches)
    ref = get_proxy("ntk_trace", num_samples=4, method="vmap").score(model, batches)
    assert fast.meta["rows"] == 12
    for term in ("trace", "lambda_min", "lambda_max", "knas"):
        assert fast.terms[term] == pytest.approx(ref.terms[term], rel=1e-4), term


def test_dextr_parity_counts_one_per_module_for_vector_outputs():
    """The reference code hooks every module (root included) and takes the first sample's d×1 matrix
    of a 1-D per-sample output, whose single singular value gives 1/c = 1 (Dextr's reference code)."""
    m = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3))
    batches = [((torch.randn(6, 4, generator=torch.Generator().manual_seed(0)),), torch.zeros(6))]
    res = get_proxy("dextr", parity=True).score(m, batches)
    assert res.terms["fmi"] == pytest.approx(4.0)
    assert math.isfinite(res.terms["curvature"])


class _WithEmpty(nn.Module):
    """The Linear-ReLU-Linear of the parity test with a module whose output has no elements beside it (as the
    `none` sparse op's [B, 0, E] tokens), concatenated into nothing."""

    def __init__(self, seq: nn.Module):
        super().__init__()
        self.seq, self.none = seq, nn.Identity()

    def forward(self, x):
        empty = self.none(x[:, :0].unsqueeze(2).expand(-1, -1, 3))  # [B, 0, 3]
        return torch.cat([self.seq(x), empty.flatten(1)], dim=1)


@pytest.mark.parametrize("parity", [False, True])
def test_dextr_skips_outputs_with_no_elements(parity):
    """An empty output has no feature matrix: DEXTR's FMI leaves it out (it raised before), so the model scores
    what it scores without the empty module (the root's own output and the curvature are the same tensors)."""
    torch.manual_seed(0)
    seq = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3))
    batches = [((torch.randn(6, 4, generator=torch.Generator().manual_seed(0)),), torch.zeros(6))]
    proxy = get_proxy("dextr", parity=parity)
    with_empty, alone = proxy.score(_WithEmpty(seq), batches), proxy.score(nn.Sequential(seq), batches)
    assert with_empty.terms["fmi"] == pytest.approx(alone.terms["fmi"], rel=1e-6)
    assert with_empty.value == pytest.approx(alone.value, rel=1e-6)
