"""The early-stop protocol: evaluations per epoch (or within a long one), the plateau schedule, stopping after
`patience` evaluations without a lower val log loss, ending on the best weights, the final anneal, and resuming
to the same numbers."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from ctrnas.train.batches import TensorBatches
from ctrnas.train.config import TrainConfig, early_stopping, lr_at
from ctrnas.train.trainer import Trainer, eval_interval
from tests.train.test_trainer import _model


def _sources(learnable, rows=2000):
    schema, dense, ids, y, _ = learnable
    names = schema.sparse_names
    train = TensorBatches(dense[:rows], ids[:rows], y[:rows], names, 100, shuffle_seed=0)
    val = TensorBatches(dense[5000:6000], ids[5000:6000], y[5000:6000], names, 1000)
    return schema, train, val


def _cfg(**kw):
    return early_stopping(TrainConfig(**{"lr": 0.5, "batch_size": 100, "progress": False, "eval_batch_size": 1000,
                                         **kw}), frozenset(kw))


def test_plateau_schedule_warms_up_over_one_epoch_then_cuts_per_bad_evaluation():
    cfg = TrainConfig(lr=0.2, min_lr=0.0, warmup_ratio=0.1, schedule="plateau", plateau_factor=0.5)
    # warm-up over ceil(0.1 x 50) = 5 steps of a 50-step epoch, whatever the total
    assert lr_at(cfg, 0, 10_000, epoch_steps=50) == 0.0
    assert lr_at(cfg, 2, 10_000, epoch_steps=50) == pytest.approx(0.08)
    assert lr_at(cfg, 5, 10_000, epoch_steps=50) == pytest.approx(0.2)
    assert lr_at(cfg, 9_000, 10_000, epoch_steps=50) == pytest.approx(0.2)   # constant: no decay by length
    assert lr_at(cfg, 900, 10_000, epoch_steps=50, cuts=2) == pytest.approx(0.05)


def test_long_epochs_are_cut_into_equal_evaluation_intervals():
    assert eval_interval(470, 2000) == 470           # an epoch shorter than the cap: once per epoch
    assert eval_interval(70_000, 2000) == 2000       # 35 equal parts
    assert eval_interval(5000, 2000) == 1667         # ceil(5000 / 3): three parts, the last at the epoch end
    assert eval_interval(300, 0) == 300
    # at least `parts` evaluations an epoch, more where the cap on the steps between two asks for more
    assert eval_interval(110, 2000, 4) == 28         # ceil(110 / 4): at 28, 56, 84 and the epoch end
    assert eval_interval(70_000, 2000, 4) == 2000
    assert eval_interval(3, 2000, 4) == 1            # an epoch shorter than the parts: every step


def _counted_best(losses: list[float], threshold: float) -> int:
    """The index of the best evaluation, each counted as one only below the best before it x (1 - threshold)."""
    best = 0
    for i, x in enumerate(losses):
        if x < losses[best] * (1 - threshold):
            best = i
    return best


def test_early_stopping_ends_on_the_best_evaluation(learnable):
    schema, train, val = _sources(learnable)
    # a learning rate high enough that val log loss turns up within a few epochs
    cfg = _cfg(lr=3.0, schedule="constant", epochs=30)
    t = Trainer(_model(schema), cfg)
    s = t.fit(train, val)
    losses = [h["logloss"] for h in t.history]
    assert s["stopped_early"] and t.step < 30 * len(train)
    best = _counted_best(losses, cfg.min_improvement)
    # stopped exactly `patience` evaluations after the best one, and the weights are the best evaluation's
    assert len(losses) - 1 - best == cfg.early_stop_patience
    assert t.best["step"] == t.history[best]["step"]
    assert t.evaluate(val).logloss == pytest.approx(losses[best], abs=1e-6)


def test_each_evaluation_without_improvement_cuts_the_learning_rate(learnable):
    schema, train, val = _sources(learnable)
    cfg = _cfg(lr=3.0, epochs=30, min_improvement=0.0)  # any lower val log loss an improvement
    t = Trainer(_model(schema), cfg)
    t.fit(train, val)
    losses = [h["logloss"] for h in t.history]
    bad = sum(1 for i, x in enumerate(losses) if i and x >= min(losses[:i]))
    assert t.cuts == bad >= 1
    # the last step ran before the last evaluation, with every earlier evaluation's cut applied
    before_last = sum(1 for i, x in enumerate(losses[:-1]) if i and x >= min(losses[:i]))
    seen = [g["lr"] for o in t.optimizers for g in o.param_groups]
    assert seen and all(x == pytest.approx(3.0 * cfg.plateau_factor ** before_last) for x in seen)


def test_a_cut_returns_to_the_best_weights(learnable):
    schema, train, val = _sources(learnable)
    cfg = _cfg(lr=3.0, epochs=30, early_stop_patience=5, min_improvement=0.0)  # any lower val log loss counts
    whole = Trainer(_model(schema), cfg)
    whole.fit(train, val)
    losses = [h["logloss"] for h in whole.history]
    first_bad = next(i for i, x in enumerate(losses) if i and x >= min(losses[:i]))
    assert first_bad < len(losses) - 1  # it trained on after its first cut
    part = Trainer(_model(schema), cfg)
    part.fit(train, val, max_steps=whole.history[first_bad]["step"])
    # right after the bad evaluation: the best evaluation's weights, at plateau_factor times the rate
    assert part.cuts == 1 and part.evaluate(val).logloss == pytest.approx(min(losses[:first_bad]), abs=1e-6)


# interrupted one evaluation after the best, and an epoch after it: there the patience runs out at the same
# step, so the resumed run must end at once
@pytest.mark.parametrize("after", ["evaluation", "epoch"])
def test_an_interrupted_early_stopped_training_resumes_to_the_same_numbers(learnable, tmp_path, after):
    schema, train, val = _sources(learnable)
    cfg = dataclasses.replace(_cfg(lr=3.0, epochs=30), checkpoint_every=len(train))
    whole = Trainer(_model(schema), cfg, tmp_path / "whole")
    ref = whole.fit(train, val)
    part = Trainer(_model(schema), cfg, tmp_path / "part")
    gap = len(train) if after == "epoch" else eval_interval(len(train), cfg.eval_every, cfg.evals_per_epoch)
    assert ref["best"]["step"] + gap <= ref["steps"]  # stopped after the best, not after the end
    part.fit(train, val, max_steps=ref["best"]["step"] + gap)
    again = Trainer(_model(schema), cfg, tmp_path / "part")
    res = again.fit(train, val)
    assert res["steps"] == ref["steps"] and res["best"] == ref["best"] and again.cuts == whole.cuts
    assert [h["logloss"] for h in again.history] == [h["logloss"] for h in whole.history]
    for a, b in zip(again.model.state_dict().values(), whole.model.state_dict().values()):
        assert torch.equal(a, b)


def test_the_preset_keeps_the_keys_a_recipe_gave():
    cfg = early_stopping(TrainConfig(epochs=3, schedule="cosine"), frozenset({"epochs"}))
    assert (cfg.epochs, cfg.schedule, cfg.restore_best, cfg.early_stop_patience) == (3, "plateau", True, 4)


def test_a_gain_below_min_improvement_counts_as_an_evaluation_without_improvement(learnable):
    schema, _, _ = _sources(learnable)
    cfg = TrainConfig(restore_best=True, early_stop_patience=2, min_improvement=0.01, schedule="constant")
    t = Trainer(_model(schema), cfg)

    def evaluated(step, logloss):
        t.history.append({"step": step, "logloss": logloss})
        return t._select()

    assert not evaluated(1, 1.0) and t.best == {"step": 1, "logloss": 1.0}
    # 0.995 is lower, but not below 1.0 x (1 - 0.01) = 0.99: the best stays, one evaluation without improvement
    assert not evaluated(2, 0.995) and t.best["step"] == 1 and t.bad_evals == 1
    assert not evaluated(3, 0.985) and t.best == {"step": 3, "logloss": 0.985} and t.bad_evals == 0
    assert not evaluated(4, 0.984) and evaluated(5, 0.983)  # two gains below 0.985 x 0.99: patience runs out
    assert t.best["step"] == 3


def _rates(t: Trainer) -> list[float]:
    """Record the rate of every step `t` takes (read from its optimizers after the step)."""
    seen: list[float] = []
    step = t.train_step

    def recorded(batch, total):
        loss = step(batch, total)
        seen.append(t.optimizers[0].param_groups[0]["lr"])
        return loss

    t.train_step = recorded
    return seen


def test_the_final_anneal_falls_from_the_rate_to_zero_over_the_patience_by_a_cosine(learnable):
    schema, train, val = _sources(learnable)
    cfg = _cfg(lr=3.0, epochs=30, anneal=True)
    t = Trainer(_model(schema), cfg)
    seen = _rates(t)
    s = t.fit(train, val)
    interval = eval_interval(len(train), cfg.eval_every, cfg.evals_per_epoch)
    n = min(len(train), cfg.early_stop_patience * interval)  # 4 quarters of a 20-step epoch: one epoch
    start = t.annealed["start"]
    assert s["stopped_early"] and t.annealed["steps"] == n and s["steps"] == start + n
    assert s["rows"] == 100 * s["steps"]  # every step's rows counted, the anneal's too (full batches of 100)
    without = Trainer(_model(schema), dataclasses.replace(cfg, anneal=False))
    without.fit(train, val)
    assert without.history == t.history[:-1]  # the same stop, with or without the anneal after it
    assert seen[start:] == pytest.approx([3.0 * 0.5 * (1 + math.cos(math.pi * k / n)) for k in range(n)])
    # before it, the plateau's rate, cut at each evaluation without improvement but the stopping one
    assert t.cuts >= cfg.early_stop_patience and seen[start - 1] == pytest.approx(3.0 * 0.5 ** (t.cuts - 1))


def test_an_anneal_that_does_not_lower_val_is_dropped_for_the_best_weights(learnable):
    schema, train, val = _sources(learnable)
    cfg = _cfg(lr=3.0, epochs=30, anneal=True)
    t = Trainer(_model(schema), cfg)
    rate = t.current_lr
    t.current_lr = lambda total: 1e4 if t._annealing else rate(total)  # an anneal that wrecks the model
    t.fit(train, val)
    before = [h for h in t.history if not h.get("anneal")]
    best = before[_counted_best([h["logloss"] for h in before], cfg.min_improvement)]
    assert t.history[-1]["anneal"] and not t.history[-1]["logloss"] <= best["logloss"]
    assert t.annealed["kept"] is False and t.best == {"step": best["step"], "logloss": best["logloss"]}
    assert t.evaluate(val).logloss == pytest.approx(best["logloss"], abs=1e-6)


class _Stops:
    """A batch source that raises once it has given `after` batches in all (an interrupted process)."""

    def __init__(self, inner, after):
        self.inner, self.after, self.given = inner, after, 0

    def __len__(self):
        return len(self.inner)

    def batches(self, offset=0, epoch=0):
        for b in self.inner.batches(offset, epoch):
            if self.given == self.after:
                raise KeyboardInterrupt
            self.given += 1
            yield b


def test_an_anneal_interrupted_midway_resumes_to_the_same_numbers(learnable, tmp_path):
    schema, train, val = _sources(learnable)
    cfg = _cfg(lr=3.0, epochs=30, anneal=True)
    whole = Trainer(_model(schema), cfg, tmp_path / "whole")
    ref = whole.fit(train, val)
    part = Trainer(_model(schema), cfg, tmp_path / "part")
    with pytest.raises(KeyboardInterrupt):
        part.fit(_Stops(train, whole.annealed["start"] + 3), val)  # three steps into the anneal
    assert part.annealed is None
    again = Trainer(_model(schema), cfg, tmp_path / "part")
    res = again.fit(train, val)
    assert (res["steps"], res["best"], again.annealed) == (ref["steps"], ref["best"], whole.annealed)
    assert [h["logloss"] for h in again.history] == [h["logloss"] for h in whole.history]
    for a, b in zip(again.model.state_dict().values(), whole.model.state_dict().values()):
        assert torch.equal(a, b)
    # a finished training resumed trains no more and ends on the same weights
    done = Trainer(_model(schema), cfg, tmp_path / "part")
    assert done.fit(train, val)["steps"] == ref["steps"]
    for a, b in zip(done.model.state_dict().values(), whole.model.state_dict().values()):
        assert torch.equal(a, b)


def test_the_final_anneal_is_off_by_default_and_a_recipe_turns_it_on(learnable):
    from ctrnas.recipe import load_recipe

    assert not load_recipe("recipes/synthetic.yaml").final_train.anneal
    cfg = load_recipe("recipes/synthetic.yaml", ["final.train.anneal=true"]).final_train
    assert cfg.anneal and cfg.schedule == "plateau" and cfg.early_stop_patience == 4  # the rest stays the preset's
    schema, train, val = _sources(learnable)
    t = Trainer(_model(schema), _cfg(lr=3.0, epochs=30))
    t.fit(train, val)
    assert t.annealed is None and not any(h.get("anneal") for h in t.history)
