"""Memory as a second objective: an embedding-bytes budget holds for every candidate, and evolution's
`objective: front` keeps and breeds from the front of score against bytes, on the toy space where the trade-off
is known (the fitness wants large values, the bytes counter is their sum)."""

from types import SimpleNamespace as NS

import numpy as np
import pytest

from ctrnas.errors import RecipeError
from ctrnas.search.constraints import ConstraintConfig, Constraints
from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution, pareto_front

from tests.helpers.toy_search import IntVectorSpace, SeparableFitness, vector_sum

SPACE = IntVectorSpace(6, 4)
FIT = SeparableFitness((3, 3, 3, 3, 3, 3))  # best at the largest bytes (sum 18): score and bytes conflict
CFG = EvolutionConfig(population_size=16, generations=12, tournament_size=8, children_per_generation=4)


def test_pareto_front_by_hand():
    m = [NS(rank=-1.0, bytes=10), NS(rank=-2.0, bytes=5), NS(rank=-3.0, bytes=5), NS(rank=-0.5, bytes=20),
         NS(rank=-1.0, bytes=12), NS(rank=-4.0, bytes=1)]
    # (-3, 5) loses to (-2, 5); (-1, 12) loses to (-1, 10)
    assert pareto_front(m) == [0, 1, 3, 5]


def test_every_candidate_fits_a_memory_budget():
    cons = Constraints(ConstraintConfig(max_embedding_bytes=9), count_bytes=vector_sum)
    result = RegularizedEvolution(SPACE, CFG, seed=0, constraints=cons).run(FIT, progress=False)
    assert len(result.history) > 0 and all(sum(r.arch["values"]) <= 9 for r in result.history)


def test_the_front_objective_needs_a_bytes_counter():
    with pytest.raises(RecipeError, match="count_bytes"):
        RegularizedEvolution(SPACE, EvolutionConfig(objective="front"), seed=0)
    with pytest.raises(RecipeError, match="max_embedding_bytes"):
        Constraints(ConstraintConfig(max_embedding_bytes=5))


def _best_within(history, b):
    return max((r.value for r in history if sum(r.arch["values"]) <= b), default=-np.inf)


def test_front_search_covers_the_bytes_axis_better_than_the_value_search():
    """Value-only evolution climbs to the large-bytes optimum; the front search keeps small models alive and
    breeds from them, so its best score within a small byte budget is higher, at most budgets, over seeds."""
    wins = 0
    for seed in range(4):
        runs = {}
        for objective in ("value", "front"):
            cfg = EvolutionConfig(population_size=16, generations=12, tournament_size=8, children_per_generation=4,
                                  objective=objective)
            cons = Constraints(count_bytes=vector_sum)
            runs[objective] = RegularizedEvolution(SPACE, cfg, seed=seed, constraints=cons).run(FIT, progress=False)
        small = range(3, 10)
        better = sum(_best_within(runs["front"].history, b) >= _best_within(runs["value"].history, b) for b in small)
        wins += better > len(small) / 2
    assert wins >= 3


def test_front_members_survive_ageing():
    cons = Constraints(count_bytes=vector_sum)
    cfg = EvolutionConfig(population_size=8, generations=6, tournament_size=4, children_per_generation=4,
                          objective="front")
    search = RegularizedEvolution(SPACE, cfg, seed=1, constraints=cons)
    while not search.done:
        cands = search.ask()
        before = [search.population[i] for i in pareto_front(search.population)] if search.population else []
        results = [FIT(c.arch) for c in cands]
        search.tell(cands, results)
        keys = {m.key for m in search.population}
        # both ends of the front (fewest bytes, best score) survive unless a newcomer beats them
        ends = [min(before, key=lambda m: m.bytes), max(before, key=lambda m: m.rank)] if before else []
        for m in ends:
            assert m.key in keys or any(o.rank >= m.rank and o.bytes <= m.bytes and o.key != m.key
                                        for o in search.population)
        assert len(search.population) == 8  # the front does not grow the population


def test_a_front_search_promotes_rungs_by_fronts_not_by_value_alone():
    """Successive halving under `objective: front`: where the rung's value favours the large models, value-only
    promotion keeps only large ones; promotion by fronts (MO-ASHA) keeps the front's small end too."""
    from ctrnas.search.fitness import FitnessResult
    from ctrnas.search.multifidelity import MultiFidelity, MultiFidelityConfig, RungConfig

    cons = Constraints(count_bytes=vector_sum)
    rungs = (RungConfig(fitness="a", budget=1, keep=0.34), RungConfig(fitness="b", budget=2))
    promoted = {}
    for promotion in ("value", "auto"):
        cfg = EvolutionConfig(population_size=12, generations=1, tournament_size=4, children_per_generation=4,
                              objective="front")
        mf = MultiFidelity(RegularizedEvolution(SPACE, cfg, seed=0, constraints=cons), rungs, [True, True],
                           promotion)
        cands = mf.ask()
        results = [FitnessResult(float(vector_sum(c.arch))) for c in cands]  # bigger is better at this rung
        mf.tell(cands, results)
        promoted[promotion] = [vector_sum(c.arch) for c in mf.ask()]
    sizes = sorted(vector_sum(c.arch) for c in cands)
    assert len(promoted["value"]) == len(promoted["auto"]) == 5  # ceil(0.34 * 12)
    assert sorted(promoted["value"]) == sizes[-5:]  # by value alone: the five largest
    # score = bytes here, so every distinct size is on the first front: the promoted spread from smallest to largest
    assert min(promoted["auto"]) == sizes[0] and max(promoted["auto"]) == sizes[-1]
    assert MultiFidelityConfig().promotion == "auto"
    with pytest.raises(RecipeError, match="promotion"):
        MultiFidelityConfig(promotion="pareto")
    with pytest.raises(RecipeError, match="count_bytes"):
        MultiFidelity(RegularizedEvolution(SPACE, EvolutionConfig(), seed=0), rungs, [True, True], "front")
