"""History writers and ranking helpers; fitness results, seeds and the cache."""

import csv
import json
import math

import numpy as np
import pytest

from ctrnas.search.fitness import FitnessResult, ScoreCache, as_result, candidate_seed, rank_value
from ctrnas.search.history import History, HistoryRecord
from ctrnas.search.random_search import RandomSearch, RandomSearchConfig

from tests.helpers.toy_search import IntVectorSpace, SeparableFitness


def make_history(values):
    return History(
        HistoryRecord(index=i, generation=i // 2, key=f"a{i}", arch={"id": i}, value=v, terms={"t": 2 * v})
        for i, v in enumerate(values)
    )


def test_rank_value_orders_non_finite_last_in_both_directions():
    vals = [0.3, math.nan, -1.0, math.inf, 2.0, -math.inf]
    by_max = sorted(range(6), key=lambda i: -rank_value(vals[i], True))
    by_min = sorted(range(6), key=lambda i: -rank_value(vals[i], False))
    assert by_max[:3] == [4, 0, 2] and by_min[:3] == [2, 0, 4]
    assert set(by_max[3:]) == set(by_min[3:]) == {1, 3, 5}


def test_best_so_far_and_top_k():
    values = [1.0, math.nan, 3.0, 2.0, 5.0, 5.0]
    h = make_history(values)
    np.testing.assert_array_equal(h.best_so_far(True), [1, 1, 3, 3, 5, 5])
    np.testing.assert_array_equal(h.best_so_far(False), [1, 1, 1, 1, 1, 1])
    assert [r.index for r in h.top_k(3, True)] == [4, 5, 2]  # tie -> earlier first
    assert [r.index for r in h.top_k(6, False)] == [0, 3, 2, 4, 5, 1]
    nan_first = make_history([math.nan, 2.0])
    assert math.isnan(nan_first.best_so_far(True)[0])


def test_top_k_counts_each_architecture_once():
    h = History([HistoryRecord(0, 0, "x", {}, 1.0), HistoryRecord(1, 0, "x", {}, 1.0, cached=True),
                 HistoryRecord(2, 0, "y", {}, 0.5)])
    assert [r.index for r in h.top_k(5, True)] == [0, 2]


def test_csv_and_json_hold_every_candidate(tmp_path):
    search = lambda fit: RandomSearch(IntVectorSpace(4, 3), RandomSearchConfig(budget=6, batch_size=4), seed=0).run(fit)
    # Sampling does not depend on scores, so the same seed draws the same candidates: make the 2nd one NaN.
    nan_key = search(SeparableFitness((1, 1, 1, 1))).history[1].key
    result = search(SeparableFitness((1, 1, 1, 1), nan_keys=frozenset({nan_key})))
    assert math.isnan(result.history[1].value)
    result.history.to_csv(tmp_path / "h.csv")
    result.history.to_json(tmp_path / "h.json")
    with open(tmp_path / "h.csv") as f:
        rows = list(csv.DictReader(f))
    data = json.loads((tmp_path / "h.json").read_text())
    assert len(rows) == len(data) == 6
    for rec, row, js in zip(result.history, rows, data):
        assert int(row["index"]) == js["index"] == rec.index
        assert json.loads(row["arch"]) == js["arch"] == rec.arch
        expected = -sum((v - 1) ** 2 for v in rec.arch["values"])
        if math.isnan(rec.value):
            assert js["value"] is None and row["value"] == "nan"
        else:
            assert float(row["value"]) == js["value"] == expected
            assert float(row["term_sq_error"]) == -expected
        assert int(row["seed"]) == js["seed"] == candidate_seed(0, rec.index)
    assert History.from_json(tmp_path / "h.json").same_as(result.history)


def test_candidate_seeds_are_distinct_and_fixed():
    seeds = [candidate_seed(0, i) for i in range(1000)]
    assert len(set(seeds)) == 1000
    assert candidate_seed(0, 5) == candidate_seed(0, 5) != candidate_seed(1, 5)


def test_as_result_accepts_numbers_only():
    assert as_result(0.5) == FitnessResult(0.5)
    assert as_result(np.float32(2.0)).value == 2.0
    with pytest.raises(TypeError):
        as_result("0.5")
    with pytest.raises(TypeError):
        as_result(True)


def test_plain_float_fitness_and_preloaded_cache():
    calls = []

    def fitness(arch, seed):
        calls.append(arch.key())
        return float(sum(arch.values))

    space, cfg = IntVectorSpace(3, 2), RandomSearchConfig(budget=8, batch_size=8)
    first = RandomSearch(space, cfg, seed=0).run(fitness)
    assert len(calls) == 8
    cache = first.cache
    second = RandomSearch(space, cfg, seed=1).run(fitness, cache=cache)
    assert len(calls) == 8  # all 8 architectures of the space were cached
    assert all(r.cached and r.time_s == 0.0 for r in second.history)
    assert cache.hits == 8
    assert [r.value for r in second.history] == [float(sum(r.arch["values"])) for r in second.history]


def test_score_cache_state_roundtrip():
    c = ScoreCache()
    c.put("k", FitnessResult(1.0))
    assert c.get("k").value == 1.0 and c.get("z") is None and (c.hits, c.misses) == (1, 1)
    d = ScoreCache()
    d.load_state_dict(c.state_dict())
    assert "k" in d and len(d) == 1 and d.hits == 1
