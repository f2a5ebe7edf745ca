"""Elitism, local moves and the learned predictor of predictor-guided evolution (BANANAS-style)."""

import math

import numpy as np
import pytest

from ctrnas.errors import RecipeError
from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution, mutations_at
from ctrnas.search.fitness import FitnessResult
from ctrnas.search.multifidelity import MultiFidelity, RungConfig
from ctrnas.search.predictor import Predictor, PredictorConfig
from tests.helpers.toy_search import IntVector, IntVectorSpace

CFG = EvolutionConfig(population_size=8, generations=4, tournament_size=3, children_per_generation=2)


def test_elitism_keeps_the_best_initial_member_that_aging_removes():
    # the same run as test_the_best_initial_member_dies_of_age, with elitism 1: it survives every generation
    import dataclasses

    evo = RegularizedEvolution(IntVectorSpace(6, 4), dataclasses.replace(CFG, elitism=1), seed=1)
    init = evo.ask()
    best_key = init[5].key
    evo.tell(init, [FitnessResult(100.0 if c.key == best_key else -1.0) for c in init])
    for _ in range(4):
        children = evo.ask()
        evo.tell(children, [FitnessResult(0.0) for _ in children])
        assert best_key in [m.key for m in evo.population]
        assert len(evo.population) == 8
    # the others still die oldest first: no other initial member is left after 4 x 2 deaths
    assert {m.key for m in evo.population} & {c.key for c in init} == {best_key}


def test_elitism_and_local_share_are_checked():
    with pytest.raises(RecipeError, match="elitism"):
        EvolutionConfig(population_size=4, tournament_size=2, elitism=4)
    with pytest.raises(RecipeError, match="local_share"):
        EvolutionConfig(local_share=1.5)


def noisy_rung(arch: IntVector, seed: int) -> float:
    """A known objective (higher is better: -sum (v - 2)^2) seen through a cheap rung with noise."""
    true = -sum((v - 2) ** 2 for v in arch.values)
    return true + float(np.random.default_rng(seed).normal(0, 1.0))


def features(arch: IntVector) -> dict:
    return {f"v{i}": float(v) for i, v in enumerate(arch.values)}


def test_predictor_picks_the_true_best_more_often_than_random_at_equal_budget():
    space = IntVectorSpace(6, 5)
    hits = {"predictor": 0, "random": 0}
    for trial in range(12):
        rng = np.random.default_rng(trial)
        pred = Predictor(PredictorConfig(pool=8, min_train=8, trees=50), features, [True], seed=trial)
        # 24 scored archs to learn from, then 10 pools of 8 fresh archs: each side scores one per pool
        for i in range(24):
            a = space.sample(rng)
            pred.observe(a.key(), a, None, noisy_rung(a, 1000 * trial + i))
        for pool_i in range(10):
            pool = [space.sample(rng) for _ in range(8)]
            truth = [-sum((v - 2) ** 2 for v in a.values) for a in pool]
            best = max(truth)
            pick = pred.choose([(a.key(), a) for a in pool], 1)[0]
            hits["predictor"] += truth[pick] == best
            hits["random"] += truth[int(rng.integers(8))] == best
    assert hits["predictor"] > 2 * hits["random"], hits


def test_predictor_reports_tau_on_unseen_candidates_and_importances():
    space = IntVectorSpace(4, 5)
    rng = np.random.default_rng(0)
    # only position 0 matters: the importances must say so
    pred = Predictor(PredictorConfig(pool=4, min_train=6, trees=50), features, [False], seed=0)
    assert pred.choose([("x", IntVector((0, 0, 0, 0)))], 1) is None  # nothing to fit on yet
    for _ in range(30):
        a = space.sample(rng)
        pred.observe(a.key(), a, 0, float(a.values[0]))  # minimized: low v0 is good
    pool = [space.sample(rng) for _ in range(40)]
    pool = list({a.key(): a for a in pool}.values())
    chosen = pred.choose([(a.key(), a) for a in pool], 10)
    for i in chosen:
        pred.observe(pool[i].key(), pool[i], 0, float(pool[i].values[0]))
    report = pred.report()
    assert report["unseen_n"] == 10
    assert report["unseen_tau"] > 0.5
    assert max(report["importances"], key=report["importances"].get) == "v0"
    # the state is plain data and restores the same report
    import json

    other = Predictor(PredictorConfig(pool=4, min_train=6, trees=50), features, [False], seed=0)
    other.load_state_dict(json.loads(json.dumps(pred.state_dict())))
    assert other.report() == report


