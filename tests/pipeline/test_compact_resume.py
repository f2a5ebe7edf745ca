"""A final-stage job whose checkpoint was written before exported crosses dropped the padded positions of
narrower tables (ctrnas.supernet.compact) resumes in that layout; a new one builds the compact model."""

import dataclasses

import pytest
import torch

from ctrnas.pipeline.fitness.scratch import arch_model, arch_model_for, final_template, job_model
from ctrnas.recipe import load_recipe
from ctrnas.space.baselines import baseline_arch
from ctrnas.train.checkpoint import FILE, save_checkpoint
from tests.helpers.security import as_ctrnas_wrote


@pytest.fixture(scope="module")
def widths_template(tests_data, tests_recipe_path, data_dir):
    """(recipe with per-table widths, its final template): built once for the tests that only export from it
    (two ctrnas-small supernets on the data's 26 fields take seconds)."""
    recipe = load_recipe(tests_recipe_path, [f"data.path={data_dir}",
                                             "space={base: ctrnas-small, table_dims: [0, 4, 8, 16]}"])
    return recipe, final_template(recipe, tests_data, None)


def test_a_job_resumes_in_the_layout_of_its_checkpoint(tests_data, widths_template, tmp_path):
    recipe, template = widths_template
    names = list(tests_data.schema.sparse_names)
    arch = dataclasses.replace(baseline_arch("dcnv2-like"), table_dims=((names[0], 4), (names[1], 0)))
    job = ("arch", arch)
    compact = job_model(recipe, tests_data, template, job)
    assert compact.net.blocks[0].dense_op.width > 0
    assert job_model(recipe, tests_data, template, job, tmp_path).net.blocks[0].dense_op.width > 0  # nothing kept
    padded = arch_model(recipe, template, arch, compact=False)
    save_checkpoint(tmp_path / FILE, {"model": padded.state_dict(), "optimizers": [], "step": 0, "config": {}})
    again = job_model(recipe, tests_data, template, job, tmp_path)
    assert again.net.blocks[0].dense_op.width == 0
    again.load_state_dict(padded.state_dict())  # fits
    save_checkpoint(tmp_path / FILE, {"model": compact.state_dict(), "optimizers": [], "step": 0, "config": {}})
    assert job_model(recipe, tests_data, template, job, tmp_path).net.blocks[0].dense_op.width > 0
    assert all(torch.equal(a, b) for a, b in zip(compact.state_dict().values(),
                                                  job_model(recipe, tests_data, template, job).state_dict().values()))


def test_the_final_choice_is_rebuilt_in_the_layout_of_its_trained_weights(tests_data, widths_template):
    recipe, template = widths_template
    names = list(tests_data.schema.sparse_names)
    arch = dataclasses.replace(baseline_arch("dcnv2-like"), table_dims=((names[0], 4),))
    for compact in (True, False):
        state = arch_model(recipe, template, arch, compact=compact).state_dict()
        model = arch_model_for(recipe, template, arch, state)
        assert (model.net.blocks[0].dense_op.width > 0) == compact
        model.load_state_dict(state)


def test_ctrnas_train_resumes_an_arch_in_the_layout_of_its_checkpoint(tests_data, tests_recipe_path, data_dir,
                                                                        widths_template, tmp_path):
    """`ctrnas train --arch ... --out OUT` over a checkpoint written before the compaction continues it."""
    import json

    from ctrnas import api
    from ctrnas.train.trainer import Trainer

    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}",
                             "space={base: ctrnas-small, table_dims: [0, 4, 8, 16]}", "final.train_rows=256",
                             "final.train.epochs=1", "final.val_rows=256", "final.test_rows=256")
    names = list(tests_data.schema.sparse_names)
    arch = dataclasses.replace(baseline_arch("dcnv2-like"), table_dims=((names[0], 4), (names[1], 0)))
    (tmp_path / "arch.json").write_text(json.dumps(arch.to_json()))
    cfg = api.train_config(tests_recipe_path, final=True, epochs=1, progress=False, threads=1)
    # the template of this recipe is the fixture's: the final sizes set here do not enter it (space, LayerNorm
    # setting, width and row cap do)
    padded = arch_model(recipe, widths_template[1], arch, compact=False)
    out = tmp_path / "t"
    Trainer(padded, cfg, out).save()  # a checkpoint at step 0 in the padded layout
    as_ctrnas_wrote(out, "checkpoint.pt")  # as a ctrnas version before the compaction left it
    m, _ = api.train_model(data_dir, cfg, arch=tmp_path / "arch.json", out_dir=out, recipe=recipe)
    assert m is not None and m["train_rows_used"] == 256
    trained = torch.load(out / "model.pt", map_location="cpu", weights_only=True)
    key = next(k for k in trained if k.endswith("cross.kernels.0"))
    assert trained[key].shape == padded.state_dict()[key].shape
