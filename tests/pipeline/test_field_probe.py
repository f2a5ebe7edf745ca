"""The field probe: permutation importance of each sparse field, and the seeds it adds to an
embedding search with the fields that show no signal dropped."""

import dataclasses
import types

import numpy as np
import pytest
import torch
from sklearn.metrics import log_loss

from ctrnas.pipeline.fitness.fields import permutation_importance, without_noise
from ctrnas.space import SearchSpace, get_space
from ctrnas.space.baselines import initial_population
from ctrnas.train.batches import TensorRows
from ctrnas.train.trainer import default_forward


class OnlyA(torch.nn.Module):
    """logit = table[id of field A]; field B is read by nothing."""

    def __init__(self, table):
        super().__init__()
        self.table = torch.nn.Parameter(torch.as_tensor(table, dtype=torch.float32))

    def forward(self, dense, kjt):
        return self.table[kjt["A"].values()]


def test_permutation_importance_is_the_hand_computed_rise():
    rng = np.random.default_rng(0)
    n = 500
    ids = torch.as_tensor(rng.integers(0, 10, size=(n, 2)))
    table = rng.normal(0, 2, size=10)
    labels = torch.as_tensor((rng.random(n) < 1 / (1 + np.exp(-table[ids[:, 0].numpy()]))).astype(np.float32))
    rows = TensorRows(torch.zeros(n, 1), ids, labels, ("A", "B"))
    trainer = types.SimpleNamespace(model=OnlyA(table), device=torch.device("cpu"), eval_forward=default_forward)
    got = {r["field"]: r for r in permutation_importance(trainer, rows, ["A", "B"], batch_size=64, seed=3)}

    perm = torch.randperm(n, generator=torch.Generator().manual_seed(3)).numpy()
    y, a = labels.numpy(), ids[:, 0].numpy()
    p = lambda logit: 1 / (1 + np.exp(-logit))  # noqa: E731
    want = log_loss(y, p(table[a[perm]]), labels=[0, 1]) - log_loss(y, p(table[a]), labels=[0, 1])
    assert got["A"]["rise"] == pytest.approx(want, rel=1e-4) and want > 0.05
    assert got["A"]["z"] > 5
    # shuffling a field the model never reads changes no example's loss
    assert got["B"]["rise"] == 0 and got["B"]["se"] == 0 and got["B"]["z"] == 0


def _space():
    config = dataclasses.replace(get_space("ctrnas-small").config, table_dims=(0, 4, 8, 16))
    return SearchSpace(config).for_fields(["A", "B", "C"], 16)


def test_seeds_lose_exactly_the_quiet_fields():
    space = _space()
    seeds = tuple(initial_population(space))
    assert seeds
    record = {"fields": [{"field": "A", "z": 9.0, "signal": True}, {"field": "B", "z": 0.3, "signal": False},
                         {"field": "C", "z": -1.0, "signal": False}]}
    out = without_noise(space, seeds, record)
    assert len(out) == len(seeds)
    for seed, arch in zip(seeds, out):
        assert [arch.table_width(n, 16) for n in "ABC"] == [16, 0, 0]
        assert arch.blocks == seed.blocks  # only the tables changed
    # every field quiet: the one closest to signal keeps its table
    quiet = {"fields": [{**r, "signal": False} for r in record["fields"]]}
    assert [without_noise(space, seeds, quiet)[0].table_width(n, 16) for n in "ABC"] == [16, 0, 0]
    # every field with signal: no new seed
    loud = {"fields": [{**r, "signal": True} for r in record["fields"]]}
    assert without_noise(space, seeds, loud) == ()
    # a probe whose training learnt no table (no shuffle mattered) drops nothing
    assert without_noise(space, seeds, {**record, "learnt": False}) == ()


