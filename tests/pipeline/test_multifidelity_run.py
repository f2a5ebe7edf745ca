"""The CTR multi-fidelity search end to end at test size, its compute accounting (FTE), warm-up by rows and
the seeded population."""

import dataclasses
import json
import math
from types import SimpleNamespace

import pytest

from ctrnas import api
from ctrnas.pipeline.budget import fte_by_stage
from ctrnas.pipeline.data import split_rows, warmup_rows

RUNGS = ("search.multifidelity.rungs=[{fitness: proxy, budget: 2, keep: 0.5}, {fitness: oneshot, budget: 5, "
         "keep: 0.5}, {fitness: short, budget: 1024}]")


@pytest.fixture(scope="module")
def mf_run(tests_data, tests_recipe_path, data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("mf") / "run"
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={out}",
                             "search.strategy=multifidelity", RUNGS)
    return recipe, api.run(recipe, progress=False, echo=None)


def test_rungs_are_scored_in_order_and_the_final_stage_retrains_the_highest_rung(mf_run):
    recipe, result = mf_run
    h = list(result.search.history)
    evo = recipe.search.evolution
    # 6 -> 3 -> 2 in the initial population, then 3 -> 2 -> 1 per generation (keep 0.5, rounded up)
    assert [r.rung for r in h] == [0] * 6 + [1] * 3 + [2] * 2 + ([0] * 3 + [1] * 2 + [2]) * evo.generations
    assert {(r.rung, r.budget) for r in h} == {(0, 2), (1, 5), (2, 1024)}
    assert all(r.meta.get("train_rows") == 1024 for r in h if r.rung == 2)
    top = result.search.result.top_k(recipe.top_k)
    best_short = sorted((r for r in h if r.rung == 2), key=lambda r: (r.value, r.index))
    assert [r.key for r in top] == [r.key for r in best_short[:recipe.top_k]]
    assert [c.arch.key() for c in result.final.candidates] == [r.key for r in top]


def test_compute_adds_up_per_stage(mf_run, tests_data):
    recipe, result = mf_run
    metrics = json.loads((result.output_dir / "metrics.json").read_text())
    c = metrics["compute"]
    unit = recipe.final.train_rows * recipe.final_train.epochs
    assert c["unit_samples"] == unit
    h = list(result.search.history)
    # proxy batches x 256, fine-tuning steps x 256 at a third (forward only through the frozen body), rows
    by_rung = {0: 2 * 256, 1: 5 * 256 / 3, 2: 1024}
    assert c["samples"]["search"] == round(sum(by_rung[r.rung] for r in h if not r.cached))
    assert c["samples"]["warmup"] == result.warmup.rows == warmup_rows(tests_data, recipe.warmup.fraction)
    assert c["fte"]["final"] == recipe.top_k and c["fte"]["baselines"] == len(recipe.final.baselines)
    assert math.isclose(sum(v for k, v in c["fte"].items() if k != "total"), c["fte"]["total"])
    assert "Compute per stage" in (result.output_dir / "summary.md").read_text()


def test_a_run_with_only_a_final_stage_of_k_models_is_k_fte(tests_recipe_path, data_dir, tests_data):
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}")
    nothing = SimpleNamespace(history=[], fitness="proxy")
    for k in (1, 3):
        final = SimpleNamespace(candidates=[object()] * k, baselines=[])
        report = fte_by_stage(recipe, tests_data, SimpleNamespace(rows=0), nothing, final)
        assert report["fte"] == {"warmup": 0, "search": 0, "final": k, "baselines": 0, "total": k}


def test_short_training_rung_is_the_final_stage_training_on_fewer_rows(tests_recipe_path, data_dir, tests_data):
    """At its full budget, one epoch, the short-training fitness gives the final stage's validation log loss."""
    from ctrnas.pipeline.fitness.scratch import final_template, job_model, train_from_scratch
    from ctrnas.pipeline.fitness.rungs import ShortTrainingFitness
    from ctrnas.space import get_space
    import numpy as np

    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", "final.train.epochs=1",
                             "final.train.restore_best=false", "final.train_rows=1024", "final.val_rows=2000")
    arch = get_space(recipe.space).sample(np.random.default_rng(3))
    template = final_template(recipe, tests_data)
    fit = ShortTrainingFitness(recipe, tests_data, template, val_rows=2000)
    got = fit(arch, seed=123, budget=1024)
    val, _, _ = train_from_scratch(job_model(recipe, tests_data, template, ("arch", arch)), recipe, tests_data, "x")
    assert got.value == pytest.approx(val["logloss"], rel=1e-6)
    assert got.meta["samples"] == 1024
    assert fit(arch, seed=7, budget=512).value != got.value  # fewer rows, another model


