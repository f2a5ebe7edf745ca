"""Shared fixtures: the test-sized demo recipe and its synthetic dataset, generated once per session."""

from pathlib import Path

import pytest

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("data") / "synthetic-criteo-20k"


@pytest.fixture(scope="session")
def tests_recipe_path() -> Path:
    return RECIPES / "synthetic-tests.yaml"


@pytest.fixture(scope="session")
def tests_data(data_dir, tests_recipe_path):
    """The test recipe's prepared data (20k synthetic Criteo-shaped rows with a known click model)."""
    from ctrnas.pipeline.data import prepare_data
    from ctrnas.recipe import load_recipe

    recipe = load_recipe(tests_recipe_path, [f"data.path={data_dir}"])
    return prepare_data(recipe)
