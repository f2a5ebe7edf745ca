"""A run whose archs choose their embedding width (`space.emb_dims`): the short-training rungs and the final
stage train each arch at its own width, the counts follow it, and the scores that read the supernet's one
width are refused up front."""

import csv
import dataclasses

import numpy as np
import pytest

from ctrnas import api
from ctrnas.errors import RecipeError
from ctrnas.space import get_space
from ctrnas.supernet import count_params
from ctrnas.train.trainer import Trainer

WIDTHS = "space.emb_dims=[16, 32]"
SHORT = "search.multifidelity.rungs=[{fitness: short, budget: 1024, keep: 0.5}, {fitness: short, budget: 2048}]"


def _widths(model) -> set[int]:
    return {bag.weight.shape[1] for bag in model.stem.ebc.embedding_bags.values()}


def _recipe(tests_recipe_path, data_dir, *more):
    return api.load_recipe(tests_recipe_path, f"data.path={data_dir}", WIDTHS, "search.strategy=multifidelity",
                           SHORT, *more)


def _arch(recipe, width: int):
    return dataclasses.replace(get_space(recipe.space).sample(np.random.default_rng(3)), emb_dim=width)


@pytest.mark.parametrize("rungs", ["search.multifidelity.rungs=[{fitness: proxy}, {fitness: short, budget: 512}]",
                                   "search.multifidelity.rungs=[{fitness: short, budget: 512}, {fitness: oneshot}]",
                                   "search.multifidelity.rungs=[]"])
def test_a_proxy_or_oneshot_rung_with_several_widths_is_refused(tests_recipe_path, data_dir, rungs):
    with pytest.raises(RecipeError, match=r"search\.multifidelity\.rungs.*space\.emb_dims \[16, 32\]"):
        api.load_recipe(tests_recipe_path, f"data.path={data_dir}", WIDTHS, "search.strategy=multifidelity", rungs)


def test_a_supernet_fitness_with_several_widths_is_refused(tests_recipe_path, data_dir):
    for fitness in ("proxy", "oneshot"):
        with pytest.raises(RecipeError, match=f"search.strategy.*the {fitness} fitness"):
            api.load_recipe(tests_recipe_path, f"data.path={data_dir}", WIDTHS, f"fitness={fitness}")
    recipe = _recipe(tests_recipe_path, data_dir)
    with pytest.raises(RecipeError, match="search.strategy"):  # a recipe changed in code is checked too
        dataclasses.replace(recipe, search=dataclasses.replace(recipe.search, strategy="random"))


def test_the_short_rung_trains_the_arch_at_its_width(tests_recipe_path, data_dir, tests_data, monkeypatch):
    from ctrnas.pipeline.fitness.scratch import final_template, job_model, train_from_scratch
    from ctrnas.pipeline.fitness.rungs import ShortTrainingFitness

    recipe = _recipe(tests_recipe_path, data_dir, "final.train.epochs=1", "final.train.restore_best=false",
                     "final.train_rows=1024", "final.val_rows=2000")
    template = final_template(recipe, tests_data)
    shapes = list(template.values()) if isinstance(template, dict) else [template]  # final.layernorm auto
    assert {t.emb_dim for t in shapes} == {16}
    seen, init = [], Trainer.__init__

    def record(self, model, *a, **kw):
        seen.append(_widths(model))
        init(self, model, *a, **kw)

    monkeypatch.setattr(Trainer, "__init__", record)
    arch = _arch(recipe, 32)
    got = ShortTrainingFitness(recipe, tests_data, template, val_rows=2000)(arch, seed=1, budget=1024)
    assert seen == [{32}]
    model = job_model(recipe, tests_data, template, ("arch", arch))
    val, _, _ = train_from_scratch(model, recipe, tests_data, "x")
    assert got.value == pytest.approx(val["logloss"], rel=1e-6)  # the final stage's training, on fewer rows
    narrow = ShortTrainingFitness(recipe, tests_data, template, val_rows=2000)(dataclasses.replace(arch, emb_dim=16),
                                                                              seed=1, budget=1024)
    assert seen[-1] == {16} and narrow.value != got.value
    assert all(_widths(t) == {16} for t in shapes)  # the template itself is unchanged


def test_the_memory_estimate_counts_the_wider_tables(tests_recipe_path, data_dir, tests_data):
    from ctrnas.pipeline.fitness.scratch import final_template
    from ctrnas.pipeline.final.memory import job_sizes, width_bytes

    recipe = _recipe(tests_recipe_path, data_dir)
    template = final_template(recipe, tests_data)
    narrow, wide = _arch(recipe, 16), _arch(recipe, 32)
    rows = sum(tests_data.schema.cardinalities)
    a, b = job_sizes(recipe, tests_data, template, [("arch", narrow), ("arch", wide)])
    assert (a.row_width, a.table_params) == (16, 16 * rows) and (b.row_width, b.table_params) == (32, 32 * rows)
    assert width_bytes(template, [("arch", narrow)]) == 0 < width_bytes(template, [("arch", wide)])


