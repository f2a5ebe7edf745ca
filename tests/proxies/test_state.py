"""Every registered proxy is deterministic and leaves the model exactly as it found it."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ctrnas.errors import RecipeError
from ctrnas.proxies import get_proxy, list_proxies

CLASSIFICATION_ONLY = {"epe_nas"}


def snapshot(model):
    return ({k: v.clone() for k, v in model.state_dict().items()},
            {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()},
            [m.training for m in model.modules()], [p.requires_grad for p in model.parameters()])


def assert_same(a, b):
    sa, ga, ma, ra = a
    sb, gb, mb, rb = b
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]), k
    for k in ga:
        assert (ga[k] is None) == (gb[k] is None) and (ga[k] is None or torch.equal(ga[k], gb[k])), k
    assert ma == mb and ra == rb


def same_value(x, y):
    return (math.isnan(x) and math.isnan(y)) or x == y


@pytest.mark.parametrize("name", [n for n in list_proxies() if n not in CLASSIFICATION_ONLY])
def test_proxy_on_ctr_model_is_deterministic_and_restores_state(name, ctr, h):
    model, batches, _ = ctr
    model.eval()                     # a mode the proxies change; must come back
    model.fc1.weight.grad = torch.ones_like(model.fc1.weight)   # a stale grad must come back too
    before = snapshot(model)
    proxy = get_proxy(name)
    r1 = proxy.score(model, batches, h.bce)
    assert_same(before, snapshot(model))
    r2 = proxy.score(model, batches, h.bce)
    assert same_value(r1.value, r2.value)
    assert r1.meta["proxy"] == name and r1.meta["time_s"] >= 0


@pytest.mark.parametrize("name", list_proxies())
def test_proxy_on_cnn_keeps_batchnorm_statistics(name, h):
    model = h.TinyCNN()
    batches = h.cnn_batches()
    before = snapshot(model)
    r1 = get_proxy(name).score(model, batches, F.cross_entropy)
    assert_same(before, snapshot(model))
    assert same_value(r1.value, get_proxy(name).score(model, batches, F.cross_entropy).value)


def test_unknown_proxy_and_option_are_reported():
    with pytest.raises(RecipeError, match="unknown proxy"):
        get_proxy("nope")
    with pytest.raises(RecipeError, match="lam4"):
        get_proxy("sigeo", lam4=1.0)


def test_option_types_are_checked_against_the_fields():
    assert get_proxy("sigeo", lam2=50).lambdas()[1] == 50.0       # an int is a valid float
    assert get_proxy("sigeo", fr_floor=None).fr_floor is None
    with pytest.raises(RecipeError, match="k"):
        get_proxy("sigeo", k="4")
    with pytest.raises(RecipeError, match="accumulate"):
        get_proxy("sigeo", accumulate="yes")
    with pytest.raises(RecipeError, match="preset"):
        get_proxy("sigeo", preset="nope").lambdas()
