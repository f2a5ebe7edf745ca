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


# -- model selection over epochs (restore_best / early_stop_patience) -----------------------------------------

def _overfitting_setup(learnable):
    """Few training rows and a large LR: the val log loss bottoms out after an epoch or two, then rises."""
    schema, dense, ids, y, _ = learnable
    names = schema.sparse_names
    train = TensorBatches(dense[:300], ids[:300], y[:300], names, 50, shuffle_seed=0)
    val = TensorBatches(dense[5000:], ids[5000:], y[5000:], names, 1000)
    return schema, train, val


def _reference_epochs(schema, train, val, epochs):
    """Plain training to `epochs`, with the weights and the val log loss recorded after every epoch."""
    model = _model(schema)
    t = Trainer(model, _cfg(epochs=epochs, lr=0.5, schedule="constant", warmup_ratio=0.0))
    snaps, losses = [], []
    for e in range(1, epochs + 1):
        t.fit(train, max_steps=e * len(train))
        snaps.append({k: v.clone() for k, v in model.state_dict().items()})
        losses.append(t.evaluate(val).logloss)
    return snaps, losses


def test_restore_best_ends_on_the_lowest_val_epoch(learnable):
    schema, train, val = _overfitting_setup(learnable)
    epochs = 6
    snaps, losses = _reference_epochs(schema, train, val, epochs)
    best = min(range(epochs), key=losses.__getitem__)
    assert best < epochs - 1, f"the setup must overfit (val per epoch {losses})"
    model = _model(schema)
    t = Trainer(model, _cfg(epochs=epochs, lr=0.5, schedule="constant", warmup_ratio=0.0, restore_best=True))
    summary = t.fit(train, val)
    assert [h["logloss"] for h in t.history] == pytest.approx(losses, rel=1e-6)
    assert summary["best"]["step"] == (best + 1) * len(train)
    assert summary["steps"] == epochs * len(train) and not summary["stopped_early"]
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, snaps[best][k], rtol=0, atol=0)
    assert t.evaluate(val).logloss == pytest.approx(losses[best], rel=1e-6)


def test_early_stopping_stops_after_patience_evaluations_without_improvement(learnable, tmp_path):
    schema, train, val = _overfitting_setup(learnable)
    epochs = 6
    snaps, losses = _reference_epochs(schema, train, val, epochs)
    # the first epoch after which `patience` evaluations in a row did not improve on the best so far
    patience, best, stop = 1, 0, None
    for e in range(1, epochs):
        if losses[e] < losses[best]:
            best = e
        elif e - best >= patience:
            stop = e
            break
    assert stop is not None, f"the setup must overfit (val per epoch {losses})"
    cfg = _cfg(epochs=epochs, lr=0.5, schedule="constant", warmup_ratio=0.0, restore_best=True,
               early_stop_patience=patience)
    model = _model(schema)
    summary = Trainer(model, cfg, out_dir=tmp_path).fit(train, val)
    assert summary["stopped_early"] and summary["steps"] == (stop + 1) * len(train)
    assert len(summary["val_history"]) == stop + 1
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, snaps[best][k], rtol=0, atol=0)
    # a finished early-stopped run resumes as finished: no more steps, the same (best) weights
    again = _model(schema, seed=5)
    s2 = Trainer(again, cfg, out_dir=tmp_path).fit(train, val)
    assert s2["steps"] == summary["steps"] and s2["best"] == summary["best"]
    for k, v in again.state_dict().items():
        torch.testing.assert_close(v, snaps[best][k], rtol=0, atol=0)


def test_early_stop_patience_must_be_positive():
    with pytest.raises(RecipeError, match="early_stop_patience"):
        TrainConfig(early_stop_patience=0)
