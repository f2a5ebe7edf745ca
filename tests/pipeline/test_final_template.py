"""The final stage's models: NASRec trains stand-alone models without LayerNorm (final.layernorm)."""

from pathlib import Path

import numpy as np
import torch
from torch import nn

from ctrnas.pipeline.fitness.scratch import final_template
from ctrnas.pipeline.results import DataResult
from ctrnas.recipe import recipe_from_dict
from ctrnas.supernet import Supernet, export
from ctrnas.supernet.testing import make_schema

SPACE = {"base": "nasrec-small", "num_blocks": 2, "dense_dims": [8, 16], "sparse_tokens": [4]}


def _setup(final: dict):
    recipe = recipe_from_dict({"name": "t", "data": {"path": "x"}, "space": SPACE, "final": final})
    schema = make_schema()
    data = DataResult(Path("x"), schema, {})
    torch.manual_seed(0)
    return recipe, data, Supernet(schema, recipe.space)


def _layernorms(model: nn.Module) -> int:
    return sum(isinstance(m, nn.LayerNorm) for m in model.modules())


def test_layernorm_false_final_models_have_no_layernorm_and_the_same_arch():
    recipe, data, supernet = _setup({"layernorm": False})
    assert recipe.final.layernorm is False and supernet.space.config.layernorm is True
    template = final_template(recipe, data, supernet)
    assert template is not supernet and template.space.config.layernorm is False
    arch = supernet.space.sample(np.random.default_rng(3))
    with_ln, without = export(supernet, arch, init="fresh"), export(template, arch, init="fresh")
    assert _layernorms(with_ln) > 0 and _layernorms(without) == 0
    n_ln = sum(m.weight.numel() + m.bias.numel() for m in with_ln.modules() if isinstance(m, nn.LayerNorm))
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(with_ln) - count(without) == n_ln


def test_null_keeps_the_search_supernet():
    recipe, data, supernet = _setup({"layernorm": None})
    assert final_template(recipe, data, supernet) is supernet
    recipe, data, supernet = _setup({"layernorm": True})
    assert final_template(recipe, data, supernet) is supernet


def _final_model(final: dict, **inits):
    """The final stage's fresh model of one sampled arch, after checking it equals `export` with `inits`."""
    from ctrnas.pipeline.fitness.scratch import job_model

    recipe, data, supernet = _setup({"layernorm": False, **final})
    template = final_template(recipe, data, supernet)
    arch = supernet.space.sample(np.random.default_rng(3))
    got = job_model(recipe, data, template, ("arch", arch))
    want = export(template, arch, init="fresh", seed=recipe.final_train.seed, **inits)
    assert all(torch.equal(a, b) for a, b in zip(got.state_dict().values(), want.state_dict().values()))
    return recipe, got


def test_final_models_draw_tables_as_final_embedding_init_says():
    for init in ("torchrec", "nasrec"):
        recipe, _ = _final_model({"embedding_init": init} if init == "nasrec" else {}, embedding_init=init,
                                 dense_init="torchrec")
        assert recipe.final.embedding_init == init  # torchrec is the default


def test_final_models_draw_dense_weights_as_final_dense_init_says():
    """nasrec: Xavier linears with zero bias; torchrec: nn.Linear's default, biases within +-1/sqrt(fan_in)."""
    for init in ("nasrec", "torchrec"):
        recipe, got = _final_model({"dense_init": init} if init == "nasrec" else {}, embedding_init="torchrec",
                                   dense_init=init)
        assert recipe.final.dense_init == init  # torchrec is the default
        linears = [m for m in got.modules() if isinstance(m, nn.Linear) and m.bias is not None]
        assert linears
        for m in linears:
            bound = 1 / m.in_features ** 0.5
            if init == "nasrec":
                assert not m.bias.any()
                assert m.weight.abs().max() <= (6 / (m.in_features + m.out_features)) ** 0.5
            else:
                assert m.bias.abs().max() <= bound and m.bias.any()
                assert m.weight.abs().max() <= bound  # kaiming-uniform with a = sqrt(5): bound 1/sqrt(fan_in)


def test_default_auto_gives_layernorm_to_models_with_products_only():
    from ctrnas.pipeline.fitness.scratch import job_model
    from ctrnas.train.normalise import product_degree
    from tests.helpers.chains import chain_arch

    recipe, data, supernet = _setup({})
    assert recipe.final.layernorm == "auto"
    template = final_template(recipe, data, supernet)
    assert template[True] is supernet and template[False].space.config.layernorm is False
    assert template[False].stem is supernet.stem  # one set of tables for both shapes
    plain, products = chain_arch("fc", 2, dense_dim=16, fm=False), chain_arch("dot", 2, dense_dim=16, fm=False)
    assert product_degree(plain) == 1 and product_degree(products) == 4
    for arch, ln in ((plain, False), (products, True)):
        got = job_model(recipe, data, template, ("arch", arch))
        assert (_layernorms(got) > 0) is ln and got.space_config.layernorm is ln
        want = export(template[ln], arch, init="fresh", seed=recipe.final_train.seed, embedding_init="torchrec",
                      dense_init="torchrec")
        assert all(torch.equal(a, b) for a, b in zip(got.state_dict().values(), want.state_dict().values()))
