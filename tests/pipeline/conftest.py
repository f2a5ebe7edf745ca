"""Shared fixtures: the test-sized demo recipe and its synthetic dataset, generated once per session."""

from pathlib import Path

import pytest

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


@pytest.fixture(scope="session")
def data_dir(tests_data) -> Path:
    return tests_data.path


@pytest.fixture(scope="session")
def tests_recipe_path() -> Path:
    return RECIPES / "synthetic-tests.yaml"


@pytest.fixture(scope="session")
def tests_data(tests_recipe_path, tmp_path_factory, once):
    """The test recipe's prepared data (20k synthetic Criteo-shaped rows with a known click model), generated
    once for the whole test run and read by every worker."""
    from ctrnas.pipeline.data import prepare_data
    from ctrnas.recipe import load_recipe

    def prepare(folder: Path):
        return prepare_data(load_recipe(tests_recipe_path, [f"data.path={folder}"]))

    return prepare(once(tmp_path_factory, "synthetic-criteo-20k", prepare))  # the second call reads the folder


@pytest.fixture(scope="module")
def fitness_setup(tests_data, tests_recipe_path, data_dir):
    """(recipe, a seeded fresh supernet, 3 archs sampled with seeds 0-2) of the test recipe's space."""
    import numpy as np
    import torch

    from ctrnas.recipe import load_recipe
    from ctrnas.space import get_space
    from ctrnas.supernet import Supernet

    recipe = load_recipe(tests_recipe_path, [f"data.path={data_dir}"])
    torch.manual_seed(0)
    supernet = Supernet(tests_data.schema, recipe.space)
    archs = [get_space(recipe.space).sample(np.random.default_rng(i)) for i in range(3)]
    return recipe, supernet, archs
