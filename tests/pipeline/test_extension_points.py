"""Extension points of docs/architecture.md: a proxy declared in one file (here, this test) is scored by
the same path as the built-in ones, options checked, without touching any other module."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
import yaml

from ctrnas import api
from ctrnas.config import to_dict
from ctrnas.errors import RecipeError
from ctrnas.proxies import base
from ctrnas.recipe import load_recipe
from ctrnas.space import get_space


@pytest.fixture
def toy_proxy(monkeypatch):
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # registered for this test only

    @base.register("toy_dense_params")
    @dataclass(frozen=True)
    class ToyDenseParams(base.Proxy):
        """scale x the number of dense-part parameters of the scored model."""

        needs_labels = False
        scale: float = 1.0

        def _compute(self, model, batches, loss_fn):
            n = sum(p.numel() for p in model.net.parameters())
            return self.scale * n, {"n": float(n)}, {}

    return "toy_dense_params"


def test_a_proxy_added_in_one_file_is_scored_like_the_built_in_ones(toy_proxy, tests_data, tests_recipe_path,
                                                                     tmp_path):
    recipe = load_recipe(tests_recipe_path)
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(to_dict(recipe.space)))
    arch = get_space(recipe.space).sample(np.random.default_rng(3))
    (tmp_path / "arch.json").write_text(json.dumps(arch.to_json()))
    assert toy_proxy in api.list_proxies()
    scores = api.score_arch(tests_data.path, tmp_path / "arch.json", [toy_proxy, "params"],
                            {toy_proxy: {"scale": 2.0}, "params": {"embeddings": False}},
                            space=str(tmp_path / "space.yaml"), batches=1, batch_size=64)
    assert scores[toy_proxy].value == 2 * scores["params"].value > 0
    assert scores[toy_proxy].meta["options"] == {"scale": 2.0}
    with pytest.raises(RecipeError, match="unknown option"):
        api.score_arch(tests_data.path, tmp_path / "arch.json", [toy_proxy], {toy_proxy: {"scael": 2.0}})
