"""Fused embedding updates, the default: a rung that grafts Adagrad sums by name trains sparse unless the
recipe names fused itself, which it refuses in one line."""

from __future__ import annotations

import pytest

from ctrnas.errors import RecipeError
from ctrnas.pipeline.fitness.inherit import InheritedTrainingFitness
from ctrnas.recipe import dump_recipe, load_recipe, recipe_from_dict

DATA = {"data": {"path": "runs/data/x"}}
INHERIT = {"search": {"strategy": "multifidelity",
                      "multifidelity": {"rungs": [{"fitness": "inherit", "fraction": 0.4, "extra": 0.1}]}}}


def test_an_inherit_rung_refuses_fused_tables_naming_the_key(tests_recipe_path, data_dir, tmp_path):
    recipe = load_recipe(tests_recipe_path, [f"data.path={data_dir}", "train.embedding_update=fused"])
    with pytest.raises(RecipeError, match="train.embedding_update.*embedding_update: sparse"):
        InheritedTrainingFitness(recipe, None, None, 100, tmp_path, 10)
    sparse = load_recipe(tests_recipe_path, [f"data.path={data_dir}"])
    assert sparse.final_train.embedding_update == "sparse"  # the tests recipe's own, which inherit rungs take


def test_tables_are_fused_by_default_and_sparse_where_an_inherit_rung_grafts_their_sums(tmp_path):
    plain = recipe_from_dict({"name": "plain", **DATA})
    assert plain.train.embedding_update == plain.final_train.embedding_update == "fused"
    inherit = recipe_from_dict({"name": "inh", **DATA, **INHERIT})
    assert inherit.train.embedding_update == inherit.final_train.embedding_update == "sparse"
    # the final stage's own section follows, and the written recipe loads back the same
    staged = recipe_from_dict({"name": "inh", **DATA, **INHERIT, "final": {"train": {"lr": 0.05}}})
    assert staged.final_train.embedding_update == "sparse" and staged.final_train.lr == 0.05
    path = tmp_path / "recipe.yaml"
    path.write_text(dump_recipe(staged))
    assert load_recipe(path) == staged
    # named in either section, the user's choice stands (and fused is then refused by the rung)
    for where in ({"train": {"embedding_update": "fused"}}, {"final": {"train": {"embedding_update": "fused"}}}):
        named = recipe_from_dict({"name": "inh", **DATA, **INHERIT, **where})
        assert named.final_train.embedding_update == "fused"
        with pytest.raises(RecipeError, match="embedding_update"):
            InheritedTrainingFitness(named, None, None, 100, tmp_path, 10)
