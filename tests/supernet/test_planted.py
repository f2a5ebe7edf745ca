"""Planted structures: the logit is an exported arch of the search space, the one `ctrnas train --arch` trains;
seeded; its CTR set; its Bayes optimum the mean entropy of p; far from every shipped arch."""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from ctrnas.data.dataset import SPLITS, split_files
from ctrnas.data.synthetic import _settings_record, build, generate, make_settings, structure_overrides
from ctrnas.errors import CtrnasError, RecipeError
from ctrnas.recipe import load_recipe
from ctrnas.space import Arch, get_space
from ctrnas.supernet.planted import (DEEP_PATH, MIN_EDITS, PlantedClick, dot_chain, dot_reads_efc, draw_arch,
                                     longest_path, shipped_edits)

ROOT = Path(__file__).resolve().parents[2]
FAST = dict(chunk_rows=4096, calibration_rows=8192, cardinality_cap=2000)
ROWS = 6_000


def _gen(out, structure="planted:0", seed=5):
    return generate("kdd2012", ROWS, seed=seed, out=out, structure=structure, planted=PlantedClick, **FAST)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("planted")
    return d, _gen(d)


def _rows(d) -> pa.Table:
    return pa.concat_tables([pq.read_table(split_files(d, s)) for s in SPLITS])


def test_the_stored_logit_is_the_trained_archs_module_with_the_planted_weights(folder):
    """An independent path: the module `ctrnas train --arch` builds for the recorded arch (the final stage's
    template, LayerNorm by degree, as the recipe trains it) takes the plant's weights strictly and gives, on the
    stored features, the logit of the stored p_true."""
    from ctrnas.pipeline.data import open_data
    from ctrnas.pipeline.tasks.train import arch_model, final_recipe
    from ctrnas.train.batches import make_batch

    d, meta = folder
    arch_file = d.parent / "plant.json"
    arch_file.write_text(Arch.from_json(meta["click_model"]["planted"]["arch"]).dumps())
    data = open_data(d)
    recipe = load_recipe(ROOT / "recipes/synthetic-prefix.yaml")
    final = final_recipe(d, recipe.final_train, recipe)
    trained, _, extra = arch_model(arch_file, data, final, "planted")
    assert extra["layernorm"] is True  # the plant's Dot-Products: LayerNorm on by degree, as the plant has it
    settings = make_settings(**{**meta["settings"], "split": tuple(meta["settings"]["split"])})
    _, click = build("kdd2012", 5, settings, PlantedClick)
    trained.load_state_dict(click.model.state_dict(), strict=True)
    t = _rows(d)
    names = list(data.schema.sparse_names)
    ids = torch.as_tensor(np.stack([t.column(n).to_numpy() for n in names], 1))
    dense = torch.as_tensor(np.stack([t.column(n).to_numpy() for n in data.schema.dense], 1))
    b = make_batch(dense, ids, torch.zeros(len(ids)), names)
    with torch.no_grad():
        out = trained.eval()(b.dense_features, b.sparse_features).double().numpy()
    p = t.column("p_true").to_numpy()
    assert np.allclose(out, np.log(p) - np.log1p(-p), atol=1e-4)
    assert out.std() == pytest.approx(settings.planted_sd, rel=0.1)  # calibrated on other rows of the profile


def test_click_rate_and_bayes_optimum(folder):
    d, meta = folder
    for s in SPLITS:
        q = pq.read_table(split_files(d, s)).column("p_true").to_numpy()
        y = pq.read_table(split_files(d, s)).column("label").to_numpy()
        h = -(q * np.log(q) + (1 - q) * np.log1p(-q)).mean()
        assert meta["bayes_logloss"][s] == pytest.approx(h, rel=1e-9)
        assert 0.2 <= y.mean() <= 0.3 and meta["splits"][s]["ctr"] == pytest.approx(y.mean())
    p = _rows(d).column("p_true").to_numpy()
    assert p.mean() == pytest.approx(0.25, abs=0.02)  # the CTR it is solved for, on other rows
    assert meta["click_model"]["variance_share"]["planted"] == pytest.approx(1.0)


def test_same_seed_same_plant_weights_and_labels_another_seed_another(folder, tmp_path):
    d, meta = folder
    again = _gen(tmp_path / "a")
    assert again["click_model"]["planted"] == meta["click_model"]["planted"]
    assert _rows(tmp_path / "a").equals(_rows(d))
    other = _gen(tmp_path / "b", structure="planted:1")
    assert other["click_model"]["planted"]["arch_key"] != meta["click_model"]["planted"]["arch_key"]
    assert not np.array_equal(_rows(tmp_path / "b").column("label").to_numpy(), _rows(d).column("label").to_numpy())
    s = make_settings(**{**structure_overrides("planted:0"), **FAST})
    one, two = build("kdd2012", 5, s, PlantedClick)[1], build("kdd2012", 5, s, PlantedClick)[1]
    w1, w2 = one.model.state_dict(), two.model.state_dict()
    assert w1.keys() == w2.keys() and all(torch.equal(w1[k], w2[k]) for k in w1)


@pytest.mark.parametrize("depth,width", [("shallow", 0), ("deep", 0), ("shallow", 16), ("deep", 16)])
def test_plants_are_far_from_every_hand_design_and_in_the_suites_space(depth, width):
    space = get_space(load_recipe(ROOT / "recipes/synthetic-prefix.yaml").space)
    keys = set()
    for seed in range(3):
        arch = draw_arch(depth, seed, width)
        if width:  # a narrow plant: every live block at that width and the space's fewest tokens
            assert {(arch.blocks[i - 1].dense_dim, arch.blocks[i - 1].sparse_tokens) for i in arch.live_parts()} \
                == {(width, 16)}
        space.validate(arch)  # the search of the suite can find it
        assert min(shipped_edits(arch).values()) >= MIN_EDITS
        assert dot_reads_efc(arch)
        live_ops = {arch.blocks[i - 1].dense_op for i, p in arch.live_parts().items() if p.dense}
        assert live_ops <= {"fc", "dot"}  # no cross, interaction or concat of the hand designs
        if depth == "deep":
            assert dot_chain(arch) and longest_path(arch) >= DEEP_PATH
        keys.add(arch.key())
    assert len(keys) == 3


def test_the_data_layer_needs_the_factory_and_names_are_checked(tmp_path):
    with pytest.raises(CtrnasError, match="planted structure's click model is a network"):
        generate("kdd2012", 100, seed=0, out=tmp_path / "x", structure="planted:0", **FAST)
    with pytest.raises(CtrnasError, match="planted:SEED"):
        structure_overrides("planted:x")
    assert structure_overrides("planted-deep:7")["planted"] == "deep"
    with pytest.raises(CtrnasError, match="planted_width 20 is not a width of the space"):
        draw_arch("shallow", 0, 20)
    with pytest.raises(RecipeError, match="planted_width"):
        make_settings(planted_width=-1)
    # meta.json's settings: the planted keys only for a planted structure, so other structures' records stay
    assert not [k for k in _settings_record(make_settings()) if k.startswith("planted")]
    assert _settings_record(make_settings(**structure_overrides("planted:0")))["planted_width"] == 0
    recipe = load_recipe(ROOT / "recipes/synthetic.yaml", ["data.synthetic.structure=planted-deep:3"])
    assert recipe.data.synthetic.structure == "planted-deep:3"
    with pytest.raises(RecipeError, match="planted-deep:SEED"):
        load_recipe(ROOT / "recipes/synthetic.yaml", ["data.synthetic.structure=planted:-1"])
