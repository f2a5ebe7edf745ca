"""benchmarks/schedules.py: variant names, evaluations per epoch, the final anneal and the report's margins."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch


def _schedules():
    from tests.helpers.bench_scripts import load_script

    return load_script("schedules")


def test_a_name_spells_its_parts_and_an_unknown_part_is_named():
    s = _schedules()
    assert s.parse("evals4-p4-x0.5-anneal") == s.Variant(evals=4, patience=4, factor=0.5, anneal="full")
    assert s.parse("anneal@best") == s.Variant(anneal="best")
    assert s.parse("evals4") == s.Variant()  # the default protocol's settings
    assert s.parse("evals1-p2-x0.1") == s.Variant(evals=1, patience=2, factor=0.1)
    assert s.parse("e0.5-h1500") == s.Variant(decay=0.5, half_life=1500)
    assert s.extras(s.parse("h1500")) == {"half_life": 1500} and s.extras(s.parse("evals4")) == {}
    assert s.parse("keep") == s.Variant(keep=True) and s.extras(s.parse("x0.5-keep")) == {"keep": True}
    assert s.parse("ema2-e0.5") == s.Variant(ema=2.0, decay=0.5) and s.config(s.parse("ema0.5"), 0).ema == 0.5
    for bad in ("evals0", "x2", "p0", "warm", "e1.5", "h0"):
        with pytest.raises(SystemExit, match=f"unknown part '{bad}'"):
            s.parse(f"evals2-{bad}")


@pytest.mark.parametrize("per_epoch", [110, 469, 1563, 7])
@pytest.mark.parametrize("evals", [1, 2, 4])
def test_evals_cut_each_epoch_into_that_many_evaluations(per_epoch, evals):
    from ctrnas.train.trainer import eval_interval

    cfg = _schedules().config(_schedules().parse(f"evals{evals}"), seed=0)
    interval = eval_interval(per_epoch, cfg.eval_every, cfg.evals_per_epoch)
    # the trainer evaluates where the step within the epoch is a multiple of the interval, and at its end
    points = {k for k in range(1, per_epoch + 1) if k % interval == 0 or k == per_epoch}
    assert len(points) == min(evals, per_epoch)
    # the parts not named keep the default protocol's
    assert cfg.schedule == "plateau" and cfg.restore_best and (cfg.early_stop_patience, cfg.plateau_factor) == (4, 0.5)


def _tiny(anneal: str, lr: float):
    from tests.train.test_ema import learnable_run
    from tests.train.test_trainer import _model

    # one evaluation an epoch, patience 2, cuts of 0.1, any gain an improvement, no moving average (the variants'
    # own): the settings the parameters below were found with
    schema, cfg, train, val = learnable_run(lr=lr, anneal=anneal is not None, ema=0.0)
    t = _schedules().annealing_trainer()(_model(schema), cfg)
    t.from_best = anneal == "best"
    rates = []
    step = t.train_step

    def recording(batch, total):  # the rate each step of the run used
        loss = step(batch, total)
        rates.append(t.optimizers[0].param_groups[0]["lr"])
        return loss

    t.train_step = recording
    return t, train, val, rates


# on this data the pass lowers val log loss after the run at 6.0 only (found by running them): both branches
@pytest.mark.parametrize("anneal,lr,kept", [("full", 6.0, True), ("full", 3.0, False), ("best", 0.5, False)])
def test_the_final_pass_anneals_by_a_cosine_and_is_kept_only_if_val_improves(anneal, lr, kept):
    t, train, val, rates = _tiny(anneal, lr)
    t.fit(train, val)
    n = len(train)
    *selection, last = t.history
    assert last.get("anneal") and last["step"] == len(rates) == t.step and t.step % n == 0
    start = lr * (0.1 ** t.cuts_at_best if anneal == "best" else 1)
    assert rates[-n:] == pytest.approx([start * 0.5 * (1 + math.cos(math.pi * k / n)) for k in range(n)])
    before = min(h["logloss"] for h in selection)
    assert (last["logloss"] < before) == kept
    # the weights it ends on: the final pass's if it lowered val log loss, else the best evaluation's
    assert t.evaluate(val).logloss == pytest.approx(min(before, last["logloss"]), abs=1e-6)
    assert t.best["logloss"] == pytest.approx(min(before, last["logloss"]))


@pytest.mark.parametrize("decay,half_life", [(0.25, 0), (1.0, 7), (0.5, 30)])
def test_the_decays_multiply_the_plateau_rate_step_by_step_after_the_warm_up(decay, half_life):
    t, train, val, rates = _tiny(None, 0.5)
    t.epoch_decay, t.half_life = decay, half_life
    cuts = []
    select = t._select

    def counting():  # the rate's cuts before each step: those of the evaluations so far
        stop = select()
        cuts.append((t.step, t.cuts))
        return stop

    t._select = counting
    t.fit(train, val)
    n, warm = len(train), math.ceil(t.cfg.warmup_ratio * len(train))
    for k, rate in enumerate(rates):
        c = max([c for at, c in cuts if at <= k], default=0)
        plain = 0.5 * k / warm if k < warm else 0.5 * 0.1 ** c  # warm-up from min_lr 1e-8, then the cuts
        expect = plain if k < warm else plain * decay ** ((k - warm) / n) * (0.5 ** ((k - warm) / half_life)
                                                                            if half_life else 1)
        assert rate == pytest.approx(expect, rel=1e-6, abs=1e-7)
    assert t.step > 2 * n  # past two epochs: the decays had room to act


@pytest.mark.parametrize("keep", [False, True])
def test_keep_goes_on_from_the_weights_it_has_after_a_cut_and_ends_on_the_best(keep):
    from ctrnas.train.trainer import state_tensors

    t, train, val, rates = _tiny(None, 3.0)
    t.keep = keep
    after = []  # per evaluation: did it improve, did it stop, are the weights the best evaluation's
    select = t._select

    def watching():
        best = t.best
        stop = select()
        at_best = all(torch.equal(a, b) for a, b in zip(state_tensors(t.model), t._best_weights))
        after.append((t.best is not best, stop, at_best))
        return stop

    t._select = watching
    t.fit(train, val)
    cuts = [at_best for improved, stop, at_best in after if not improved and not stop]
    assert cuts and t.cuts >= len(cuts)  # evaluations without improvement that cut the rate and went on
    assert all(at_best for improved, _, at_best in after if improved)  # a new best is copied as it is
    assert cuts == [not keep] * len(cuts)  # the cut returns to the best weights, or with keep goes on from its own
    assert t.evaluate(val).logloss == pytest.approx(t.best["logloss"], abs=1e-6)  # it ends on the best weights


def test_without_an_anneal_it_trains_as_the_plain_trainer():
    from ctrnas.train.trainer import Trainer
    from tests.train.test_trainer import _model

    t, train, val, _ = _tiny(None, 3.0)
    t.fit(train, val)
    plain = Trainer(_model(t.model.stem.schema), t.cfg)
    plain.fit(train, val)
    assert t.history == plain.history and t.step == plain.step
    assert t.evaluate(val).logloss == plain.evaluate(val).logloss


def _runs(tests, epochs):
    return [{"test": x, "val": None, "epochs": e, "best_epoch": e} for x, e in zip(tests, epochs)]


def test_report_reads_each_variant_against_the_better_other_and_plateau(tmp_path):
    from tests.helpers.bench_scripts import load_script

    s = _schedules()
    proto, out = tmp_path / "protocol", tmp_path / "schedules"
    caches = {proto: {"nasrec": (0.300, 0.302), "cosine-10": (0.305, 0.305), "plateau": (0.306, 0.308)},
              out: {"evals1": (0.301, 0.303), "evals2": (0.309, 0.311)}}
    for folder, runs in caches.items():
        (folder / "d-70k").mkdir(parents=True)
        for p, tests in runs.items():
            for seed, x in enumerate(tests):
                # the settings each would train with today: a cache without them trains again
                if folder == proto:
                    recorded = s.settings(dataclasses.replace(load_script("protocol").protocols(p), seed=seed))
                else:
                    recorded = {**s.settings(s.config(s.parse(p), seed)), "anneal": None}
                run = {**_runs([x], [4])[0], "settings": recorded}
                (folder / "d-70k" / f"dlrm-{p}-{seed}.json").write_text(json.dumps(run))
    section = tmp_path / "schedules.md"
    s.main(["--data", "x/d-70k:dlrm:evals2", "--data", "x/d-70k:dlrm", "--variants", "evals1", "--out", str(out),
            "--protocol-out", str(proto), "--section", str(section)])
    text = section.read_text()
    # every sd 0.00141, so pair sd 0.002: evals1 +0.5 from nasrec (the lower mean), -2.5 from plateau;
    # plateau +3.0; FTE 4 epochs / 2
    assert ("| dlrm | 0.30100 (0.00141) 2.00 | 0.30500 (0.00000) 2.00 | 0.30700 (0.00141) 2.00 | "
            "0.30200 (0.00141) 2.00 | nasrec | +3.0 (not met) | +0.5; -2.5 vs plateau |") in text
    assert "Goal met: `plateau` 0 of 1; `evals1` 1 of 1 model-and-data pairs." in text
    # a variant tried on a data and model alone goes to the candidates table, not the main one's goal count
    assert "| dlrm | evals2 | 0.31000 (0.00141) 2.00 | +4.5 vs nasrec; +1.5 |" in text
