"""A batch is handed to the scorer costliest first (FLOPs a row times the rows), with the job-order results."""

from __future__ import annotations

import math

from ctrnas.search.fitness import ScoreCache, candidate_seed
from ctrnas.search.parallel import Scorer
from ctrnas.search.runner import Candidate, _score_batch

from tests.helpers.fitness import BudgetNoise
from tests.helpers.toy_search import IntVector

FIT = BudgetNoise(default_budget=4)
ARCHS = [IntVector((i, 2, i % 3)) for i in range(6)]


class Recording:
    """A scorer that scores in this process and keeps the costs it was given."""

    def __init__(self):
        self.costs = None

    def score(self, jobs, costs=None):
        self.costs = costs
        return [(FIT(*job), 0.0) for job in jobs]


def _candidates(flops, budgets):
    return [Candidate(a, a.key(), 0, flops=f, budget=b) for a, f, b in zip(ARCHS, flops, budgets)]


def test_the_scorer_gets_flops_times_rows_for_each_job():
    flops = [10.0, 30.0, 20.0, math.nan, 40.0, 5.0]
    scorer = Recording()
    _score_batch(_candidates(flops, [2, 2, 2, 2, 3, None]), 0, seed=1, cache=ScoreCache(), scorer=scorer, budget=4)
    want = [20.0, 60.0, 40.0, math.nan, 120.0, 20.0]  # None: the search's budget of 4
    assert len(scorer.costs) == 6
    assert all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(scorer.costs, want))


def test_two_worker_processes_handed_the_costliest_first_give_the_serial_scores():
    cands = _candidates([1.0, 50.0, 2.0, 40.0, 3.0, 30.0], [2] * 6)
    with Scorer(FIT, workers=2) as scorer:
        par = _score_batch(cands, 5, seed=9, cache=ScoreCache(), scorer=scorer)
    serial = _score_batch(cands, 5, seed=9, cache=ScoreCache(), scorer=Recording())
    assert [r[0].value for r in par] == [r[0].value for r in serial]
    for i, (result, _, seed, cached, budget) in enumerate(par):  # each the fitness at its own seed
        assert seed == candidate_seed(9, 5 + i) and not cached and budget == 2
        assert result.value == FIT(ARCHS[i], seed, 2).value
