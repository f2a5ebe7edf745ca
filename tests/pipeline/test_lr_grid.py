"""final.lr_grid: every rate trains to the first val evaluation, the best there continues, and the result is
the training at that rate from scratch, step for step."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ctrnas.pipeline.fitness.scratch import job_model, train_as_final
from ctrnas.recipe import load_recipe


def _recipe(tests_recipe_path, data_dir, grid):
    return load_recipe(tests_recipe_path, [f"data.path={data_dir}", "final.train={epochs: 3}", "final.protocol=early-stop",
                                           f"final.lr_grid={grid}"])


def test_the_rate_best_at_the_first_evaluation_continues_as_a_training_from_scratch(tests_data, tests_recipe_path,
                                                                                   data_dir, tmp_path):
    grid = [0.001, 1.0, 8.0]
    recipe = _recipe(tests_recipe_path, data_dir, grid)
    model = job_model(recipe, tests_data, None, ("baseline", "lr"))
    val, test, _, trainer = train_as_final(model, recipe, tests_data, tmp_path / "grid")
    choice = json.loads((tmp_path / "grid" / "lr_choice.json").read_text())
    losses = {t["multiple"]: t["val_logloss"] for t in choice["tried"]}
    assert set(losses) == set(grid) and choice["chosen"] == min(losses, key=losses.get)
    assert choice["chosen"] != 0.001  # a hundredth of the rate learns nothing in one epoch
    # the same model trained at the chosen rate alone, from scratch: the same numbers
    alone = _recipe(tests_recipe_path, data_dir, [1.0])
    cfg = dataclasses.replace(alone.final_train, lr=alone.final_train.lr * choice["chosen"])
    alone = dataclasses.replace(alone, final=dataclasses.replace(alone.final, train=cfg))
    ref_model = job_model(alone, tests_data, None, ("baseline", "lr"))
    rval, rtest, _, ref = train_as_final(ref_model, alone, tests_data, None)
    assert trainer.cfg.lr == pytest.approx(ref.cfg.lr)
    assert [h["logloss"] for h in trainer.history] == pytest.approx([h["logloss"] for h in ref.history], abs=1e-7)
    assert test["logloss"] == pytest.approx(rtest["logloss"], abs=1e-7) and val["steps"] == rval["steps"]
