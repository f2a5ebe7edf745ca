"""The predictor's `relative` mode: it learns what an edit does (a child's score minus its parent's) instead of
what an arch scores, for children that start from their line's weights and so score mostly as their line."""

import json

import numpy as np
import pytest

from ctrnas.errors import RecipeError
from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
from ctrnas.search.fitness import FitnessResult
from ctrnas.search.predictor import Predictor, PredictorConfig
from tests.helpers.toy_search import IntVector, IntVectorSpace


WEIGHTS = (3.0, -2.0, 1.0, 0.0, 0.0)


def quality(arch: IntVector) -> float:
    """The part of a score an arch's features explain (higher is better): each edit has an effect of its own,
    as adding a layer or widening one has in a CTR arch."""
    return sum(w * v for w, v in zip(WEIGHTS, arch.values, strict=True))


def features(arch: IntVector) -> dict:
    return {f"v{i}": float(v) for i, v in enumerate(arch.values)}


def edits(arch: IntVector, top: int) -> list[IntVector]:
    """Every one-step edit of `arch`: one position up or down by one."""
    out = []
    for i, v in enumerate(arch.values):
        for w in (v - 1, v + 1):
            if 0 <= w < top:
                out.append(IntVector(arch.values[:i] + (w,) + arch.values[i + 1:]))
    return out


def hits(relative: bool, trials: int = 10) -> tuple[int, int]:
    """(picks of the predictor that are the best edit of a new line, picks of random at the same budget).

    Each line's score is a large offset of its own, unrelated to the features (a line's training history),
    plus its arch's quality, plus noise; 4 lines of 4 children each are scored, then the predictor picks one
    edit of each of 6 new lines' roots."""
    space = IntVectorSpace(5, 5)
    got = {"predictor": 0, "random": 0}
    for trial in range(trials):
        rng = np.random.default_rng(trial)
        pred = Predictor(PredictorConfig(pool=4, min_train=6, trees=50, relative=relative), features, [True],
                         seed=trial)

        def score(arch: IntVector, offset: float) -> float:
            return offset + quality(arch) + float(rng.normal(0, 0.3))

        for _ in range(4):
            root, offset = space.sample(rng), float(rng.normal(0, 20))
            pred.observe(root.key(), root, 0, score(root, offset))
            for child in rng.permutation(np.array(edits(root, 5), dtype=object))[:4]:
                pred.observe(child.key(), child, 0, score(child, offset), parent=root.key())
        for _ in range(6):
            root, offset = space.sample(rng), float(rng.normal(0, 20))
            pred.observe(root.key(), root, 0, score(root, offset))
            pool = edits(root, 5)
            best = max(quality(a) for a in pool)
            pick = pred.choose([(a.key(), a) for a in pool], 1, [root.key()] * len(pool))[0]
            got["predictor"] += quality(pool[pick]) == best
            got["random"] += quality(pool[int(rng.integers(len(pool)))]) == best
    return got["predictor"], got["random"]


def test_relative_mode_picks_the_best_edit_where_lines_differ_more_than_edits():
    relative, random = hits(True)
    absolute, _ = hits(False)
    # 60 picks: the edit model finds the best edit most of the time, the score model and random rarely
    assert relative >= 40, (relative, absolute, random)
    assert relative > absolute + 15 and relative > 2 * random, (relative, absolute, random)