def test_warmup_rows_reads_exactly_that_many_rows(tests_recipe_path, data_dir, tests_data, tmp_path):
    from ctrnas.pipeline.fitness.build import resolve_warmup
    from ctrnas.pipeline.stages import warmup_stage

    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", "warmup.rows=700")
    resolved = resolve_warmup(recipe, tests_data)
    assert warmup_rows(tests_data, resolved.warmup.fraction) == 700
    assert resolved.warmup.fraction == pytest.approx(700 / split_rows(tests_data, "train"))
    warm = warmup_stage(recipe, tests_data)
    assert warm.rows == 700 and warm.steps == math.ceil(700 / recipe.train.batch_size)
    assert resolve_warmup(dataclasses.replace(recipe, warmup=dataclasses.replace(recipe.warmup, rows=None)),
                          tests_data).warmup.fraction == recipe.warmup.fraction


SEEDING = ("space=ctrnas-small", "warmup.fraction=0", "proxy.name=params", "search.evolution.generations=0")


@pytest.fixture(scope="module")
def unwarmed_ctrnas_small(tests_recipe_path, data_dir, tests_data):
    """The warm-up stage of SEEDING (no warm-up rows: the ctrnas-small supernet as built), made once for the
    seeding tests: the parameter-count proxy only reads it, and the seed settings do not enter it."""
    from ctrnas.pipeline.stages import warmup_stage

    return warmup_stage(api.load_recipe(tests_recipe_path, f"data.path={data_dir}", *SEEDING), tests_data)


@pytest.mark.parametrize("seeded", [True, False, "listed"])
def test_search_starts_from_the_space_baselines(tests_recipe_path, data_dir, tests_data, unwarmed_ctrnas_small,
                                                seeded):
    from ctrnas.pipeline.stages import search_stage
    from ctrnas.space.baselines import BASELINE_ARCHS, baseline_arch

    names = ("deepfm-like", "dlrm-like") if seeded == "listed" else BASELINE_ARCHS
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", *SEEDING,
                             f"search.seed_population={str(bool(seeded)).lower()}",
                             *([f"search.seeds=[{', '.join(names)}]"] if seeded == "listed" else []))
    search = search_stage(recipe, tests_data, unwarmed_ctrnas_small, progress=False)
    keys = [r.key for r in search.history]
    baselines = [baseline_arch(n).key() for n in names]
    assert len(keys) == recipe.search.evolution.population_size
    if seeded:
        assert keys[:len(baselines)] == baselines  # first, then the sampled rest
    else:
        assert not set(baselines) & set(keys)


def test_rung_kinds_are_checked_and_the_random_rung_is_free(tests_recipe_path, data_dir, tests_data):
    from ctrnas.errors import RecipeError
    from ctrnas.pipeline.fitness.ctr_fitness import RandomFitness
    from ctrnas.pipeline.fitness.rungs import ladder_rungs, rung_samples

    bad = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", "search.multifidelity.rungs=[{fitness: sigeo}]")
    with pytest.raises(RecipeError, match=r"search.multifidelity.rungs\[0\].fitness.*'sigeo'"):
        ladder_rungs(bad, tests_data)
    too_many = api.load_recipe(tests_recipe_path, f"data.path={data_dir}",
                               "search.multifidelity.rungs=[{fitness: short, budget: 10000000}]")
    with pytest.raises(RecipeError, match=r"rungs\[0\].budget"):
        ladder_rungs(too_many, tests_data)
    rungs = ladder_rungs(api.load_recipe(tests_recipe_path, f"data.path={data_dir}",
                                         "search.multifidelity.rungs=[{fitness: random, keep: 0.5}]"), tests_data)
    assert rung_samples(bad, rungs[0], None) == 0
    from ctrnas.pipeline.data import split_rows

    n = split_rows(tests_data, "train")
    share = ladder_rungs(api.load_recipe(tests_recipe_path, f"data.path={data_dir}",
                                         "search.multifidelity.rungs=[{fitness: short, fraction: 0.5}]"), tests_data)
    assert share[0].budget == max(round(n / 2), bad.final_train.batch_size)  # a share of the rows, in rows
    for wrong, field in (("{fitness: proxy, fraction: 0.5}", "fraction"), ("{fitness: short, fraction: 1.5}", "fraction"),
                         ("{fitness: short, fraction: 0.5, budget: 100}", "fraction")):
        with pytest.raises(RecipeError, match=field):
            ladder_rungs(api.load_recipe(tests_recipe_path, f"data.path={data_dir}",
                                         f"search.multifidelity.rungs=[{wrong}]"), tests_data)
    r = RandomFitness()
    assert r("a", 3).value == r("b", 3).value != r("a", 4).value  # the candidate's seed alone decides


