"""Resource budgets hold for every candidate a search returns, under both reject and repair."""

import math

import numpy as np
import pytest

from ctrnas.errors import RecipeError
from ctrnas.search.constraints import ConstraintConfig, ConstraintError, Constraints, propose
from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
from ctrnas.search.random_search import RandomSearch, RandomSearchConfig

from tests.helpers.toy_search import IntVector, IntVectorSpace, SeparableFitness, vector_sum

SPACE = IntVectorSpace(6, 4)  # vector_sum in 0..18; a random vector averages 9
FIT = SeparableFitness((3, 3, 3, 3, 3, 3))  # the unconstrained optimum (sum 18) is over budget
CFG = EvolutionConfig(population_size=16, generations=10, tournament_size=8, children_per_generation=4)


def n_flops(arch):
    return 10.0 * arch.values[0]


@pytest.mark.parametrize("mode", ["reject", "repair"])
@pytest.mark.parametrize("strategy", ["evolution", "random"])
def test_every_candidate_fits_the_budgets(mode, strategy):
    cons = Constraints(ConstraintConfig(max_params=8, max_flops=20, mode=mode), count_params=vector_sum,
                       count_flops=n_flops)
    if strategy == "evolution":
        search = RegularizedEvolution(SPACE, CFG, seed=0, constraints=cons)
    else:
        search = RandomSearch(SPACE, RandomSearchConfig(budget=40), seed=0, constraints=cons)
    result = search.run(FIT)
    assert len(result.history) == search.total_evaluations
    for r in result.history:
        assert sum(r.arch["values"]) <= 8 and 10 * r.arch["values"][0] <= 20
        assert r.params == sum(r.arch["values"]) and r.flops == 10 * r.arch["values"][0]
    # The search pushes against the budget: the best uses all of it.
    assert sum(result.best.arch["values"]) == 8


def test_repair_mutates_the_candidate_reject_draws_anew():
    space = IntVectorSpace(4, 4)
    over = IntVector((3, 3, 3, 3))  # sum 12 > 6
    draws = []

    def draw():
        draws.append(1)
        return over if len(draws) == 1 else space.sample(rng)

    rng = np.random.default_rng(1)
    repaired = propose(draw, space, rng, Constraints(ConstraintConfig(max_params=6, mode="repair"), vector_sum),
                       lambda k: False, 10)
    assert len(draws) == 1 and repaired.params <= 6  # fixed by mutations only
    draws.clear()
    rejected = propose(draw, space, rng, Constraints(ConstraintConfig(max_params=6, mode="reject"), vector_sum),
                       lambda k: False, 10)
    assert len(draws) >= 2 and rejected.params <= 6


def test_infeasible_budget_fails_after_bounded_tries():
    cons = Constraints(ConstraintConfig(max_params=-1, max_tries=25), count_params=vector_sum)
    with pytest.raises(ConstraintError, match="25 tries"):
        RegularizedEvolution(SPACE, CFG, seed=0, constraints=cons).run(FIT)


def test_budget_without_a_counter_is_a_config_error():
    with pytest.raises(RecipeError, match="max_flops"):
        Constraints(ConstraintConfig(max_flops=1e6), count_params=vector_sum)


def test_counts_are_recorded_even_without_budgets():
    result = RandomSearch(SPACE, RandomSearchConfig(budget=5), seed=0,
                          constraints=Constraints(count_params=vector_sum)).run(FIT)
    assert [r.params for r in result.history] == [sum(r.arch["values"]) for r in result.history]
    assert all(math.isnan(r.flops) for r in result.history)
