"""The trainer: LR schedule, loss goes down on learnable data, resume is bit-identical."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from ctrnas.errors import CtrnasError, RecipeError
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.train.batches import TensorBatches
from ctrnas.train.config import TrainConfig, lr_at
from ctrnas.train.metrics import constant_logloss
from ctrnas.train.trainer import Trainer


class Tiny(nn.Module):
    def __init__(self, schema, dim=4):
        super().__init__()
        self.stem = EmbeddingStem(schema, dim=dim)
        self.head = nn.Linear(schema.dense_dim + dim * len(schema.sparse), 1)

    def forward(self, dense, kjt):
        e = self.stem(kjt).flatten(1)
        return self.head(torch.cat([dense, e], 1)).squeeze(1)


def _model(schema, seed=0):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return Tiny(schema)


def _cfg(**kw):
    base = dict(lr=0.1, batch_size=100, progress=False, eval_batch_size=1000)
    base.update(kw)
    return TrainConfig(**base)


def test_lr_schedule_matches_formula():
    cfg = TrainConfig(lr=0.1, min_lr=0.0, warmup_ratio=0.1)
    T = 100
    assert lr_at(cfg, 0, T) == 0.0
    assert lr_at(cfg, 5, T) == pytest.approx(0.05)
    assert lr_at(cfg, 10, T) == pytest.approx(0.1)
    assert lr_at(cfg, 55, T) == pytest.approx(0.05)            # half-way through the cosine: cos(pi/2) = 0
    assert lr_at(cfg, 10 + 30, T) == pytest.approx(0.05 * (1 + math.cos(math.pi * 30 / 90)))
    assert lr_at(TrainConfig(schedule="constant"), 77, T) == 0.12


def test_bad_recipe_values_name_the_key():
    with pytest.raises(RecipeError, match="warmup_ratio"):
        TrainConfig(warmup_ratio=1.5)


def test_tiny_model_learns(learnable):
    schema, dense, ids, y, p = learnable
    names = schema.sparse_names
    train = TensorBatches(dense[:5000], ids[:5000], y[:5000], names, 100, shuffle_seed=0)
    val = TensorBatches(dense[5000:], ids[5000:], y[5000:], names, 1000)
    t = Trainer(_model(schema), _cfg(epochs=3, eval_every=50))
    before = t.evaluate(val)
    t.fit(train, val)
    after = t.evaluate(val)
    hist = [h["logloss"] for h in t.history]
    assert after.logloss < before.logloss - 0.05
    assert hist[-1] < hist[0]
    # beats the best constant predictor on held-out rows, and ranks better than chance
    assert after.logloss < constant_logloss(float(y[:5000].mean())) - 0.03
    assert after.auc > 0.7


def test_sparse_and_dense_embedding_updates_agree(learnable):
    # Sparse Adagrad is exact Adagrad: both paths give the same weights up to float rounding.
    schema, dense, ids, y, _ = learnable
    src = TensorBatches(dense[:1000], ids[:1000], y[:1000], schema.sparse_names, 100, shuffle_seed=1)
    outs = []
    for mode in ("sparse", "dense"):
        m = _model(schema)
        Trainer(m, _cfg(embedding_update=mode)).fit(src)
        outs.append(m.state_dict())
    for k in outs[0]:
        torch.testing.assert_close(outs[0][k], outs[1][k], rtol=1e-4, atol=1e-5)


def test_resume_mid_epoch_is_bit_identical(learnable, tmp_path):
    schema, dense, ids, y, _ = learnable
    names = schema.sparse_names
    src = TensorBatches(dense[:2000], ids[:2000], y[:2000], names, 100, shuffle_seed=3)
    cfg = _cfg(epochs=2)
    ref = _model(schema)
    ref_summary = Trainer(ref, cfg).fit(src)

    first = _model(schema)
    Trainer(first, cfg, out_dir=tmp_path).fit(src, max_steps=13)   # stop mid-epoch 1
    assert (tmp_path / "checkpoint.pt").exists()
    fresh = _model(schema, seed=99)                                   # different init: must be overwritten
    t = Trainer(fresh, cfg, out_dir=tmp_path)
    summary = t.fit(src)
    assert summary["steps"] == ref_summary["steps"] == 40
    assert summary["train_logloss"] == ref_summary["train_logloss"]
    ref_sd, got_sd = ref.state_dict(), fresh.state_dict()
    assert ref_sd.keys() == got_sd.keys()
    for k in ref_sd:
        assert torch.equal(ref_sd[k], got_sd[k]), k


def test_resume_refuses_a_different_recipe(learnable, tmp_path):
    schema, dense, ids, y, _ = learnable
    src = TensorBatches(dense[:500], ids[:500], y[:500], schema.sparse_names, 100)
    Trainer(_model(schema), _cfg(), out_dir=tmp_path).fit(src, max_steps=2)
    with pytest.raises(CtrnasError, match="lr"):
        Trainer(_model(schema), _cfg(lr=0.2), out_dir=tmp_path).fit(src)
