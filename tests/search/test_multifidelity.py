"""Successive halving over evolution's batches (`search.multifidelity`) on the toy space."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from ctrnas.search.build import SearchConfig, make_strategy
from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
from ctrnas.search.fidelity import Ladder
from ctrnas.search.multifidelity import MultiFidelity, RungConfig, survivors

from tests.helpers.toy_search import IntVector, IntVectorSpace, NoisyFidelityFitness

SPACE = IntVectorSpace(4, 4)
TARGET = (0, 1, 2, 3)
RUNGS = (RungConfig("toy", 1, 1 / 3), RungConfig("toy", 4, 1 / 3), RungConfig("toy", 16))


def mf(seed, *, population=27, generations=0, children=4, initial=(), rungs=RUNGS):
    cfg = EvolutionConfig(population_size=population, generations=generations, tournament_size=min(8, population),
                          children_per_generation=children)
    evo = RegularizedEvolution(SPACE, cfg, seed=seed, initial=initial)
    return MultiFidelity(evo, rungs, [True] * len(rungs))


def ladder(fit):
    return Ladder((fit,) * len(RUNGS))


def test_survivors_count():
    assert survivors(27, [1 / 3, 1 / 3]) == [27, 9, 3]
    assert survivors(8, [1 / 4, 1 / 2]) == [8, 2, 1]
    assert survivors(2, [1 / 3]) == [2, 1]  # never fewer than one


def test_rungs_record_rung_and_budget_and_promote_the_best_of_the_rung():
    fit = NoisyFidelityFitness(TARGET, noise=1.0)
    s = mf(0)
    result = s.run(ladder(fit))
    h = list(result.history)
    assert [r.rung for r in h] == [0] * 27 + [1] * 9 + [2] * 3
    assert [r.budget for r in h] == [1] * 27 + [4] * 9 + [16] * 3
    assert len(h) == s.total_evaluations
    # rung 1 holds exactly the 9 best of rung 0 by their rung-0 value, rung 2 the 3 best of rung 1
    by_value = sorted(h[:27], key=lambda r: -r.value)
    assert {r.key for r in h[27:36]} == {r.key for r in by_value[:9]}
    assert {r.key for r in h[36:]} == {r.key for r in sorted(h[27:36], key=lambda r: -r.value)[:3]}
    # each rung's noise is what the fitness says for its budget (the fitness got the rung's budget)
    assert all(r.meta["budget"] == r.budget for r in h)
    # the best is read from the highest rung, even when a lower rung has a larger (noisier) value
    assert result.best.rung == 2
    assert result.best.value == max(r.value for r in h[36:])
    assert [r.rung for r in result.top_k(5)] == [2, 2, 2, 1, 1]


def failure_bound(others_sq_error, rungs, sigma0):
    """P(SH loses the true best) <= sum over rungs r of E[#others that beat it at r] / n_{r+1} (Markov:
    it is dropped at r only if at least n_{r+1} others score above it), where another candidate with true
    gap g beats it with probability Phi(-g / (sigma_r sqrt 2)); the last rung's choice counts with n = 1.
    Summing over all other candidates (not only the rung's survivors) keeps it an upper bound."""
    n = survivors(len(others_sq_error) + 1, [r.keep for r in rungs[:-1]])
    bound = 0.0
    for i, rung in enumerate(rungs):
        sigma = sigma0 / math.sqrt(rung.budget)
        beat = sum(norm.cdf(-g / (sigma * math.sqrt(2))) for g in others_sq_error)
        bound += beat / (n[i + 1] if i + 1 < len(n) else 1)
    return bound


def test_promotes_the_true_best_with_high_probability():
    """The true optimum is in the batch (seeded population); over many seeds SH ends on it at least as
    often as the computed bound allows, and more often than picking by the cheapest rung alone."""
    fit = NoisyFidelityFitness(TARGET, noise=1.5)
    seeds = range(200)
    lost, bounds, lost_rung0 = 0, [], 0
    for seed in seeds:
        s = mf(seed, initial=(IntVector(TARGET),))
        h = s.run(ladder(fit)).history
        others = [-r.terms["true"] for r in h if r.rung == 0 and r.key != IntVector(TARGET).key()]
        bounds.append(failure_bound(others, RUNGS, fit.noise))
        best = s.ranker(h, 1)[0]
        lost += best.key != IntVector(TARGET).key()
        lost_rung0 += max((r for r in h if r.rung == 0), key=lambda r: r.value).key != IntVector(TARGET).key()
    p = float(np.mean(bounds))
    assert p < 0.25  # the bound says something
    n = len(seeds)
    assert lost <= n * p + 3 * math.sqrt(n * p * (1 - p)), (lost, p)
    assert lost < lost_rung0  # the higher rungs did the work


def test_evolution_ranks_by_rung_reached_then_value():
    s = mf(1, population=9, generations=3, children=3)
    s.run(ladder(NoisyFidelityFitness(TARGET)))
    ranks = [m.rank for m in s.evolution.population]
    assert all(isinstance(r, tuple) and len(r) == 2 for r in ranks)
    assert {r[0] for r in ranks} <= {-1, 0, 1, 2}


class Crash(Exception):
    pass


class CrashAfter:
    def __init__(self, fit, n):
        self.fit, self.n, self.calls = fit, n, 0

    def __call__(self, arch, seed, budget):
        self.calls += 1
        if self.calls == self.n:
            raise Crash()
        return self.fit(arch, seed, budget)


@pytest.mark.parametrize("crash_at", [5, 27 + 4, 39 + 4 + 1])  # in rung 0, mid rung 1, mid generation 1's rung 1
def test_resume_mid_rung_gives_the_identical_history(tmp_path, crash_at):
    fit = ladder(NoisyFidelityFitness(TARGET, noise=2.0))
    reference = mf(3, generations=3).run(fit)
    ckpt = tmp_path / "mf.ckpt"
    with pytest.raises(Crash):
        mf(3, generations=3).run(CrashAfter(fit, crash_at), checkpoint_path=ckpt)
    resumed = mf(3, generations=3).run(fit, checkpoint_path=ckpt)
    assert resumed.history.same_as(reference.history)
    assert resumed.best.same_as(reference.best)


def test_parallel_equals_serial():
    fit = ladder(NoisyFidelityFitness(TARGET, noise=2.0))
    serial = mf(5, population=12, generations=2).run(fit)
    parallel = mf(5, population=12, generations=2).run(fit, workers=2)
    assert parallel.history.same_as(serial.history)


def test_made_from_the_search_section():
    cfg = SearchConfig(strategy="multifidelity", evolution=EvolutionConfig(population_size=6, generations=1,
                                                                           tournament_size=3,
                                                                           children_per_generation=3))
    s = make_strategy(cfg, SPACE, seed=0, maximize=False, rungs=RUNGS, rung_maximize=[True, True, False],
                      initial=(IntVector(TARGET),))
    assert isinstance(s, MultiFidelity) and s.maximize is False
    assert s.ask()[0].arch == IntVector(TARGET)  # the seeded population comes first
    off = make_strategy(SearchConfig(seed_population=False, evolution=cfg.evolution), SPACE, seed=0,
                        maximize=True, initial=(IntVector(TARGET),))
    assert IntVector(TARGET) not in [c.arch for c in off.ask()][:1]


@pytest.mark.parametrize("rung, key", [({"fitness": "short", "keep": 0}, "keep"),
                                       ({"fitness": "short", "budget": -1}, "budget"),
                                       ({"fitness": "short", "fraction": 1.5}, "fraction"),
                                       ({"fitness": "short", "fraction": 0.5, "budget": 9}, "fraction")])
def test_a_bad_rung_in_a_recipe_names_the_file_and_the_rungs_own_key(rung, key):
    from ctrnas.errors import RecipeError
    from ctrnas.recipe import recipe_from_dict

    with pytest.raises(RecipeError) as e:
        recipe_from_dict({"name": "t", "data": {"path": "x"},
                          "search": {"multifidelity": {"rungs": [{"fitness": "proxy"}, rung]}}}, source="r.yaml")
    assert (e.value.source, e.value.key) == ("r.yaml", f"search.multifidelity.rungs[1].{key}")
    with pytest.raises(RecipeError, match=f"^search.multifidelity.rungs: key '{key}'"):
        RungConfig(**rung)
