"""The weights' moving average (TrainConfig.ema): evaluations score it, a cut goes on from the best one, the
training ends on the best one, and an interrupted training resumes to the same numbers."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ctrnas.errors import RecipeError
from ctrnas.train.batches import TensorBatches
from ctrnas.train.checkpoint import state_tensors
from ctrnas.train.config import TrainConfig, early_stopping
from ctrnas.train.trainer import Trainer
from tests.train.conftest import make_learnable
from tests.train.test_trainer import _model


def learnable_run(lr: float = 3.0, **settings):
    """(schema, config, train, val) of a small learnable problem: 2,000 training rows in batches of 100, one
    evaluation an epoch (20 steps), patience 2, cuts of 0.1, any gain an improvement, and `settings`."""
    schema, dense, ids, y, _ = make_learnable(3000)
    names = schema.sparse_names
    train = TensorBatches(dense[:2000], ids[:2000], y[:2000], names, 100, shuffle_seed=0)
    val = TensorBatches(dense[2000:], ids[2000:], y[2000:], names, 1000)
    cfg = dataclasses.replace(early_stopping(TrainConfig(lr=lr, batch_size=100, progress=False, eval_batch_size=1000)),
                              evals_per_epoch=1, early_stop_patience=2, plateau_factor=0.1, min_improvement=0.0,
                              **settings)
    return schema, cfg, train, val


def _floats(model):
    return [t for t in state_tensors(model) if t.is_floating_point()]


def test_evaluations_score_the_average_and_a_cut_goes_on_from_the_best_one():
    schema, cfg, train, val = learnable_run(ema=2.0)  # over two evaluation intervals: 40 steps; lr 3.0 is cut
    t = Trainer(_model(schema), cfg)
    before, after, evals = [], [], []  # the weights before and after each step; per evaluation (step, cut, stop)
    step, select = t.train_step, t._select

    def stepping(batch, total):
        before.append([x.detach().clone() for x in _floats(t.model)])
        loss = step(batch, total)
        after.append([x.detach().clone() for x in _floats(t.model)])
        return loss

    def selecting():
        cuts = t.cuts
        stop = select()
        evals.append((t.step, t.cuts > cuts, stop))
        return stop

    t.train_step, t._select = stepping, selecting
    t.fit(train, val)
    assert any(cut and not stop for _, cut, stop in evals)  # both branches below run
    # the average, computed here from the trained weights: weight 1/n for the n-th step, at least 1/40
    avg, at_eval, best, n = None, {}, None, 0
    ends = {s: (cut, stop) for s, cut, stop in evals}
    for k, w in enumerate(after, start=1):
        n += 1
        avg = w if avg is None else [a + max(1 / 40, 1 / n) * (b - a) for a, b in zip(avg, w)]
        if k in ends:
            at_eval[k] = avg
            cut, stop = ends[k]
            if not cut:
                best = avg
            elif not stop:  # the cut went back to the best average: training and the average go on from it
                avg = best
            if k < len(after):  # the next step starts from the trained weights, or from the best average
                assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(before[k], best if cut else w))
    history = {h["step"]: h["logloss"] for h in t.history}
    ended = [x.detach().clone() for x in _floats(t.model)]
    assert t.evaluate(val).logloss == pytest.approx(t.best["logloss"], abs=1e-6)  # it ends on the best average
    for k, weights in at_eval.items():  # each evaluation scored the average, not the trained weights
        for x, a in zip(_floats(t.model), weights):
            x.data.copy_(a)
        assert t.evaluate(val).logloss == pytest.approx(history[k], abs=1e-5)
    assert any(not torch.allclose(a, b) for a, b in zip(after[-1], ended))  # not the trained weights


def test_an_interrupted_training_resumes_to_the_same_numbers(tmp_path):
    schema, cfg, train, val = learnable_run(ema=1.5)
    whole = Trainer(_model(schema), cfg)
    whole.fit(train, val)
    first = Trainer(_model(schema), cfg, out_dir=tmp_path)
    first.fit(train, val, max_steps=47)  # between two evaluations: the checkpoint holds the average so far
    assert first.step == 47 and first._average is not None
    again = Trainer(_model(schema), cfg, out_dir=tmp_path)
    again.fit(train, val)
    assert again.history == whole.history and again.step == whole.step
    assert all(torch.equal(a, b) for a, b in zip(state_tensors(again.model), state_tensors(whole.model)))


def test_a_checkpoint_with_gathered_best_weights_and_average_resumes_to_the_same_numbers(tmp_path):
    """A distributed checkpoint holds the best weights and the average as state_dicts (gathered like the model):
    one process resumes it as its own."""
    from ctrnas.train.checkpoint import load_checkpoint, save_checkpoint

    schema, cfg, train, val = learnable_run(ema=1.5)
    whole = Trainer(_model(schema), cfg)
    whole.fit(train, val)
    first = Trainer(_model(schema), cfg, out_dir=tmp_path)
    first.fit(train, val, max_steps=47)
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    names = list(state["model"])
    floating = [k for k in names if state["model"][k].is_floating_point()]
    sel = state["selection"]
    assert sel["weights"] is not None and sel["average"] is not None
    sel["weights"] = dict(zip(names, sel["weights"], strict=True))
    sel["average"] = dict(zip(floating, sel["average"], strict=True))
    save_checkpoint(tmp_path / "checkpoint.pt", state)
    again = Trainer(_model(schema), cfg, out_dir=tmp_path)
    again.fit(train, val)
    assert again.history == whole.history and again.step == whole.step
    assert all(torch.equal(a, b) for a, b in zip(state_tensors(again.model), state_tensors(whole.model)))


def test_without_model_selection_there_is_no_average_and_a_negative_horizon_is_refused():
    schema, cfg, train, val = learnable_run(ema=2.0)
    plain = dataclasses.replace(cfg, restore_best=False, early_stop_patience=None, schedule="cosine", epochs=2)
    t = Trainer(_model(schema), plain)
    t.fit(train, val)
    ref = Trainer(_model(schema), dataclasses.replace(plain, ema=0.0))
    ref.fit(train, val)
    assert t._average is None and t.history == ref.history
    with pytest.raises(RecipeError, match="ema"):
        TrainConfig(ema=-1.0)


def test_a_checkpoint_without_the_average_does_not_resume_on_other_weights(tmp_path):
    """A checkpoint whose average was taken out (written by hand, or damaged): resuming it raises instead of
    starting a new average."""
    from ctrnas.errors import CtrnasError
    from ctrnas.train.checkpoint import load_checkpoint, save_checkpoint

    schema, cfg, train, val = learnable_run(ema=1.0)
    first = Trainer(_model(schema), cfg, out_dir=tmp_path)
    first.fit(train, val, max_steps=5)
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    state["selection"]["average"] = None
    save_checkpoint(tmp_path / "checkpoint.pt", state)
    with pytest.raises(CtrnasError, match="moving average"):
        Trainer(_model(schema), cfg, out_dir=tmp_path).fit(train, val)
