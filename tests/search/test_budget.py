"""A fitness with a budget: the budget reaches the fitness, keys the cache and is recorded in the history;
with one budget a search is the search it was before."""

from __future__ import annotations

import csv

import numpy as np

from ctrnas.search.fitness import ScoreCache, candidate_seed
from ctrnas.search.history import History
from ctrnas.search.parallel import Scorer
from ctrnas.search.random_search import RandomSearch, RandomSearchConfig
from ctrnas.search.runner import Candidate, _score_batch

from tests.helpers.fitness import BudgetNoise
from tests.helpers.toy_search import IntVector, IntVectorSpace

SPACE = IntVectorSpace(6, 3)
CFG = RandomSearchConfig(budget=12, batch_size=4)
FIT = BudgetNoise(default_budget=4)


def _run(**options):
    return RandomSearch(SPACE, CFG, seed=3).run(FIT, **options)


def test_the_default_budget_is_spent_and_recorded():
    result = _run()
    assert [r.budget for r in result.history] == [4] * 12
    for r in result.history:  # each value is the fitness at budget 4 with the candidate's own seed
        arch = IntVector(tuple(r.arch["values"]))
        assert r.value == FIT(arch, r.seed, 4).value
        assert r.seed == candidate_seed(3, r.index)
    assert result.history.same_as(_run(budget=4).history)


def test_another_budget_gives_other_scores_and_its_own_cache_entries():
    cache = ScoreCache()
    at4 = _run(cache=cache)
    assert cache.misses == 12 and cache.hits == 0
    at2 = _run(cache=cache, budget=2)
    assert cache.hits == 0  # a score at budget 4 says nothing about budget 2
    assert [r.budget for r in at2.history] == [2] * 12
    assert [r.key for r in at2.history] == [r.key for r in at4.history]  # same proposals, other scores
    assert all(a.value != b.value for a, b in zip(at2.history, at4.history))
    again = _run(cache=cache, budget=4)
    assert cache.hits == 12 and all(r.cached for r in again.history)
    assert [r.value for r in again.history] == [r.value for r in at4.history]


def test_candidates_with_their_own_budgets_are_scored_once_per_key_and_budget():
    arch = IntVector((1, 2, 0, 0, 1, 2))
    cands = [Candidate(arch, arch.key(), 0, budget=b) for b in (1, 2, 1, None)]
    cache = ScoreCache()
    with Scorer(FIT) as scorer:
        out = _score_batch(cands, 0, seed=9, cache=cache, scorer=scorer, budget=8)
    assert [o[4] for o in out] == [1, 2, 1, 8]  # None takes the search's budget
    assert [o[3] for o in out] == [False, False, True, False]  # the repeat at budget 1 reuses the first score
    assert out[2][0] == out[0][0]
    assert out[1][0].value == FIT(arch, candidate_seed(9, 1), 2).value
    assert len(cache) == 3 and (arch.key(), 2) in cache and arch.key() not in cache


def test_worker_processes_give_the_serial_history_with_a_budget():
    assert _run(workers=2, budget=2).history.same_as(_run(budget=2).history)


def test_history_files_keep_the_budget(tmp_path):
    history = _run(budget=3).history
    history.to_json(tmp_path / "h.json")
    assert History.from_json(tmp_path / "h.json").same_as(history)
    history.to_csv(tmp_path / "h.csv")
    with open(tmp_path / "h.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["budget"] for r in rows] == ["3"] * 12


def test_a_fitness_without_a_budget_is_called_as_before_and_records_none():
    calls = []

    def plain(arch, seed):  # two arguments only: must never be given a budget
        calls.append(seed)
        return float(np.sum(arch.values))

    result = RandomSearch(SPACE, CFG, seed=3).run(plain)
    assert len(calls) == len({r.key for r in result.history}) and all(r.budget is None for r in result.history)
    cache = ScoreCache({"1-1-1-1-1-1": 5.0})  # bare keys (filled from a table of scores) mean "no budget"
    assert cache.get("1-1-1-1-1-1") == 5.0 and "1-1-1-1-1-1" in cache


def test_a_checkpoint_from_before_budgets_resumes_with_its_cache(tmp_path):
    import json

    ckpt = tmp_path / "search.ckpt"
    first = _run(checkpoint_path=ckpt)
    doc = json.loads(ckpt.read_text())
    # as written before budgets: the cache keyed by architecture alone (records lack the field: default)
    entries = doc["state"]["cache"]["entries"]["~items"]
    doc["state"]["cache"]["entries"] = {"~items": [[k["~tuple"][0], v] for k, v in entries]}
    ckpt.write_text(json.dumps(doc))
    cache = ScoreCache()
    again = _run(checkpoint_path=ckpt, cache=cache)
    assert again.history.same_as(first.history)
    assert len(cache) == len({r.key for r in first.history}) and all(
        (r.key, 4) in cache for r in first.history)  # read as scores at the fitness's default budget
