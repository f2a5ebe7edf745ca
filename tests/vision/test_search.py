"""Proxy-driven NB201 search through ctrnas.search: the space adapter, the fitness and the judged outcome."""

import numpy as np
import pytest
import torch

from ctrnas.search.space_protocol import SearchSpace, arch_key
from ctrnas.vision.correlate import CorrelateConfig, run_correlation
from ctrnas.vision.search import ProxyFitness, cache_from_csv, run_search
from ctrnas.vision.space import TRUTH_COLUMNS, NB201Cell, NB201Space, NB201Table, enumerate_cells


@pytest.fixture(scope="module")
def conv_table():
    """Stand-in truth: accuracy = number of 3x3 convs (the one best cell is all-3x3, accuracy 6)."""
    return NB201Table("stand-in", {c.to_str(): {TRUTH_COLUMNS["cifar10"]: float(c.ops.count("nor_conv_3x3"))}
                                   for c in enumerate_cells()})


def test_nb201_space_satisfies_the_search_protocol():
    space = NB201Space()
    assert isinstance(space, SearchSpace)
    cell = space.sample(np.random.default_rng(0))
    assert arch_key(cell) == cell.to_str()


def _param_count(cell, seed):
    # The cell's share of NB201's parameters at C = 16/32/64, 5 cells per stage (see test_network).
    n3, n1 = cell.ops.count("nor_conv_3x3"), cell.ops.count("nor_conv_1x1")
    return float(5 * sum(n3 * (9 * c * c + 2 * c) + n1 * (c * c + 2 * c) for c in (16, 32, 64)))


def test_evolution_with_params_fitness_finds_the_largest_cell(conv_table):
    # #params is maximal only for the all-3x3 cell; evolution should reach it (truth = 6 convs) or get close.
    fit = _param_count
    outs = [run_search(fit, conv_table, strategy="evolution", seed=s, population=16, generations=30, tournament=4,
                       children=4) for s in (0, 1)]
    for o in outs:
        assert o.evaluations == 16 + 30 * 4
        assert o.best_accuracy == 6.0
        assert o.chosen_accuracy >= 5.0  # 3x3 convs carry most parameters
        assert o.chosen_accuracy >= o.random_choice_accuracy
    rnd = run_search(fit, conv_table, strategy="random", seed=0, budget=20, children=5)
    assert rnd.evaluations == 20 and rnd.strategy == "random"


def test_fitness_is_a_function_of_the_cell_and_csv_cache_matches(tmp_path, conv_table):
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))
    fit = ProxyFitness("params", x, y, batch_size=4, k=2, seed=0)
    cell = NB201Cell(("nor_conv_1x1",) * 6)
    assert fit(cell, 1).value == fit(cell, 2).value == 241_306
    csv = tmp_path / "s.csv"
    run_correlation(CorrelateConfig(archs=5, proxies=("params",), batch_size=4, k=2), x, y, conv_table, csv,
                    progress=False)
    cache = cache_from_csv([csv], "params")
    assert len(cache) == 5
    for (key, budget), result in cache.items():
        assert budget is None and result.value == fit(NB201Cell.from_str(key), 0).value