def test_prefix_rung_floor_in_steps_and_the_warmup_warning(tests_recipe_path, data_dir, tests_data):
    import math

    from ctrnas.errors import RecipeError
    from ctrnas.pipeline.fitness.rungs import final_steps, inside_warmup, ladder_rungs

    def load(rungs):
        return api.load_recipe(tests_recipe_path, f"data.path={data_dir}", "search.strategy=multifidelity",
                               f"search.multifidelity.rungs={rungs}")

    recipe = load("[{fitness: prefix, fraction: 0.01}, {fitness: prefix, fraction: 0.5}]")
    total = final_steps(recipe, tests_data)
    warm = math.ceil(recipe.final_train.warmup_ratio * total)
    assert total >= 10 and 1 <= warm < total // 2  # the fixture: enough steps for a rung inside and one past
    first, second = ladder_rungs(recipe, tests_data)
    assert first.budget == max(1, round(0.01 * total)) <= warm < second.budget == round(0.5 * total)
    (line,) = inside_warmup(recipe, tests_data)  # the first rung only
    assert line.startswith(f"warning: rung 0 ({first.budget} steps) ends inside the learning rate's warm-up "
                           f"({warm} steps)")
    floored = load(f"[{{fitness: prefix, fraction: 0.01, min_steps: {warm + 1}}}, {{fitness: prefix, fraction: 0.5}}]")
    assert ladder_rungs(floored, tests_data)[0].budget == warm + 1  # the floor, above the share
    assert inside_warmup(floored, tests_data) == []
    capped = load("[{fitness: prefix, fraction: 0.01, min_steps: 100000000}]")
    assert ladder_rungs(capped, tests_data)[0].budget == total  # never more than the whole training
    assert ladder_rungs(load("[{fitness: prefix, fraction: 0.5, min_steps: 1}]"), tests_data)[0].budget == \
           round(0.5 * total)  # a floor below the share changes nothing
    for wrong in ("[{fitness: short, fraction: 0.5, min_steps: 10}]", "[{fitness: prefix, budget: 5, min_steps: 10}]",
                  "[{fitness: prefix, fraction: 0.5, min_steps: 0}]"):
        with pytest.raises(RecipeError, match="min_steps"):
            ladder_rungs(load(wrong), tests_data)


def test_compare_shows_the_multifidelity_search_with_compute(tests_recipe_path, data_dir, tests_data, tmp_path):
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path / 'cmp'}",
                             "search.evolution.generations=1", "final.baselines=[]", "search.top_k=1", RUNGS,
                             "final.export=false")  # no torch.export per setting: mf_run exports
    result = api.compare(recipe, fractions=(0.05,), progress=False, echo=None, multifidelity=True)
    assert [r["setting"] for r in result.table] == ["sub-one-shot-0.05", "multifidelity"]
    assert result.table[1]["fitness"] == "proxy > oneshot > short"
    for row in result.table:
        assert row["fte"] == result.runs[row["setting"]].metrics["compute"]["fte"]["total"] > 1  # top-1 + search
    assert "| FTE |" in (result.output_dir / "compare.md").read_text()


def test_ctr_ladder_scored_in_worker_processes_equals_serial(mf_run, tests_data):
    """The ladder (proxy, one-shot and short-training fitnesses) ships to spawned scoring workers and gives
    the serial run's history, short trainings included."""
    from ctrnas.pipeline.stages import search_stage

    recipe, result = mf_run
    parallel = search_stage(dataclasses.replace(recipe, search=dataclasses.replace(recipe.search, workers=2)),
                            tests_data, result.warmup, progress=False)
    assert parallel.history.same_as(result.search.history)