@pytest.fixture(scope="module")
def wide_run(tests_recipe_path, data_dir, tests_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("emb") / "run"
    # no baselines: the export is then the best searched arch (a baseline may win the final stage otherwise)
    recipe = _recipe(tests_recipe_path, data_dir, f"output={out}", "space.emb_dims=[16, 32, 64]",
                     "final.baselines=[]")
    return recipe, api.run(recipe, progress=False, echo=None)


def test_a_run_searches_the_width_and_retrains_each_model_at_its_own(wide_run, tests_data):
    from ctrnas.pipeline.fitness.scratch import dense_params
    from ctrnas.supernet.io import load_exported
    from ctrnas.train.normalise import use_layernorm

    recipe, result = wide_run
    history = list(result.search.history)
    assert len({r.arch.get("emb_dim") for r in history}) >= 2  # several widths drawn and scored
    archs = [c.arch for c in result.final.candidates]
    schema, space = tests_data.schema, recipe.space
    with open(result.output_dir / "final/models.csv") as fh:
        rows = {r["label"]: r for r in csv.DictReader(fh)}

    def count(arch):  # at the LayerNorm setting the final stage trains it with (final.layernorm auto)
        norm = use_layernorm(recipe.final.layernorm, arch, space.layernorm)
        return count_params(schema, dataclasses.replace(space, layernorm=norm), arch, emb_dim=16)

    for c in result.final.candidates:
        # the trained model's dense parameters, as models.csv lists them, are the analytic count at its width
        assert float(rows[c.label]["params"]) == count(c.arch)
    exported = load_exported(result.output_dir / "model")
    width = exported.arch.emb_dim or 16
    assert _widths(exported) == {width}
    assert dense_params(exported) == count(exported.arch)
    assert any(a.emb_dim in (32, 64) for a in archs)  # seeded: this run retrains wider models too


def test_a_final_job_records_its_own_width(wide_run, tests_data, tmp_path):
    from ctrnas.pipeline.final.resume import Job, fingerprint

    recipe, _ = wide_run
    fp = fingerprint(recipe, tests_data)
    plain = get_space(recipe.space).sample(np.random.default_rng(0))
    assert Job(tmp_path, "rank 0", ("arch", dataclasses.replace(plain, emb_dim=None)), fp).spec["embedding_dim"] == 16
    wide = Job(tmp_path, "rank 0", ("arch", dataclasses.replace(plain, emb_dim=64)), fp)
    assert wide.spec["embedding_dim"] == 64 and wide.spec["what"]["emb_dim"] == 64
    assert fp["space"]["emb_dims"] == [16, 32, 64]


def test_fingerprints_without_emb_dims_read_as_before(tests_recipe_path, data_dir, tests_data):
    """Runs from before the fields existed resume: an empty `emb_dims` (and empty table choices, and the
    FM terms' choices and `branch_moves` when off) is left out of the fingerprints."""
    from ctrnas.config import to_dict
    from ctrnas.pipeline.final.resume import fingerprint
    from ctrnas.pipeline.fitness.build import warmup_fingerprint

    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}")
    later = ("emb_dims", "table_dims", "tables", "first_order", "field_fm", "branch_moves")  # fields added since
    before = {k: v for k, v in to_dict(recipe.space).items() if k not in later}
    assert fingerprint(recipe, tests_data)["space"] == before
    assert warmup_fingerprint(recipe, tests_data)["space"] == before


def test_export_writes_a_model_at_the_arch_width(wide_run, data_dir, tmp_path):
    """`ctrnas export` of an arch file with its own width: fresh weights at that width; inherited weights of a
    supernet of another width are refused."""
    import json

    from ctrnas.errors import ArchValidationError
    from ctrnas.supernet.io import load_exported

    recipe, result = wide_run
    arch = dataclasses.replace(get_space(recipe.space).sample(np.random.default_rng(5)), emb_dim=32)
    path = tmp_path / "arch.json"
    path.write_text(json.dumps(arch.to_json()))
    space = str(result.output_dir / "recipe.yaml")  # the run's space, emb_dims included
    card = api.export_arch(str(path), tmp_path / "m", data_dir=data_dir, space=space, init="fresh", seed=1)
    assert card["emb_dim"] == 32 and _widths(load_exported(tmp_path / "m")) == {32}
    assert card["params_analytic"] == count_params(load_exported(tmp_path / "m").schema, recipe.space, arch)
    with pytest.raises(ArchValidationError, match="emb_dim.*fresh weights"):
        api.export_arch(str(path), tmp_path / "n", supernet=str(result.warmup.checkpoint), space=space)
