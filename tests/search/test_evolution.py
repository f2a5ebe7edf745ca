"""Regularized evolution on the toy integer-vector space, whose optimum is known."""

import itertools
import logging
import math

import pytest

from ctrnas.config import from_dict
from ctrnas.errors import RecipeError
from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution, mutations_at
from ctrnas.search.fitness import FitnessResult
from ctrnas.search.random_search import RandomSearch, RandomSearchConfig

from tests.helpers.toy_search import IntVector, IntVectorSpace, SeparableFitness

# The paper's ratios at half size: tournament = population / 2, children = population / 16.
SMALL = EvolutionConfig(population_size=64, generations=50, tournament_size=32, children_per_generation=8)


class CountingFitness:
    """Counts calls per key (serial runs only)."""

    def __init__(self, inner):
        self.inner, self.calls = inner, {}

    def __call__(self, arch, seed):
        self.calls[arch.key()] = self.calls.get(arch.key(), 0) + 1
        return self.inner(arch, seed)


def test_defaults_are_the_nasrec_sigeo_settings():
    cfg = EvolutionConfig()
    assert (cfg.population_size, cfg.generations, cfg.tournament_size, cfg.children_per_generation) == (128, 240, 64, 8)
    assert RegularizedEvolution(IntVectorSpace(), cfg).total_evaluations == 128 + 240 * 8