def test_the_report_gives_the_tau_of_the_changes_from_the_parent():
    space = IntVectorSpace(5, 5)
    rng = np.random.default_rng(0)
    for relative in (False, True):
        pred = Predictor(PredictorConfig(pool=4, min_train=4, trees=30, relative=relative), features, [True])
        root = IntVector((2, 2, 2, 2, 2))
        pred.observe(root.key(), root, 0, 50.0 + quality(root))  # another line: an offset of its own
        for child in edits(root, 5):
            pred.observe(child.key(), child, 0, 50.0 + quality(child), parent=root.key())
        parent = IntVector((1, 3, 1, 2, 2))
        pred.observe(parent.key(), parent, 0, quality(parent))
        pool = edits(parent, 5)
        chosen = pred.choose([(a.key(), a) for a in pool], 3, [parent.key()] * len(pool))
        for i in chosen:
            pred.observe(pool[i].key(), pool[i], 0, quality(pool[i]) + float(rng.normal(0, 0.01)),
                         parent=parent.key())
        report = pred.report()
        assert report["relative"] is relative and report["unseen_change_n"] == 3
        # the changes the predictor was checked on are the actual score minus the parent's at prediction time
        for _, _, _, actual, base in pred.checked:
            assert base == quality(parent) and actual - base == pytest.approx(0.0, abs=3.1)
        if relative:  # the best three edits (v0 up +3, v1 down +2, v2 up +1), learnt from the other line's
            assert sorted(quality(pool[i]) - quality(parent) for i in chosen) == [1.0, 2.0, 3.0]
        # the state is plain data and restores the same report, parents included
        other = Predictor(pred.config, features, [True])
        other.load_state_dict(json.loads(json.dumps(pred.state_dict())))
        assert other.report() == report and other.parents == pred.parents


def test_evolution_tells_the_predictor_each_childs_parent():
    cfg = EvolutionConfig(population_size=6, generations=5, tournament_size=3, children_per_generation=2)
    pred = Predictor(PredictorConfig(pool=4, min_train=3, trees=20, relative=True), features, [True], seed=1)
    evo = RegularizedEvolution(IntVectorSpace(5, 5), cfg, seed=1, predictor=pred)
    parents = {}
    while not evo.done:
        cands = evo.ask()
        parents.update({c.key: c.parent_key for c in cands if c.parent_key})
        evo.tell(cands, [FitnessResult(quality(c.arch)) for c in cands])
    assert parents and all(pred.parents[k] == p for k, p in parents.items())
    report = pred.report()
    assert report["unseen_n"] > 0 and report["unseen_change_n"] == report["unseen_n"]
    # a search without the option keeps its old fingerprint (a checkpoint from before it resumes)
    assert "relative" in evo.fingerprint()["predictor"]
    plain = RegularizedEvolution(IntVectorSpace(5, 5), cfg, seed=1,
                                 predictor=Predictor(PredictorConfig(pool=4), features, [True]))
    assert "relative" not in plain.fingerprint()["predictor"]


class SweptSpace(IntVectorSpace):
    """The toy space with one-step local edits, as `ctrnas-small` has (`local_sweep`)."""

    def local_neighbours(self, arch: IntVector) -> list[IntVector]:
        return edits(arch, self.choices)


def test_lines_by_predictor_give_no_children_to_a_line_far_behind():
    """With `lines_by_predictor` the children come from the edits of both lines' bests, picked by the relative
    predictor; lines take turns until it is fitted. Line b is 50 behind line a: once fitted, every child is
    a's, while with turns half go to b."""
    def run(by_predictor: bool) -> list[str]:
        cfg = EvolutionConfig(population_size=2, tournament_size=2, generations=12, children_per_generation=1,
                              local_sweep=True, lineages=2, lines_by_predictor=by_predictor)
        pred = Predictor(PredictorConfig(pool=2, min_train=4, trees=20, relative=True), features, [True], seed=0)
        a, b = IntVector((0, 0, 0, 0, 0)), IntVector((4, 4, 4, 4, 4))
        evo = RegularizedEvolution(SweptSpace(5, 5), cfg, seed=0, initial=(a, b), predictor=pred)
        offset = {a.key(): 0.0, b.key(): -50.0}
        roots = {a.key(): a.key(), b.key(): b.key()}
        init = evo.ask()
        evo.tell(init, [FitnessResult(offset[c.key] + quality(c.arch)) for c in init])
        lines = []
        while not evo.done:
            (child,) = evo.ask()
            roots[child.key] = roots[child.parent_key]
            lines.append(roots[child.key])
            evo.tell([child], [FitnessResult(offset[roots[child.key]] + quality(child.arch))])
        return [("a" if r == a.key() else "b") for r in lines]

    turns, chosen = run(False), run(True)
    assert turns == ["a", "b"] * 6
    assert chosen[:4] == ["a", "b"] * 2  # 4 children to fit on (min_train), in turns
    assert chosen[4:] == ["a"] * 8
    with pytest.raises(RecipeError, match="lines_by_predictor"):
        EvolutionConfig(lines_by_predictor=True, lineages=2)


