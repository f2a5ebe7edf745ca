"""`final.baselines: [lr, lr*8]`: a baseline at a multiple of the run's learning rate (LR's one-wide tables want a
far larger step than the deep models' tables), in the serial final stage and on training workers alike, and
the run's "gap closed" reads the LR training best on validation."""

import dataclasses

import pytest

from ctrnas import api
from ctrnas.errors import RecipeError
from ctrnas.pipeline.fitness.scratch import job_recipe, train_as_final
from ctrnas.train.baseline_names import BASELINE_NAMES, split_lr_scale
from ctrnas.train.baselines import BASELINES, build_baseline


def test_the_names_a_recipe_checks_are_the_baselines_that_exist():
    assert BASELINE_NAMES == tuple(BASELINES)
    assert split_lr_scale("lr*8") == ("lr", 8.0) and split_lr_scale("dlrm") == ("dlrm", 1.0)
    assert split_lr_scale("fm*0.5") == ("fm", 0.5)


@pytest.mark.parametrize("spec, match", [("lr*0", "positive number"), ("lr*x", "positive number"),
                                         ("lr*inf", "positive number"), ("logreg", "unknown baseline 'logreg'"),
                                         ("LR*8", "listed twice")])
def test_bad_baseline_names_stop_the_recipe_before_anything_runs(tests_recipe_path, data_dir, spec, match):
    with pytest.raises(RecipeError, match=rf"final.baselines\[1\].*{match}"):
        api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"final.baselines=[lr*8, {spec}]")


def test_a_job_trains_at_its_multiple_of_the_final_learning_rate(tests_recipe_path, data_dir):
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}")
    lr = recipe.final_train.lr
    assert job_recipe(recipe, ("baseline", "lr*8")).final_train.lr == pytest.approx(8 * lr)
    assert job_recipe(recipe, ("baseline", "lr*2.5@32")).final_train.lr == pytest.approx(2.5 * lr)
    assert job_recipe(recipe, ("baseline", "lr")) is recipe
    assert job_recipe(recipe, ("arch", None)) is recipe
    other = job_recipe(recipe, ("baseline", "lr*8"))
    assert dataclasses.replace(other.final_train, lr=lr) == recipe.final_train  # nothing else changes


@pytest.fixture(scope="module")
def lr_run(tests_recipe_path, data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("lr") / "run"
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={out}",
                             "final.baselines=[lr, lr*8]", "search.evolution.generations=1",
                             "final.export=false")  # its tests read the baselines' numbers, not the model
    return recipe, api.run(recipe, progress=False, echo=None)


def test_the_run_trains_lr_at_both_rates_and_reads_the_one_best_on_validation(lr_run, tests_data):
    recipe, run = lr_run
    rows = {b["label"]: b for b in run.metrics["baselines"]}
    assert list(rows) == ["lr", "lr*8"]
    # "lr*8" is LR trained at 8x the final learning rate, as a training of its own would give
    cfg = recipe.final_train
    model = build_baseline("lr", tests_data.schema, dim=cfg.embedding_dim, row_cap=cfg.row_cap, seed=cfg.seed)
    faster = dataclasses.replace(recipe, final=dataclasses.replace(
        recipe.final, train=dataclasses.replace(cfg, lr=8 * cfg.lr)))
    val, test, _, _ = train_as_final(model, faster, tests_data)
    assert rows["lr*8"]["val_logloss"] == pytest.approx(val["logloss"], rel=1e-6)
    assert rows["lr*8"]["test_logloss"] == pytest.approx(test["logloss"], rel=1e-6)
    assert rows["lr*8"]["val_logloss"] != pytest.approx(rows["lr"]["val_logloss"], rel=1e-4)
    ref = min(rows.values(), key=lambda b: b["val_logloss"])
    assert run.metrics["gap_closed_lr"] == ref["label"]
    bayes, found = run.metrics["bayes_test_logloss"], run.metrics["best"]["test_logloss"]
    assert run.metrics["gap_closed_vs_lr"] == pytest.approx((ref["test_logloss"] - found) /
                                                            (ref["test_logloss"] - bayes))


def test_a_training_worker_trains_the_same_lr_job(lr_run, tests_data):
    from ctrnas.pipeline.final.stage import quiet_recipe
    from ctrnas.pipeline.final.workers import train_job
    from ctrnas.pipeline.fitness.scratch import final_template

    recipe, run = lr_run
    quiet = quiet_recipe(recipe)
    r = train_job((quiet, tests_data, final_template(quiet, tests_data, None)), (("baseline", "lr*8"), False, "x"))
    row = next(b for b in run.metrics["baselines"] if b["label"] == "lr*8")
    assert r["val"]["logloss"] == pytest.approx(row["val_logloss"], rel=1e-6)
