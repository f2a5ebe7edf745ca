"""Compute accounting (FTE): what a sample of each kind of scoring costs, by hand-computed cases."""

from types import SimpleNamespace

from ctrnas.pipeline.budget import fte_by_stage, search_samples
from ctrnas.recipe import load_recipe


def _record(budget=None, cached=False, rung=0):
    return SimpleNamespace(budget=budget, cached=cached, rung=rung)


def test_a_one_shot_fine_tuning_sample_is_a_third_of_a_training_sample(tests_recipe_path):
    # the test recipe: oneshot 5 fine-tuning steps of 256 rows; proxy 2 batches of 256 (train.batch_size)
    recipe = load_recipe(tests_recipe_path)
    history = [_record(), _record(), _record(cached=True), _record(budget=9)]
    # forward only through the frozen body: (5 + 5 + 9) steps x 256 rows / 3 = 1621.33; the cached one is free
    assert search_samples(recipe, None, history, "oneshot") == 1621
    # a proxy back-propagates through the whole model: full samples, (2 + 2 + 9) batches x 256 rows
    assert search_samples(recipe, None, history, "proxy") == 3328


def test_fte_of_a_one_shot_search_divides_its_sample_equivalents_by_the_final_training(tests_recipe_path,
                                                                                     tests_data, data_dir):
    recipe = load_recipe(tests_recipe_path, [f"data.path={data_dir}"])
    search = SimpleNamespace(history=[_record(budget=30)] * 4, fitness="oneshot")
    report = fte_by_stage(recipe, tests_data, SimpleNamespace(rows=1000), search, None)
    unit = 2048 * 2  # final.train_rows x final.train.epochs of the test recipe
    assert report["unit_samples"] == unit
    assert report["samples"] == {"warmup": 1000, "search": 4 * 30 * 256 // 3}  # 10240 exactly
    assert report["fte"]["search"] == 10240 / unit and report["fte"]["total"] == (1000 + 10240) / unit
