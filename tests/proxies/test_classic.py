"""Classic zero-cost proxies against numpy / hand computations on the tiny fixed-weight CTR model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ctrnas.proxies import get_proxy

LINEAR_W = ("bottom.weight", "fc1.weight", "out.weight")


def first(h, model, raw):
    P = h.np_params(model)
    dense, y, ids = raw[0][0][0].numpy(), raw[0][1].numpy().astype(np.float64), raw[0][2]
    return P, h.np_forward_backward(P, dense, ids, y=y)


def test_params_counts_by_hand(ctr, h):
    model, batches, _ = ctr
    dense = 3 * 4 + 4 + 12 * 6 + 6 + 6 * 1 + 1
    assert get_proxy("params").score(model, batches).value == dense + 2 * 5 * 4
    assert get_proxy("params", embeddings=False).score(model, batches).value == dense


def test_params_used_only_skips_parameters_off_the_path(ctr, h):
    model, batches, _ = ctr
    model.unused = torch.nn.Linear(7, 7)   # like a supernet op this subnet does not run
    res = get_proxy("params", used_only=True, embeddings=False).score(model, batches)
    assert res.value == 3 * 4 + 4 + 12 * 6 + 6 + 6 + 1
    assert get_proxy("params", embeddings=False).score(model, batches).value == res.value + 56


def test_flops_per_sample_by_hand(ctr, h):
    model, batches, _ = ctr
    assert get_proxy("flops").score(model, batches).value == 2 * (3 * 4 + 12 * 6 + 6 * 1)


@pytest.mark.parametrize("reduce", ["layer_sum", "global"])
def test_grad_norm_equals_numpy(ctr, h, reduce):
    model, batches, raw = ctr
    _, (_, _, g, _) = first(h, model, raw)
    if reduce == "layer_sum":
        want = sum(np.linalg.norm(g[n]) for n in LINEAR_W)
    else:
        want = math.sqrt(sum(np.sum(g[n] ** 2) for n in LINEAR_W))
    assert get_proxy("grad_norm", reduce=reduce).score(model, batches, h.bce).value == pytest.approx(want, rel=1e-5)


def test_snip_and_plain_equal_numpy(ctr, h):
    model, batches, raw = ctr
    P, (_, _, g, _) = first(h, model, raw)
    snip = sum(np.abs(P[n] * g[n]).sum() for n in LINEAR_W)
    inner = abs(sum((P[n] * g[n]).sum() for n in LINEAR_W))
    plain = sum((P[n] * g[n]).sum() for n in LINEAR_W)
    assert get_proxy("snip").score(model, batches, h.bce).value == pytest.approx(snip, rel=1e-5)
    assert get_proxy("snip", form="inner").score(model, batches, h.bce).value == pytest.approx(inner, rel=1e-5)
    assert get_proxy("plain").score(model, batches, h.bce).value == pytest.approx(plain, rel=1e-5)


def test_l2_norm_equals_numpy(ctr, h):
    model, batches, _ = ctr
    P = h.np_params(model)
    want = sum(np.linalg.norm(P[n]) for n in LINEAR_W)
    assert get_proxy("l2_norm").score(model, batches).value == pytest.approx(want, rel=1e-6)


def test_synflow_equals_numpy_sign_linearised_backprop(ctr, h):
    model, batches, raw = ctr
    P = h.np_params(model)
    ids = raw[0][2]
    B = ids.shape[0]
    _, _, g, _ = h.np_forward_backward(P, np.ones((B, 3)), ids, dy=np.ones(B), abs_params=True)
    want = sum(np.abs(np.abs(P[n]) * g[n]).sum() for n in LINEAR_W) / B
    assert get_proxy("synflow").score(model, batches).value == pytest.approx(want, rel=1e-9)


def test_naswot_equals_numpy_hamming_kernel(h):
    model = h.TinyCTR()
    raw = h.ctr_batches(k=1, B=4, seed=5)
    batches = [(inp, y) for inp, y, _ in raw]
    P = h.np_params(model)
    _, _, _, acts = h.np_forward_backward(P, raw[0][0][0].numpy(), raw[0][2], dy=np.zeros(4))
    c = (acts["a"] > 0).astype(np.float64)
    K = c @ c.T + (1 - c) @ (1 - c).T
    sign, logdet = np.linalg.slogdet(K)
    assert sign > 0    # a non-singular case, so the log-determinant itself is compared
    assert get_proxy("naswot").score(model, batches).value == pytest.approx(logdet, rel=1e-9)


def test_naswot_falls_back_to_linear_preactivations_without_relu_modules(h):
    model = h.TinyCTR()
    model.act = torch.nn.Identity()
    res = get_proxy("naswot").score(model, [(inp, y) for inp, y, _ in h.ctr_batches(k=1, B=4, seed=7)])
    assert res.meta["units"] == "linear_preactivation"
    assert res.meta["layers"] == ["bottom", "fc1", "out"]
