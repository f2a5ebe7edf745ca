"""The search's new levers end to end at test size: predictor-guided evolution with elitism and local moves
on short-training rungs (its report and the ladder's self-check in metrics.json), and random search as a
strategy any recipe can select."""

import json
import math

import pytest

from ctrnas import api

RUNGS = "search.multifidelity.rungs=[{fitness: short, budget: 1024, keep: 0.5}, {fitness: short, budget: 2048}]"


@pytest.fixture(scope="module")
def guided_run(tests_data, tests_recipe_path, data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("guided") / "run"
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={out}",
                             "search.strategy=multifidelity", RUNGS, "search.predictor.pool=3",
                             "search.predictor.min_train=3", "search.predictor.trees=20",
                             "search.predictor.proxies=[naswot]", "search.evolution.elitism=2",
                             "search.evolution.local_share=0.5",
                             "final.export=false")  # its tests read the metrics and the summary, not the model
    return recipe, api.run(recipe, progress=False, echo=None)


def test_the_predictor_reports_its_tau_on_unseen_candidates_and_what_it_weighed(guided_run):
    recipe, result = guided_run
    metrics = json.loads((result.output_dir / "metrics.json").read_text())
    p = metrics["search"]["predictor"]
    assert p["model"] == "scikit-learn RandomForestRegressor"
    # every child after the first generation was picked by the predictor before it was scored
    evo = recipe.search.evolution
    assert p["unseen_n"] >= evo.children_per_generation
    assert p["unseen_tau"] is None or -1 <= p["unseen_tau"] <= 1
    assert any(k.startswith("naswot") for k in p["importances"]) and "params" in p["importances"]
    assert math.isclose(sum(p["importances"].values()), 1.0, rel_tol=1e-6)
    # the children's parents: each child records the key of a member of the history
    h = list(result.search.history)
    keys = {r.key for r in h}
    assert all(r.parent_key in keys for r in h if r.generation > 0)


def test_the_ladder_self_check_pairs_consecutive_rungs_and_the_final_stage(guided_run):
    _, result = guided_run
    ladder = json.loads((result.output_dir / "metrics.json").read_text())["search"]["ladder"]
    assert [(c["from"], c["to"]) for c in ladder] == [(0, 1), (1, "final")]
    h = list(result.search.history)
    both = {r.key for r in h if r.rung == 0} & {r.key for r in h if r.rung == 1}
    assert ladder[0]["n"] == len(both)
    assert ladder[1]["n"] == len(result.final.candidates)
    summary = (result.output_dir / "summary.md").read_text()
    assert "- ladder self-check (Kendall tau between consecutive steps): 0 -> 1: tau" in summary
    assert "- predictor (scikit-learn RandomForestRegressor): tau on candidates it had not seen" in summary
    lineage = json.loads((result.output_dir / "metrics.json").read_text())["search"]["lineage"]
    assert lineage["children"] == sum(1 for r in h if r.parent_key and r.rung == 0)
    assert f"- evolution: {lineage['children']} children" in summary


def test_random_search_is_a_strategy_any_recipe_can_select(tests_data, tests_recipe_path, data_dir,
                                                          tmp_path_factory):
    # random search at the final stage's cost: 3 random archs retrained, no scoring, no warm-up
    out = tmp_path_factory.mktemp("random") / "run"
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={out}",
                             "search.strategy=random", "fitness=random", "warmup.fraction=0",
                             "search.random.budget=3", "search.random.batch_size=3", "search.top_k=3",
                             "space.emb_dims=[8, 16]", "final.export=false")  # the metrics are read, not model/
    result = api.run(recipe, progress=False, echo=None)
    metrics = json.loads((result.output_dir / "metrics.json").read_text())
    assert metrics["compute"]["samples"]["search"] == 0
    assert metrics["compute"]["fte"]["final"] == 3
    assert len(result.final.candidates) == 3
    assert len({c.arch.key() for c in result.final.candidates}) == 3


def test_compare_adds_random_search_at_the_searches_fte(tests_data, tests_recipe_path, data_dir, tmp_path):
    from ctrnas.pipeline.compare import search_fte

    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path / 'cmp'}",
                             "search.evolution.generations=1", "final.baselines=[]", "search.top_k=2",
                             "final.export=false")  # no torch.export per setting: the runs above export
    result = api.compare(recipe, fractions=(0.05,), progress=False, echo=None, random=True)
    first, rand = result.table
    spent = search_fte(result.runs[first["setting"]])
    k = max(1, round(spent))
    assert rand["setting"] == f"random ({k} FTE)"
    c = result.runs[rand["setting"]].metrics["compute"]
    assert c["samples"]["search"] == 0 and c["fte"]["final"] == k
    assert len(result.runs[rand["setting"]].final.candidates) == k