def test_predictor_guided_evolution_is_deterministic_and_learns_from_every_rung():
    def run():
        evo = RegularizedEvolution(IntVectorSpace(6, 5), CFG, seed=3,
                                   predictor=Predictor(PredictorConfig(pool=4, min_train=4, trees=20),
                                                       features, [True, True], seed=3))
        mf = MultiFidelity(evo, (RungConfig("a", keep=0.5), RungConfig("b")), [True, True])
        keys = []
        while not mf.done:
            cands = mf.ask()
            keys += [(c.key, c.rung) for c in cands]
            mf.tell(cands, [FitnessResult(noisy_rung(c.arch, i)) for i, c in enumerate(cands)])
        return keys, evo.predictor
    keys, pred = run()
    assert keys == run()[0]
    rungs = {r for _, r, _ in pred.scores}
    assert rungs == {0, 1}
    assert len(pred.scores) == len(keys)
    assert pred.report()["unseen_n"] > 0


def test_predictor_pool_is_checked():
    with pytest.raises(RecipeError, match="pool"):
        PredictorConfig(pool=1)
    assert math.isnan(Predictor(PredictorConfig(pool=2), features, [True]).report()["unseen_tau"])


def test_ladder_agreement_is_kendall_tau_between_consecutive_rungs():
    from ctrnas.search.history import History, HistoryRecord
    from ctrnas.search.multifidelity import ladder_agreement

    # rung 0 minimized (log loss), rung 1 minimized: keys a..d at rung 0, a, b, c at rung 1
    rows = [("a", 0, 0.50), ("b", 0, 0.51), ("c", 0, 0.52), ("d", 0, 0.60),
            ("a", 1, 0.45), ("b", 1, 0.44), ("c", 1, 0.46)]
    h = History([HistoryRecord(index=i, generation=0, key=k, arch={}, value=v, rung=r)
                 for i, (k, r, v) in enumerate(rows)])
    (agree,) = ladder_agreement(h, [False, False])
    # pairs over a, b, c: (a,b) discordant, (a,c) concordant, (b,c) concordant -> tau = (2 - 1) / 3
    assert agree["from"] == 0 and agree["to"] == 1 and agree["n"] == 3
    assert agree["tau"] == pytest.approx(1 / 3)


def test_local_sweep_tries_the_whole_neighbourhood_of_the_best_without_repeats():
    """With `local_sweep`, every child of the (always best) seed is one of its untried one-step local edits:
    after as many children as it has neighbours, each was tried once; then children are mutants again."""
    import dataclasses

    from ctrnas.space import PRESETS, get_space
    from ctrnas.space.baselines import baseline_arch

    space = get_space(dataclasses.replace(PRESETS["ctrnas-small"], num_blocks=7,
                                          dense_dims=(16, 32, 64, 128, 256, 400), dense_sparse_merge=(False,)))
    seed_arch = space.validate(baseline_arch("dlrm-like"))
    neighbours = {a.key() for a in space.local_neighbours(seed_arch)}
    assert len(neighbours) == 11  # 7 widths and 4 FM flips

    def run(sweep, generations=6):
        cfg = EvolutionConfig(population_size=3, generations=generations, tournament_size=3,
                              children_per_generation=2, elitism=1, local_sweep=sweep)
        evo = RegularizedEvolution(space, cfg, seed=5, initial=(seed_arch,))
        init = evo.ask()
        evo.tell(init, [FitnessResult(1.0 if c.key == seed_arch.key() else 0.0) for c in init])
        children = []
        while not evo.done:
            batch = evo.ask()
            children += batch
            evo.tell(batch, [FitnessResult(0.0) for _ in batch])  # the seed stays the best: always the parent
        return [c.key for c in children]

    swept = run(True)
    assert len(swept) == 12 and len(set(swept)) == 12
    assert set(swept[:10]) < neighbours  # five generations of two: ten different edits of the seed
    assert swept == run(True)  # seeded
    plain = run(False)
    assert len(set(plain[:10]) & neighbours) < 10  # NASRec's mutation re-draws any choice, rarely a local one
    # with 30 generations NASRec's schedule asks 2 mutations a child early on; a sweep's children still
    # are one-step edits
    assert mutations_at(1, EvolutionConfig(generations=30)) == 2
    assert set(run(True, generations=30)[:10]) < neighbours