def test_mutation_schedule_follows_nasrec_formula():
    cfg = EvolutionConfig()
    # NASRec searcher.py, 0-based n_gen: (n_generations - n_gen) // max(20, n_generations // 5) + 1
    expected = [(240 - n_gen) // 48 + 1 for n_gen in range(240)]
    got = [mutations_at(g, cfg) for g in range(1, 241)]
    assert got == expected
    assert got[0] == 6 and got[-1] == 1 and got == sorted(got, reverse=True)
    assert all(mutations_at(g, EvolutionConfig(generations=10, population_size=64)) == 1 for g in range(1, 11))


def test_children_carry_the_scheduled_number_of_mutations():
    # 30 positions x 10 choices: re-mutation for de-duplication practically never happens, so each child
    # differs from its recorded parent in 1..mutations_at(g) positions (a position may be hit twice).
    cfg = EvolutionConfig(population_size=16, generations=40, tournament_size=8, children_per_generation=4,
                          mutation_period=10)
    result = RegularizedEvolution(IntVectorSpace(30, 10), cfg, seed=0).run(SeparableFitness((0,) * 30))
    by_key = {r.key: r.arch["values"] for r in result.history}
    max_dist = {}
    for r in result.history:
        if r.generation == 0:
            assert r.parent_key == ""
            continue
        dist = sum(a != b for a, b in zip(r.arch["values"], by_key[r.parent_key]))
        assert 1 <= dist <= mutations_at(r.generation, cfg)
        max_dist[r.generation] = max(max_dist.get(r.generation, 0), dist)
    assert mutations_at(1, cfg) == 5 and max_dist[1] >= 3  # early children roam far
    assert mutations_at(40, cfg) == 1 and max_dist[40] == 1  # late children are one step away


def test_config_loads_strictly_from_a_recipe_mapping():
    cfg = from_dict(EvolutionConfig, {"population_size": 16, "tournament_size": 4, "maximize": False})
    assert cfg.population_size == 16 and cfg.generations == 240 and cfg.maximize is False
    with pytest.raises(RecipeError, match="tournament_size"):
        EvolutionConfig(population_size=8, tournament_size=9)
    with pytest.raises(RecipeError, match="unknown key"):
        from_dict(EvolutionConfig, {"populaton_size": 3})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_evolution_finds_the_known_optimum(seed):
    target = (0, 1, 2, 3, 3, 2, 1, 0)  # 4**8 = 65,536 architectures, 464 evaluated
    result = RegularizedEvolution(IntVectorSpace(8, 4), SMALL, seed=seed).run(SeparableFitness(target))
    assert result.best.arch == {"values": list(target)}
    assert result.best.value == 0.0


def test_evolution_beats_random_search_with_the_same_budget():
    target = (3, 0, 2, 1, 3, 0, 2, 1, 3, 0)  # 4**10 ~ 1M architectures
    space, fit = IntVectorSpace(10, 4), SeparableFitness(target)
    evo_best, rnd_best = [], []
    for seed in range(3):
        evo = RegularizedEvolution(space, SMALL, seed=seed)
        evo_best.append(evo.run(fit).best.value)
        rnd = RandomSearch(space, RandomSearchConfig(budget=evo.total_evaluations), seed=seed)
        rnd_best.append(rnd.run(fit).best.value)
    assert min(evo_best) > max(rnd_best)


def test_minimizing_finds_the_worst_vector_of_the_maximizing_problem():
    # With maximize=False the search minimizes value = -sq_error, i.e. maximizes the distance to target.
    target = (0, 0, 0, 0, 0, 0)
    cfg = EvolutionConfig(population_size=16, generations=30, tournament_size=4, children_per_generation=4, maximize=False)
    result = RegularizedEvolution(IntVectorSpace(6, 4), cfg, seed=0).run(SeparableFitness(target))
    assert result.best.arch == {"values": [3] * 6}


def test_aging_removes_the_oldest_not_the_worst():
    cfg = EvolutionConfig(population_size=8, generations=3, tournament_size=3, children_per_generation=2)
    evo = RegularizedEvolution(IntVectorSpace(6, 4), cfg, seed=0)
    fit = SeparableFitness((0,) * 6)
    init = evo.ask()
    evo.tell(init, [fit(c.arch) for c in init])
    assert [m.key for m in evo.population] == [c.key for c in init]
    expected = [c.key for c in init]
    for _ in range(3):
        children = evo.ask()
        evo.tell(children, [fit(c.arch) for c in children])
        expected = expected[2:] + [c.key for c in children]
        assert [m.key for m in evo.population] == expected
    assert evo.done


def test_the_best_initial_member_dies_of_age():
    # The global optimum sits in the initial population; after population/children generations it is gone.
    cfg = EvolutionConfig(population_size=8, generations=4, tournament_size=3, children_per_generation=2)
    evo = RegularizedEvolution(IntVectorSpace(6, 4), cfg, seed=1)
    init = evo.ask()
    best_key = init[5].key
    results = [FitnessResult(100.0 if c.key == best_key else -1.0) for c in init]
    evo.tell(init, results)
    for _ in range(4):
        children = evo.ask()
        evo.tell(children, [FitnessResult(0.0) for _ in children])
    assert best_key not in [m.key for m in evo.population]


def test_children_are_unique_and_never_repeat_history():
    cfg = EvolutionConfig(population_size=8, generations=4, tournament_size=3, children_per_generation=4)
    fit = CountingFitness(SeparableFitness((1, 1, 1)))
    result = RegularizedEvolution(IntVectorSpace(3, 3), cfg, seed=0).run(fit)  # 24 of 27 architectures
    keys = [r.key for r in result.history]
    assert len(keys) == 24 and len(set(keys)) == 24
    assert all(n == 1 for n in fit.calls.values())


def test_exhausted_space_serves_duplicates_from_the_cache():
    cfg = EvolutionConfig(population_size=8, generations=10, tournament_size=3, children_per_generation=4,
                          max_dedup_tries=20)
    fit = CountingFitness(SeparableFitness((1, 1, 1)))
    result = RegularizedEvolution(IntVectorSpace(3, 3), cfg, seed=0).run(fit)  # 48 evaluations, 27 archs
    distinct = {r.key for r in result.history}
    assert len(result.history) == 48
    assert sum(fit.calls.values()) == len(distinct) <= 27
    assert sum(r.cached for r in result.history) == 48 - len(distinct)
    for r in result.history:
        assert r.value == -sum((v - 1) ** 2 for v in r.arch["values"])


def test_nan_fitness_ranks_last_and_is_logged(caplog):
    target = (1, 1, 1)
    all_keys = {"-".join(map(str, v)) for v in itertools.product(range(3), repeat=3)}
    # Every architecture but two of the worst scores NaN: a finite score must still win.
    fit = SeparableFitness(target, nan_keys=frozenset(all_keys - {"0-0-0", "2-2-2"}))
    cfg = EvolutionConfig(population_size=8, generations=4, tournament_size=3, children_per_generation=4)
    with caplog.at_level(logging.WARNING, logger="ctrnas.search"):
        result = RegularizedEvolution(IntVectorSpace(3, 3), cfg, seed=0).run(fit)
    finite = [r for r in result.history if math.isfinite(r.value)]
    nan_count = len(result.history) - len(finite)
    assert finite and nan_count > 0
    assert result.best.key in {"0-0-0", "2-2-2"} and result.best.value == -3.0
    ranked = result.top_k(len(result.history))
    assert [math.isfinite(r.value) for r in ranked] == [True] * len(finite) + [False] * nan_count
    assert sum("ranks last" in m for m in caplog.messages) == nan_count


def test_ask_tell_protocol_is_guarded():
    evo = RegularizedEvolution(IntVectorSpace(4, 3), EvolutionConfig(population_size=4, generations=1,
                                                                       tournament_size=2, children_per_generation=2))
    first = evo.ask()
    with pytest.raises(RuntimeError):
        evo.ask()
    with pytest.raises(RuntimeError):
        evo.tell(first[:1], [FitnessResult(0.0)])
    evo.tell(first, [FitnessResult(0.0)] * 4)
    assert all(isinstance(c.arch, IntVector) and c.generation == 1 for c in evo.ask())
