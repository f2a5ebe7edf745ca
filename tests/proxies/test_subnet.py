"""Proxies on a supernet path: parameters the subnet does not use change nothing (the σ > 0 mask and
used-parameter rule of docs/proxies.md, A4 and A6), and the shared supernet weights are left untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

supernet_mod = pytest.importorskip("ctrnas.supernet.supernet", reason="the supernet is not available")
from ctrnas.proxies import get_proxy  # noqa: E402
from ctrnas.space import SpaceConfig  # noqa: E402
from ctrnas.supernet.testing import make_batch, make_schema  # noqa: E402

TINY = SpaceConfig(name="tiny", num_blocks=3, dense_dims=(8, 16), sparse_tokens=(4, 8), emb_dim=8,
                   attention_heads=2, merge_tokens=2)


class WholeSupernetPath(nn.Module):
    """The subnet's path, but exposing *every* supernet parameter (most get no gradient)."""

    def __init__(self, supernet, arch):
        super().__init__()
        self.supernet, self.arch = supernet, arch

    def forward(self, dense, kjt):
        return self.supernet(dense, kjt, self.arch)


@pytest.fixture(scope="module")
def subnet_case():
    torch.manual_seed(0)   # module construction only; every score below reuses these fixed weights
    schema = make_schema()
    sn = supernet_mod.Supernet(schema, TINY)
    arch = sn.space.sample(np.random.default_rng(3))
    batches = []
    for s in range(4):
        d, k, y = make_batch(schema, 16, seed=s)
        batches.append(((d, k), y))
    return sn, arch, batches


@pytest.mark.parametrize("name,opts", [("sigeo", {}), ("sigeo", {"preset": "warmup_recsys"}), ("zico", {}),
                                       ("grad_norm", {}), ("snip", {}), ("nasi", {})])
def test_unused_supernet_parameters_do_not_change_the_score(subnet_case, name, opts):
    sn, arch, batches = subnet_case
    proxy = get_proxy(name, **opts)
    view_model, whole_model = sn.subnet(arch), WholeSupernetPath(sn, arch)
    view = proxy.score(view_model, batches, F.binary_cross_entropy_with_logits)
    whole = proxy.score(whole_model, batches, F.binary_cross_entropy_with_logits)
    assert whole.value == pytest.approx(view.value, rel=1e-9)
    if name == "sigeo":   # the same tensors are used; the rest of the supernet is reported unused
        vp, wp = dict(view_model.named_parameters()), dict(whole_model.named_parameters())
        assert {id(wp[n]) for n in whole.meta["fr_params"]} == {id(vp[n]) for n in view.meta["fr_params"]}
        assert len(whole.meta["unused_params"]) > len(view.meta["unused_params"])


def test_scoring_a_subnet_leaves_the_supernet_unchanged(subnet_case):
    sn, arch, batches = subnet_case
    before = {k: v.clone() for k, v in sn.state_dict().items()}
    for name in ("sigeo", "synflow", "ntk_trace", "dextr"):
        get_proxy(name).score(sn.subnet(arch), batches, F.binary_cross_entropy_with_logits)
    after = sn.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None for p in sn.parameters())


def test_layerwise_ntk_equals_vmap_ntk_on_a_supernet_path(subnet_case):
    """Linear layers by the per-sample-gradient identity, the rest (attention, norms) by vmap: same K."""
    sn, arch, batches = subnet_case
    sub = sn.subnet(arch)
    fast = get_proxy("ntk_trace", num_samples=8).score(sub, batches)
    ref = get_proxy("ntk_trace", num_samples=8, method="vmap").score(sub, batches)
    for term in ("trace", "lambda_min", "lambda_max", "knas"):
        assert fast.terms[term] == pytest.approx(ref.terms[term], rel=1e-4), term
