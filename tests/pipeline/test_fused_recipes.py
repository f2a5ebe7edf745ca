"""Recipes with `embedding_update: fused`: a rung that grafts Adagrad sums by name refuses it in one line."""

from __future__ import annotations

import pytest

from ctrnas.errors import RecipeError
from ctrnas.pipeline.fitness.inherit import InheritedTrainingFitness
from ctrnas.recipe import load_recipe


def test_an_inherit_rung_refuses_fused_tables_naming_the_key(tests_recipe_path, data_dir, tmp_path):
    recipe = load_recipe(tests_recipe_path, [f"data.path={data_dir}", "train.embedding_update=fused"])
    with pytest.raises(RecipeError, match="train.embedding_update.*embedding_update: sparse"):
        InheritedTrainingFitness(recipe, None, None, 100, tmp_path, 10)
    sparse = load_recipe(tests_recipe_path, [f"data.path={data_dir}"])
    assert sparse.final_train.embedding_update == "sparse"  # the tests recipe's own, which inherit rungs take
