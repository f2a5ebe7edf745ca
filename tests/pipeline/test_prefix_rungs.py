"""Prefix rungs: successive halving over prefixes of the final training itself (ASHA-style). A promoted
candidate continues its own training from its last rung's checkpoint, and the final stage continues the
top-k from there: the numbers equal one uninterrupted training, and no step is paid for twice."""

import json

import pytest

from ctrnas import api

RUNGS = "search.multifidelity.rungs=[{fitness: prefix, fraction: 0.25, keep: 0.5}, {fitness: prefix, fraction: 0.5}]"


@pytest.fixture(scope="module")
def prefix_run(tests_data, tests_recipe_path, data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("prefix") / "run"
    # 2048 training rows / 256 = 8 steps an epoch, 2 epochs: rungs at 4 and 8 of the final training's 16 steps
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={out}",
                             "search.strategy=multifidelity", RUNGS, "final.train={epochs: 2}",
                             "search.evolution.generations=1",
                             "final.export=false")  # its tests read the rungs and the trainings, not the model
    return recipe, api.run(recipe, progress=False, echo=None)


def test_prefix_rungs_continue_and_the_final_stage_equals_an_uninterrupted_training(prefix_run, tests_data):
    from ctrnas.pipeline.fitness.scratch import arch_model, final_template, train_as_final

    recipe, result = prefix_run
    h = list(result.search.history)
    assert {(r.rung, r.budget) for r in h} == {(0, 4), (1, 8)}
    assert all(r.meta["steps"] == r.budget for r in h)
    # every retrained candidate went through both rungs and continued from step 8
    assert result.final.continued == {c.label: 8 for c in result.final.candidates}
    quiet = api.override(recipe, "final.train.progress=false")
    template = final_template(quiet, tests_data, None)
    for cand in result.final.candidates:
        val, test, _, trainer = train_as_final(arch_model(quiet, template, cand.arch), quiet, tests_data)
        assert trainer.step == 16
        assert val["logloss"] == cand.val["logloss"] and test["logloss"] == cand.test["logloss"]


def test_a_prefix_rung_scores_the_training_stopped_at_its_step(prefix_run, tests_data):
    from ctrnas.pipeline.fitness.scratch import arch_model, final_template, final_train_batches
    from ctrnas.space import Arch
    from ctrnas.train.batches import dataset_batches
    from ctrnas.train.trainer import Trainer

    recipe, result = prefix_run
    rec = next(r for r in result.search.history if r.rung == 1)
    cfg = recipe.final_train
    model = arch_model(recipe, final_template(recipe, tests_data, None), Arch.from_json(rec.arch))
    trainer = Trainer(model, cfg)
    import dataclasses

    trainer.cfg = dataclasses.replace(cfg, progress=False)
    trainer.fit(final_train_batches(recipe, tests_data), None, resume=False, max_steps=8)
    val = dataset_batches(tests_data.path, "val", cfg.eval_batch_size, limit=recipe.oneshot.eval_rows)
    assert trainer.evaluate(val).logloss == rec.value


def test_prefix_work_is_counted_once(prefix_run):
    recipe, result = prefix_run
    metrics = json.loads((result.output_dir / "metrics.json").read_text())
    c = metrics["compute"]
    h = list(result.search.history)
    bs = recipe.final_train.batch_size
    # rung 0: 4 steps each; rung 1 adds 4 more to the promoted ones
    assert c["samples"]["search"] == (4 * sum(r.rung == 0 for r in h) + 4 * sum(r.rung == 1 for r in h)) * bs
    assert c["samples"]["final"] == (16 - 8) * bs * len(result.final.candidates)
    # only the top-k's trainings stay on disk after the search
    prefix = result.output_dir / "search" / "prefix"
    assert {d.name for d in prefix.iterdir()} == {c.arch.key() for c in result.final.candidates}