def test_probe_of_a_run_follows_its_rule_and_is_reused(tests_recipe_path, data_dir, tests_data, tmp_path,
                                                       monkeypatch):
    from ctrnas.pipeline.data import split_rows
    from ctrnas.pipeline.fitness import fields, rungs
    from ctrnas.pipeline.fitness.scratch import final_template
    from ctrnas.recipe import load_recipe

    settings = [f"data.path={data_dir}", "space.table_dims=[0, 8, 16]", "search.field_probe.fraction=0.25",
                "search.field_probe.min_share=0.01"]
    recipe = load_recipe(tests_recipe_path, [*settings, "search.field_probe.val_rows=1500"])
    space = recipe.search_space(tests_data.schema)
    seed = space.at_table_width(space.sample(np.random.default_rng(0)), 16)  # every table at the common width
    template = final_template(recipe, tests_data, None)
    record = fields.probe_fields(recipe, tests_data, template, seed, space.config.tables, tmp_path)
    assert record["val_rows"] == 1500 and record["train_rows"] == round(0.25 * split_rows(tests_data, "train"))
    rows = record["fields"]
    assert [r["field"] for r in rows] == list(space.config.tables)
    assert record["min_rise"] == pytest.approx(0.01 * max(r["rise"] for r in rows))
    assert record["learnt"] == (max(r["rise"] for r in rows) >= 1e-4)
    assert [r["signal"] for r in rows] == [r["z"] > 2 and r["rise"] >= record["min_rise"] for r in rows]
    assert any(r["signal"] for r in rows)  # the test data's click model reads its fields

    def no_training(*a, **k):
        raise AssertionError("the saved probe should have been reused")

    monkeypatch.setattr(rungs, "short_trainer", no_training)
    assert fields.probe_fields(recipe, tests_data, template, seed, space.config.tables, tmp_path) == record
    other = load_recipe(tests_recipe_path, [*settings, "search.field_probe.val_rows=1000"])
    with pytest.raises(AssertionError, match="reused"):  # other settings: probed again
        fields.probe_fields(other, tests_data, template, seed, space.config.tables, tmp_path)


def test_the_summary_and_metrics_carry_the_probe():
    from ctrnas.pipeline.report import search_lines

    record = {"train_rows": 300, "val_rows": 200, "z": 2.0, "min_rise": 0.0, "top_rise": 0.01, "learnt": True,
              "settings": {"min_rise": 1e-4},
              "fields": [{"field": "A", "signal": True, "z": 9.0}, {"field": "N1", "signal": False, "z": 0.1}]}
    lines = search_lines({"field_probe": record})
    assert lines == ["- field probe (300 training rows, 200 val rows; signal: a shuffle raises the log loss by > 2 "
                     "se and >= 0): 1 of 2 fields show none: N1"]
    quiet = search_lines({"field_probe": {**record, "learnt": False, "top_rise": 2e-7}})
    assert "has not learnt the tables, no field is dropped" in quiet[0] and "2e-07" in quiet[0]


def test_the_probe_is_reported_before_the_search_starts(tests_recipe_path, data_dir, tests_data, monkeypatch):
    from types import SimpleNamespace

    from ctrnas.pipeline import stages
    from ctrnas.pipeline.fitness import fields, scratch
    from ctrnas.recipe import load_recipe
    from ctrnas.space import baselines

    recipe = load_recipe(tests_recipe_path, [f"data.path={data_dir}", "space.table_dims=[0, 8, 16]",
                                             "search.field_probe.fraction=0.25"])
    record = {"fields": [{"field": n, "signal": True, "z": 3.0} for n in tests_data.schema.sparse_names]}
    space = recipe.search_space(tests_data.schema)
    seed = space.at_table_width(space.sample(np.random.default_rng(0)), 16)  # the tests' space holds no shipped arch
    monkeypatch.setattr(baselines, "initial_population", lambda *a, **k: [seed])
    monkeypatch.setattr(scratch, "final_template", lambda *a, **k: None)
    monkeypatch.setattr(fields, "probe_fields", lambda *a, **k: record)

    def search_starts(*a, **k):
        raise RuntimeError("the search started")

    monkeypatch.setattr(stages, "resource_counters", search_starts)
    seen = []
    with pytest.raises(RuntimeError, match="the search started"):
        stages.search_stage(recipe, tests_data, SimpleNamespace(supernet=None), None, progress=False,
                            on_probe=seen.append)
    assert seen == [record]


def test_narrower_seed_copies_only_for_the_front(tests_recipe_path):
    from ctrnas import api
    from ctrnas.pipeline.stages import initial_archs

    space = _space()
    seeds = tuple(initial_population(space, ("dlrm-like", "dcnv2-like")))
    assert len(seeds) == 2
    for objective, want in (("value", seeds), ("front", seeds + tuple(space.narrower(a, w) for w in (8, 4)
                                                                           for a in seeds))):
        recipe = api.load_recipe(tests_recipe_path, "search.seeds=[dlrm-like, dcnv2-like]",
                                 f"search.evolution.objective={objective}", "search.field_probe.fraction=0")
        initial, probe = initial_archs(recipe, space, data=None, warm=None)
        assert initial == want and probe is None
    # the copies are the seeds' blocks at every narrower table width, all tables alike
    assert {tuple(a.table_width(n, 16) for n in "ABC") for a in want[2:]} == {(8, 8, 8), (4, 4, 4)}
