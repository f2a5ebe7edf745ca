"""The recipe's `search:` mapping becomes the configured strategy."""

import pytest
import yaml

from ctrnas.config import from_dict, to_dict
from ctrnas.errors import RecipeError
from ctrnas.search.build import SearchConfig, make_strategy
from ctrnas.search.evolution import RegularizedEvolution
from ctrnas.search.random_search import RandomSearch

from tests.helpers.toy_search import IntVectorSpace, vector_sum

RECIPE = """
strategy: evolution
evolution: {population_size: 16, generations: 3, tournament_size: 4}
constraints: {max_params: 10, mode: repair}
workers: 2
"""


def test_recipe_mapping_builds_the_strategy():
    cfg = from_dict(SearchConfig, yaml.safe_load(RECIPE), source="recipe.yaml")
    assert from_dict(SearchConfig, to_dict(cfg)) == cfg  # the resolved recipe saved beside results reloads
    assert cfg.workers == 2 and cfg.top_k == 15 and cfg.random.budget == 2048
    evo = make_strategy(cfg, IntVectorSpace(), seed=3, maximize=False, count_params=vector_sum)
    assert isinstance(evo, RegularizedEvolution)
    assert (evo.config.population_size, evo.config.children_per_generation, evo.maximize) == (16, 8, False)
    assert evo.total_evaluations == 16 + 3 * 8 and evo.seed == 3
    result = evo.run(lambda arch, seed: float(arch.values[0]))
    assert all(r.params <= 10 for r in result.history)
    rnd = make_strategy(SearchConfig(strategy="random"), IntVectorSpace(), seed=0, maximize=True)
    assert isinstance(rnd, RandomSearch) and rnd.total_evaluations == 2048


def test_bad_search_mapping_names_the_key():
    with pytest.raises(RecipeError, match="evolution.tournament_sise"):
        from_dict(SearchConfig, {"evolution": {"tournament_sise": 3}}, source="recipe.yaml")
    with pytest.raises(RecipeError, match="strategy"):
        from_dict(SearchConfig, {"strategy": "bayesian"}, source="recipe.yaml")
    with pytest.raises(RecipeError, match="max_params"):
        make_strategy(from_dict(SearchConfig, {"constraints": {"max_params": 5}}), IntVectorSpace(), seed=0,
                      maximize=True)


def test_the_vision_harness_chooses_its_strategy_in_the_same_place():
    from ctrnas.vision.search import run_search

    with pytest.raises(RecipeError, match="vision search: key 'strategy': expected one of 'evolution', 'random'"):
        run_search(lambda cell, seed: 0.0, None, strategy="bayes")