def test_lineages_give_children_to_the_best_of_each_line_in_turn_even_after_its_seed_died():
    """With `lineages: 2` the parents alternate between the best archs of the two best lines (a line: an
    initial member and its descendants), the third line gets none, and a line's best stays a parent after
    aging removed it from the population; the state round-trips (a resumed search asks the same)."""
    import dataclasses

    from ctrnas.search.history import History, HistoryRecord

    cfg = dataclasses.replace(CFG, population_size=3, tournament_size=3, generations=6, children_per_generation=1,
                              lineages=2)
    evo = RegularizedEvolution(IntVectorSpace(6, 4), cfg, seed=3)
    init = evo.ask()
    a, b, c = (m.key for m in init)
    value = {a: 10.0, b: 9.0, c: 1.0}
    evo.tell(init, [FitnessResult(value[m.key]) for m in init])
    parents, records = [], [HistoryRecord(i, 0, m.key, {}, value[m.key]) for i, m in enumerate(init)]
    for g in range(1, 7):
        if g == 4:
            resumed = RegularizedEvolution(IntVectorSpace(6, 4), cfg, seed=3)
            resumed.load_state_dict(evo.state_dict())
        batch = evo.ask()
        if g == 4:
            assert [x.key for x in resumed.ask()] == [x.key for x in batch]
        parents.append(batch[0].parent_key)
        # children of a's line improve it; b's line stays at 9 (its children are worse)
        root = a if g % 2 == 1 else b
        v = 10.0 + g if root == a else 5.0
        value[batch[0].key] = v
        records.append(HistoryRecord(len(records), g, batch[0].key, {}, v, parent_key=batch[0].parent_key))
        evo.tell(batch, [FitnessResult(v)])
    # generation 1: a's line (best 10), 2: b's line (9), 3: a's line, whose best is now generation 1's child
    assert parents[0] == a and parents[1] == b and parents[3] == b and parents[5] == b
    assert parents[2] == records[3].key and parents[4] == records[5].key
    assert b not in {m.key for m in evo.population}  # aged out, still the parent of its line
    assert c not in parents
    history = History(records)
    assert history.roots()[records[-2].key] == a and history.roots()[records[-1].key] == b
    ranked = history.top_k(len(history), maximize=True)
    assert [r.key for r in history.best_of_lines(ranked, 2)] == [records[-2].key, b]
    assert [r.key for r in history.best_of_lines(ranked, 4)] == [records[-2].key, b, c, records[-4].key]
    # only the 2 refined lines get a place of their own: the third place goes to the next best of any line
    assert [r.key for r in history.best_of_lines(ranked, 3, lines=2)] == [records[-2].key, b, records[-4].key]
    with pytest.raises(RecipeError, match="lineages"):
        EvolutionConfig(lineages=-1)


def test_the_final_stage_retrains_the_best_of_each_line_with_a_multi_fidelity_ranking():
    """`SearchStageResult.retrained` (what the final stage retrains, and whose prefix trainings are kept): the
    strategy's own ranking (rung reached, then value), then one per line."""
    from ctrnas.pipeline.results import SearchStageResult
    from ctrnas.search.history import History, HistoryRecord
    from ctrnas.search.runner import SearchResult

    recs = [HistoryRecord(0, 0, "a", {}, 0.50, rung=0), HistoryRecord(1, 0, "b", {}, 0.52, rung=0),
            HistoryRecord(2, 1, "a1", {}, 0.40, parent_key="a", rung=0),
            HistoryRecord(3, 1, "a1", {}, 0.45, parent_key="a", rung=1),
            HistoryRecord(4, 1, "a2", {}, 0.47, parent_key="a", rung=1),
            HistoryRecord(5, 2, "b1", {}, 0.30, parent_key="b", rung=0)]

    def ranker(history, k):  # rung reached first, then the value at it (lower is better)
        last = {}
        for r in history:
            last[r.key] = r
        return sorted(last.values(), key=lambda r: (-(r.rung or 0), r.value))[:k]

    stage = SearchStageResult(SearchResult(History(recs), False, None, ranker), "multifidelity", "prefix", False, 0.0)
    assert [r.key for r in stage.retrained(2)] == ["a1", "a2"]
    assert [r.key for r in stage.retrained(2, lineages=2)] == ["a1", "b1"]
    assert [r.key for r in stage.retrained(3, lineages=2)] == ["a1", "b1", "a2"]


def test_the_forest_is_fitted_again_only_when_a_score_arrives(monkeypatch):
    from sklearn.ensemble import RandomForestRegressor

    fits = []
    real_fit = RandomForestRegressor.fit
    monkeypatch.setattr(RandomForestRegressor, "fit", lambda self, x, y: fits.append(len(y)) or real_fit(self, x, y))
    space, rng = IntVectorSpace(4, 5), np.random.default_rng(0)
    pred = Predictor(PredictorConfig(pool=4, min_train=6, trees=10), features, [True], seed=0)
    for _ in range(8):
        a = space.sample(rng)
        pred.observe(a.key(), a, None, float(-a.values[0]))
    pool = [(a.key(), a) for a in (space.sample(rng) for _ in range(6))]
    first = pred.choose(pool, 2)
    assert pred.choose(pool, 2) == first and fits == [8]  # nothing new: the same forest
    fresh = Predictor(pred.config, features, [True], seed=0)
    fresh.load_state_dict(pred.state_dict())
    assert fresh.choose(pool, 2) == first and fits == [8, 8]  # a restored predictor fits its own, the same
    a = space.sample(rng)
    pred.observe(a.key(), a, None, 0.0)
    pred.choose(pool, 2)
    assert fits == [8, 8, 9]