def test_the_options_need_the_predictor_and_the_parents():
    import yaml

    from ctrnas.config import from_dict
    from ctrnas.search.build import SearchConfig, make_strategy

    for text in ("predictor: {relative: true}",
                 "evolution: {lineages: 2, local_sweep: true, lines_by_predictor: true}"):
        cfg = from_dict(SearchConfig, yaml.safe_load(text), source="recipe.yaml")
        with pytest.raises(RecipeError, match="predictor.pool"):
            make_strategy(cfg, SweptSpace(5, 5), seed=0, maximize=True)
    pred = Predictor(PredictorConfig(pool=4, relative=True), features, [True])
    with pytest.raises(ValueError, match="parent"):
        pred.choose([("a", IntVector((0, 0, 0, 0, 0)))], 1)


def test_more_seed_archs_than_the_initial_population_is_an_error():
    """Evolution's generation 0 takes the seeds first; a seed beyond `population_size` would be dropped unseen."""
    import yaml

    from ctrnas.config import from_dict
    from ctrnas.search.build import SearchConfig, make_strategy

    cfg = from_dict(SearchConfig, yaml.safe_load("evolution: {population_size: 2, tournament_size: 2}"),
                    source="recipe.yaml")
    seeds = [IntVector((i, 0, 0, 0, 0)) for i in range(3)]
    with pytest.raises(RecipeError, match="3 seed archs fit the space but search.evolution.population_size is 2"):
        make_strategy(cfg, SweptSpace(5, 5), seed=0, maximize=True, initial=seeds)
    strategy = make_strategy(cfg, SweptSpace(5, 5), seed=0, maximize=True, initial=seeds[:2])
    assert [c.arch for c in strategy.ask()] == seeds[:2]


def test_the_report_sets_the_parents_own_tau_beside_the_predictors():
    """By hand: predicted (1, 2, 3) against actual (3, 1, 2) has one concordant pair of three (tau -1/3); the
    parents' scores (30, 10, 20) rank the actual scores exactly (tau 1); the changes (-29, -8, -17) against
    (-27, -9, -18) rank them exactly too."""
    pred = Predictor(PredictorConfig(pool=4, min_train=4), features, [True])
    pred.checked = [["a", 0, 1.0, 3.0, 30.0], ["b", 0, 2.0, 1.0, 10.0], ["c", 0, 3.0, 2.0, 20.0],
                    ["d", 0, 5.0, 4.0, None]]  # no parent score: in the tau, not in the parents' tau
    report = pred.report()
    assert report["per_rung"]["0"]["n"] == 4 and report["unseen_change_n"] == 3
    assert report["per_rung"]["0"]["parent_tau"] == pytest.approx(1.0)
    assert report["unseen_parent_tau"] == pytest.approx(1.0)
    assert report["unseen_change_tau"] == pytest.approx(1.0)
    # with d (predicted 5, actual 4, above all): 3 more concordant pairs, so (4 - 2) / 6
    assert report["unseen_tau"] == pytest.approx(1 / 3)
    from ctrnas.pipeline.report import search_lines

    (line,) = search_lines({"predictor": report})
    assert "tau on candidates it had not seen 0.33 (n 4)" in line
    assert "tau of the predicted change from the parent 1.00 (n 3), of the parent's own score 1.00" in line
