"""Size- and depth-normalised SiGeo / ZiCo (the `normalise` option) against the numpy reference of test_sigeo_zico.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ctrnas.errors import RecipeError
from ctrnas.proxies import get_proxy

from .test_sigeo_zico import LINEAR_W, np_fr, np_grads


def np_logs(gs, names, mean_elements):
    """One log per module of its ratio sum (or mean) over elements with std > 0."""
    out = []
    for n in names:
        G = np.stack([g[n].ravel() for g in gs])
        std = np.std(G, axis=0)
        nz = std > 0
        ratio = np.mean(np.abs(G), axis=0)[nz] / std[nz]
        out.append(math.log(ratio.mean() if mean_elements else ratio.sum()))
    return out


@pytest.mark.parametrize("normalise", ["modules", "elements", "both"])
def test_zico_normalised_equals_numpy(ctr, h, normalise):
    model, batches, raw = ctr
    _, gs, _ = np_grads(h, model, raw)
    logs = np_logs(gs, LINEAR_W, normalise in ("elements", "both"))
    want = sum(logs) / len(logs) if normalise in ("modules", "both") else sum(logs)
    assert get_proxy("zico", normalise=normalise).score(model, batches, h.bce).value == pytest.approx(want, rel=1e-6)
    # the plain sum is not what the normalised readings return (three modules of different sizes)
    assert abs(want - sum(np_logs(gs, LINEAR_W, False))) > 1e-3


def test_sigeo_normalised_changes_term_1_only(ctr, h):
    model, batches, raw = ctr
    P, gs, losses = np_grads(h, model, raw)
    logs = np_logs(gs, LINEAR_W, True)
    res = get_proxy("sigeo", preset="warmup_recsys", normalise="both").score(model, batches, h.bce)
    assert res.terms["zico"] == pytest.approx(sum(logs) / len(logs), rel=1e-6)
    assert res.value == pytest.approx(sum(logs) / len(logs) + np_fr(P, gs) - float(np.mean(losses)), rel=1e-6)
    registered = get_proxy("sigeo_norm", preset="warmup_recsys").score(model, batches, h.bce)
    assert registered.value == res.value


def test_sigeo_norm_gets_the_warmup_preset_in_a_search():
    from ctrnas.pipeline.fitness.ctr_fitness import proxy_options

    assert proxy_options("sigeo_norm", {}, 0.0)["preset"] == "zero_shot"
    assert proxy_options("sigeo_norm", {}, 0.01)["preset"] == "warmup_recsys"
    assert proxy_options("sigeo", {}, 0.01)["preset"] == "warmup_recsys"
    assert "preset" not in proxy_options("zico", {}, 0.01)  # only SiGeo and its variants have presets
    assert proxy_options("sigeo", {"preset": "zico"}, 0.01)["preset"] == "zico"  # the recipe's own wins


def test_unknown_normalise_is_a_recipe_error(ctr, h):
    model, batches, _ = ctr
    with pytest.raises(RecipeError, match="normalise"):
        get_proxy("zico", normalise="blocks").score(model, batches, h.bce)


def test_a_proxy_declares_its_batch_count_and_its_warmup_options(monkeypatch):
    """The search and the vision harness ask the proxy (`batch_option`, `warmup_options`), so a new proxy
    with such rules needs no change in them."""
    from dataclasses import dataclass
    from typing import ClassVar

    import torch

    from ctrnas.pipeline.fitness.ctr_fitness import ProxyFitness, proxy_options
    from ctrnas.proxies import base
    from ctrnas.train.batches import TensorRows
    from ctrnas.vision.proxies import proxy_for

    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # registered for this test only

    @base.register("toy_steps")
    @dataclass(frozen=True)
    class ToySteps(base.Proxy):
        steps: int = 1
        scale: str = "none"
        batch_option: ClassVar[str | None] = "steps"

        @classmethod
        def warmup_options(cls, options, warmed_up, domain="ctr"):
            return {"scale": f"{domain} {'warm' if warmed_up else 'cold'}", **options}

        def _compute(self, model, batches, loss_fn):
            return 0.0, {}, {}

    assert proxy_options("toy_steps", {}, 0.0) == {"scale": "ctr cold"}
    assert proxy_options("toy_steps", {"scale": "mine"}, None) == {"scale": "mine"}
    assert proxy_for("toy_steps", 0.1) == ToySteps(scale="cv warm")
    rows = TensorRows(torch.zeros(6, 1), torch.zeros(6, 1, dtype=torch.int64), torch.zeros(6), ("c",))
    fitness = ProxyFitness(None, "toy_steps", proxy_options("toy_steps", {}, 0.5), rows, 2, 3)
    assert fitness.proxy == ToySteps(steps=3, scale="ctr warm")  # its batch count follows the fitness's
    assert "k" not in ProxyFitness(None, "params", {}, rows, 2, 3).options  # a proxy without one gets none
