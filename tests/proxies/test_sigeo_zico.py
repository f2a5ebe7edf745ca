"""SiGeo and ZiCo against a numpy re-computation from hand-derived gradients (SiGeo Eq. 7, ZiCo code)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ctrnas.proxies import get_proxy

LINEAR_W = ("bottom.weight", "fc1.weight", "out.weight")
DENSE = ("bottom.weight", "bottom.bias", "fc1.weight", "fc1.bias", "out.weight", "out.bias")


def np_grads(h, model, raw, accumulate=False):
    P = h.np_params(model)
    gs, losses = [], []
    run = None
    for (inp, y), yy, ids in [((r[0], r[1]), r[1], r[2]) for r in raw]:
        _, loss, g, _ = h.np_forward_backward(P, inp[0].numpy(), ids, y=yy.numpy().astype(np.float64))
        if accumulate:
            run = g if run is None else {k: run[k] + g[k] for k in g}
            g = run
        gs.append(g)
        losses.append(loss)
    return P, gs, losses


def np_zico(gs, names, first_nonzero_only=False):
    total = 0.0
    for n in names:
        G = np.stack([g[n].ravel() for g in gs])
        std = np.std(G, axis=0)
        nz = np.nonzero(std)[0]
        if first_nonzero_only:   # the published SiGeo torch port: torch.nonzero(std)[0] -> one index
            nz = nz[:1]
        s = np.sum(np.mean(np.abs(G), axis=0)[nz] / std[nz])
        if s != 0:
            total += math.log(s)
    return total


def np_fr(P, gs, names=DENSE):
    theta = np.concatenate([P[n].ravel() for n in names])
    dots = [theta @ np.concatenate([g[n].ravel() for n in names]) for g in gs]
    return math.log(np.mean(np.square(dots)))


def test_zico_equals_numpy_reference(ctr, h):
    model, batches, raw = ctr
    _, gs, _ = np_grads(h, model, raw)
    res = get_proxy("zico").score(model, batches, h.bce)
    assert res.value == pytest.approx(np_zico(gs, LINEAR_W), rel=1e-6)
    assert set(res.meta["modules_contributing"]) == {"bottom", "fc1", "out"}


def test_zico_official_accumulate_switch_matches_cumulative_gradients(ctr, h):
    model, batches, raw = ctr
    _, gs_acc, _ = np_grads(h, model, raw, accumulate=True)
    _, gs, _ = np_grads(h, model, raw)
    acc = get_proxy("zico", official_accumulate=True).score(model, batches, h.bce).value
    assert acc == pytest.approx(np_zico(gs_acc, LINEAR_W), rel=1e-6)
    assert abs(acc - np_zico(gs, LINEAR_W)) > 1e-3


@pytest.mark.parametrize("preset,lams", [("zero_shot", (1, 1, 0)), ("warmup_recsys", (1, 1, 1)),
                                         ("warmup_cv", (1, 50, 1))])
def test_sigeo_presets_equal_numpy_reference(ctr, h, preset, lams):
    model, batches, raw = ctr
    P, gs, losses = np_grads(h, model, raw)
    res = get_proxy("sigeo", preset=preset).score(model, batches, h.bce)
    z, fr, loss = np_zico(gs, LINEAR_W), np_fr(P, gs), float(np.mean(losses))
    assert res.terms["zico"] == pytest.approx(z, rel=1e-6)
    assert res.terms["fr"] == pytest.approx(fr, rel=1e-6)
    assert res.terms["loss"] == pytest.approx(loss, rel=1e-6)
    assert res.value == pytest.approx(lams[0] * z + lams[1] * fr - lams[2] * loss, rel=1e-6)
    assert res.meta["lambdas"] == tuple(float(x) for x in lams)


def test_sigeo_loss_last_and_explicit_lambdas(ctr, h):
    model, batches, raw = ctr
    _, gs, losses = np_grads(h, model, raw)
    proxy = get_proxy("sigeo", preset="warmup_recsys", lam2=0.0, lam3=2.0, loss_reduce="last")
    res = proxy.score(model, batches, h.bce)
    assert res.value == pytest.approx(np_zico(gs, LINEAR_W) - 2.0 * losses[-1], rel=1e-6)


def test_sigeo_with_lambda2_lambda3_zero_equals_zico(ctr, h):
    model, batches, _ = ctr
    for modules in ("zico", "ctr", "all"):
        s = get_proxy("sigeo", lam2=0.0, lam3=0.0, modules=modules).score(model, batches, h.bce).value
        z = get_proxy("zico", modules=modules).score(model, batches, h.bce).value
        assert s == pytest.approx(z, rel=1e-12)


def test_sigeo_neuron_wise_is_one_log_over_all_elements(ctr, h):
    model, batches, raw = ctr
    _, gs, _ = np_grads(h, model, raw)
    G = np.stack([np.concatenate([g[n].ravel() for n in LINEAR_W]) for g in gs])
    std = np.std(G, axis=0)
    nz = std > 0
    want = math.log(np.sum(np.mean(np.abs(G), 0)[nz] / std[nz]))
    res = get_proxy("sigeo", variant="neuron", lam2=0.0).score(model, batches, h.bce)
    assert res.value == pytest.approx(want, rel=1e-6)


def test_zico_uses_every_nonzero_element_not_only_the_first(ctr, h):
    """Published SiGeo bug 1: torch.nonzero(std)[0] keeps one element per module."""
    model, batches, raw = ctr
    _, gs, _ = np_grads(h, model, raw)
    got = get_proxy("zico").score(model, batches, h.bce).value
    buggy = np_zico(gs, LINEAR_W, first_nonzero_only=True)
    assert got == pytest.approx(np_zico(gs, LINEAR_W), rel=1e-6)
    assert abs(got - buggy) > 1.0


def test_sigeo_scores_every_layer_not_only_the_output_layer(ctr, h):
    """Published SiGeo bug 2: frozen blocks left only the final Linear with gradients. Every layer
    must contribute to both terms, and changing an inner layer must change the score."""
    model, batches, raw = ctr
    P, gs, _ = np_grads(h, model, raw)
    res = get_proxy("sigeo").score(model, batches, h.bce)
    assert set(res.meta["modules_contributing"]) == {"bottom", "fc1", "out"}
    assert set(res.meta["fr_params"]) == set(DENSE)
    out_only = np_zico(gs, ("out.weight",)) + np_fr(P, gs, ("out.weight", "out.bias"))
    assert abs(res.value - out_only) > 1e-3
    with torch.no_grad():
        model.bottom.weight.mul_(1.5)
    assert get_proxy("sigeo").score(model, batches, h.bce).value != pytest.approx(res.value, rel=1e-6)


def test_sigeo_embeddings_optional_in_both_terms(ctr, h):
    model, batches, raw = ctr
    P, gs, _ = np_grads(h, model, raw)
    emb = [f"ebc.embedding_bags.t_{f}.weight" for f in h.FEATS]
    for i, f in enumerate(h.FEATS):
        P[emb[i]] = P["emb"][i]
    res = get_proxy("sigeo", embeddings=True, fr_embeddings=True).score(model, batches, h.bce)
    assert res.terms["zico"] == pytest.approx(np_zico(gs, LINEAR_W + tuple(emb)), rel=1e-6)
    assert res.terms["fr"] == pytest.approx(np_fr(P, gs, DENSE + tuple(emb)), rel=1e-6)


def test_sigeo_zero_fr_gives_nan_or_floor(ctr, h):
    model, batches, _ = ctr
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()   # all-zero weights: θ = 0 so θᵀg = 0
    assert math.isnan(get_proxy("sigeo").score(model, batches, h.bce).terms["fr"])
    assert get_proxy("sigeo", fr_floor=1e-30).score(model, batches, h.bce).terms["fr"] == pytest.approx(math.log(1e-30))


def test_sigeo_update_between_batches_follows_sgd_iterates_and_restores_weights(ctr, h):
    model, batches, raw = ctr
    lr = 0.3
    P = h.np_params(model)
    emb = [f"ebc.embedding_bags.t_{f}.weight" for f in h.FEATS]
    gs, losses = [], []
    for inp, y, ids in raw:
        _, loss, g, _ = h.np_forward_backward(P, inp[0].numpy(), ids, y=y.numpy().astype(np.float64))
        gs.append(g)
        losses.append(loss)
        P = {k: (v - lr * g[k] if k in g else v) for k, v in P.items() if k != "emb"} | {
            "emb": [P["emb"][j] - lr * g[e] for j, e in enumerate(emb)]}
    before = {k: v.clone() for k, v in model.state_dict().items()}
    res = get_proxy("sigeo", preset="warmup_recsys", update_lr=lr).score(model, batches, h.bce)
    assert res.terms["zico"] == pytest.approx(np_zico(gs, LINEAR_W), rel=1e-5)
    assert res.terms["fr"] == pytest.approx(np_fr(P, gs), rel=1e-5)        # θ_k = the last iterate
    assert res.terms["loss"] == pytest.approx(float(np.mean(losses)), rel=1e-5)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_sigeo_with_embeddings_accepts_row_sparse_table_gradients(ctr, h):
    model, batches, _ = ctr
    dense = get_proxy("sigeo", embeddings=True, fr_embeddings=True).score(model, batches, h.bce)
    for bag in model.ebc.embedding_bags.values():
        bag.sparse = True  # as after the trainer's use_sparse_gradients(): backward gives sparse COO grads
    sparse = get_proxy("sigeo", embeddings=True, fr_embeddings=True).score(model, batches, h.bce)
    for k in ("zico", "fr", "loss"):
        assert sparse.terms[k] == pytest.approx(dense.terms[k], rel=1e-9)
