"""Divergence detection: a NaN/inf loss or a runaway mean loss stops the training and says where and why."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.train.batches import TensorBatches
from ctrnas.train.config import TrainConfig
from ctrnas.train.divergence import REFERENCE, DivergenceGuard
from ctrnas.train.trainer import Trainer


class ProductChain(nn.Module):
    """logit = head(z_k), z_{i+1} = (W_i z_i)^2 elementwise: a polynomial of degree 2^k in the embeddings,
    the shape of Dot-Product chains without LayerNorm."""

    def __init__(self, schema, depth: int, dim: int = 4, scale: float = 1.0):
        super().__init__()
        self.stem = EmbeddingStem(schema, dim=dim)
        width = dim * len(schema.sparse)
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 1)
        with torch.no_grad():
            for p in self.parameters():
                p.mul_(scale)

    def forward(self, dense, kjt):
        z = self.stem(kjt).flatten(1)
        for lin in self.layers:
            z = lin(z) ** 2
        return self.head(z).squeeze(1)


class NaNAfter(nn.Module):
    """A linear model whose logits turn NaN from forward call `k` on."""

    def __init__(self, schema, k: int):
        super().__init__()
        self.stem = EmbeddingStem(schema, dim=2)
        self.head = nn.Linear(2 * len(schema.sparse), 1)
        self.k, self.calls = k, 0

    def forward(self, dense, kjt):
        self.calls += 1
        out = self.head(self.stem(kjt).flatten(1)).squeeze(1)
        return out * math.nan if self.calls >= self.k else out


def _cfg(**kw):
    return TrainConfig(**{"lr": 0.1, "batch_size": 100, "progress": False, "eval_batch_size": 1000, **kw})


def _source(learnable, rows=2000, bs=100):
    schema, dense, ids, y, _ = learnable
    return schema, TensorBatches(dense[:rows], ids[:rows], y[:rows], schema.sparse_names, bs, shuffle_seed=0)


def test_guard_flags_non_finite_loss_at_once():
    g = DivergenceGuard(100.0)
    assert g.check(1, 0.7) is None
    rec = g.check(2, math.inf)
    assert rec["step"] == 2 and rec["loss"] is None and "non-finite" in rec["reason"]
    assert DivergenceGuard(None).check(5, math.nan)["step"] == 5  # even with the mean-loss test off


def test_guard_compares_the_window_mean_with_factor_times_ln2():
    # the largest log loss of a constant predictor is the entropy of a fair coin
    assert REFERENCE == pytest.approx(-(0.5 * math.log(0.5) + 0.5 * math.log(0.5)))
    g = DivergenceGuard(10.0, window=4)  # limit 10 ln 2 = 6.931
    assert [g.check(s, x) for s, x in enumerate([1.0, 20.0, 1.0], 1)] == [None] * 3  # window not yet full
    assert g.check(4, 5.7) is None  # mean (1 + 20 + 1 + 5.7) / 4 = 6.925 < 6.931
    rec = g.check(5, 1.1)           # the first 1.0 leaves: (20 + 1 + 5.7 + 1.1) / 4 = 6.95
    assert rec["step"] == 5 and rec["loss"] == pytest.approx(6.95) and "10 x ln 2" in rec["reason"]
    g2 = DivergenceGuard(10.0, window=4)
    g2.check(1, 50.0)
    assert g2.check(2, 50.0, last=True)["step"] == 2  # a short training is judged at its last step
    assert DivergenceGuard(None, window=1).check(1, 1e30) is None


def test_nan_logits_stop_training_without_touching_the_weights(learnable):
    schema, src = _source(learnable)
    model = NaNAfter(schema, k=3)
    t = Trainer(model, _cfg())
    before = {}

    orig = t.train_step

    def step(batch, total):  # the weights after step 2 are the ones the NaN step must leave alone
        if t.step == 2:
            before.update({k: v.clone() for k, v in model.state_dict().items()})
        return orig(batch, total)

    t.train_step = step
    summary = t.fit(src)
    assert summary["diverged"]["step"] == 3 and summary["steps"] == 3
    assert "non-finite" in summary["diverged"]["reason"]
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
        assert torch.isfinite(v).all()


def test_product_chain_overflows_and_is_stopped(learnable):
    schema, src = _source(learnable, rows=3000)
    torch.manual_seed(0)
    t = Trainer(ProductChain(schema, depth=3, scale=3.0), _cfg(lr=0.5, schedule="constant"))
    summary = t.fit(src)
    d = summary["diverged"]
    assert d is not None and d["step"] < len(src)  # stopped before the epoch ended
    assert summary["steps"] == d["step"]
    # a one-layer version of the same model trains normally under the same settings
    torch.manual_seed(0)
    ok = Trainer(ProductChain(schema, depth=1), _cfg(lr=0.5, schedule="constant")).fit(src)
    assert ok["diverged"] is None and ok["steps"] == len(src)


def test_a_diverged_run_stays_stopped_when_resumed(learnable, tmp_path):
    schema, src = _source(learnable)
    Trainer(NaNAfter(schema, k=2), _cfg(), out_dir=tmp_path).fit(src)
    again = Trainer(NaNAfter(schema, k=10**9), _cfg(), out_dir=tmp_path)
    summary = again.fit(src)
    assert summary["diverged"]["step"] == 2 and summary["steps"] == 2


def test_divergence_factor_must_exceed_one():
    from ctrnas.errors import RecipeError

    with pytest.raises(RecipeError, match="divergence_factor"):
        TrainConfig(divergence_factor=0.5)
    assert np.isclose(TrainConfig().divergence_factor, 100.0)
