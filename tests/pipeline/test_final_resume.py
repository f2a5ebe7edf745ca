"""An interrupted final stage resumes each model where it stopped, with the numbers of an uninterrupted run;
models already finished are not retrained, and the run says what it resumed."""

import csv
from collections import Counter

import pytest

from ctrnas import api
from ctrnas.train.trainer import Trainer


class Injected(Exception):
    pass


def _recipe(tests_recipe_path, data_dir, out, *more):
    # no model/ export (a torch.export each run): these tests compare the trainings, the kept checkpoints and
    # the chosen model, not the files written from it
    return api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={out}", "final.export=false", *more)


def _models(out) -> list[dict]:
    with open(out / "final/models.csv") as fh:  # every number but the wall time
        return [{k: v for k, v in r.items() if k != "train_seconds"} for r in csv.DictReader(fh)]


def _count_steps(monkeypatch) -> Counter:
    """Training steps taken per job folder from now on."""
    steps, step = Counter(), Trainer.train_step

    def counting(self, batch, total):
        steps[self.out_dir.name if self.out_dir is not None else None] += 1
        return step(self, batch, total)

    monkeypatch.setattr(Trainer, "train_step", counting)
    return steps


@pytest.fixture(scope="module")
def uninterrupted(tests_data, tests_recipe_path, data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("final-resume") / "whole"
    result = api.run(_recipe(tests_recipe_path, data_dir, out), progress=False, echo=None)
    return out, result


def _stop_in_model_2(monkeypatch, recipe) -> int:
    """Make the final stage raise right after the first epoch's checkpoint of rank 1; its steps per epoch."""
    per_epoch = -(-recipe.final.train_rows // recipe.final_train.batch_size)
    save = Trainer.save

    def stop_after_epoch_1_of_model_2(self):
        save(self)
        if self.out_dir is not None and self.out_dir.name.startswith("rank1-") and self.step == per_epoch:
            raise Injected

    monkeypatch.setattr(Trainer, "save", stop_after_epoch_1_of_model_2)
    with pytest.raises(Injected):
        api.run(recipe, progress=False, echo=None)
    monkeypatch.setattr(Trainer, "save", save)
    return per_epoch


@pytest.mark.slow
def test_a_final_stage_stopped_mid_model_resumes_with_identical_numbers(uninterrupted, tests_recipe_path, data_dir,
                                                                        tmp_path, monkeypatch, capsys):
    whole, first = uninterrupted
    recipe = _recipe(tests_recipe_path, data_dir, tmp_path / "run")
    epochs = recipe.final_train.epochs
    assert epochs == 2 and recipe.top_k == 2
    per_epoch = _stop_in_model_2(monkeypatch, recipe)
    steps = _count_steps(monkeypatch)
    capsys.readouterr()
    again = api.run(recipe, progress=False, echo=None)
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("final stage: resumed")] == [
        f"final stage: resumed: rank 0 done (not retrained); resuming rank 1 at epoch 2 of {epochs} "
        f"(step {per_epoch})"]
    # rank 0 took no step, rank 1 only its second epoch, the baseline all of its own
    by_job = {name.split("-")[0]: n for name, n in steps.items() if name is not None}
    assert by_job == {"rank1": per_epoch, "baseline": epochs * per_epoch}
    assert _models(tmp_path / "run") == _models(whole)
    assert again.final.best.test == first.final.best.test and again.final.best.arch == first.final.best.arch


@pytest.mark.slow
def test_a_finished_final_stage_is_not_retrained_and_keeps_only_the_exported_weights(uninterrupted, tests_recipe_path,
                                                                                    data_dir, monkeypatch, capsys):
    whole, first = uninterrupted
    kept = sorted(p.parent.name.split("-")[0] for p in (whole / "final/train").glob("*/checkpoint.pt"))
    best = first.final.best  # a candidate, or a baseline that beat them all on validation
    assert kept == [f"rank{first.final.candidates.index(best)}" if best.arch is not None else "baseline"]
    steps = _count_steps(monkeypatch)
    again = api.run(_recipe(tests_recipe_path, data_dir, whole), progress=False, echo=None)
    assert sum(steps.values()) == 0
    assert "final stage: resumed: rank 0, rank 1, baseline lr done (not retrained)" in capsys.readouterr().err
    assert again.final.best.test == first.final.best.test


@pytest.mark.slow
def test_a_stopped_serial_final_stage_resumed_in_worker_processes_gives_the_same_numbers(
        uninterrupted, tests_recipe_path, data_dir, tmp_path, monkeypatch):
    whole, first = uninterrupted
    _stop_in_model_2(monkeypatch, _recipe(tests_recipe_path, data_dir, tmp_path / "run"))
    again = api.run(_recipe(tests_recipe_path, data_dir, tmp_path / "run", "final.workers=2"), progress=False,
                    echo=None)
    assert _models(tmp_path / "run") == _models(whole)
    assert again.final.best.test == first.final.best.test


@pytest.mark.slow
def test_a_final_stage_with_other_settings_starts_each_model_over(tests_data, tests_recipe_path, data_dir, tmp_path,
                                                                  monkeypatch, capsys):
    _stop_in_model_2(monkeypatch, _recipe(tests_recipe_path, data_dir, tmp_path / "run"))
    steps = _count_steps(monkeypatch)
    capsys.readouterr()
    recipe = _recipe(tests_recipe_path, data_dir, tmp_path / "run", "final.train_rows=512")
    api.run(recipe, progress=False, echo=None)
    assert "final stage: resumed" not in capsys.readouterr().err
    full = recipe.final_train.epochs * (512 // recipe.final_train.batch_size)
    assert {name.split("-")[0]: n for name, n in steps.items() if name} == {"rank0": full, "rank1": full,
                                                                           "baseline": full}


def test_a_stored_result_without_metrics_reads_back_as_nan_and_is_judged_alike(tests_data, tmp_path):
    import math

    from ctrnas.pipeline.final.resume import Job
    from ctrnas.pipeline.results import TrainedModel
    from ctrnas.pipeline.final.selection import judge
    from ctrnas.train.metrics import MetricResult

    missing = MetricResult.missing("diverged: loss NaN at step 3").to_dict()
    job = Job(tmp_path, "rank 0", ("baseline", "lr"), {"fp": 1})
    assert job.result() is None
    job.finish({"val": missing, "test": dict(missing), "seconds": 1.5, "diverged": None, "dense_params": 3})
    back = Job(tmp_path, "rank 0", ("baseline", "lr"), {"fp": 1}).result()
    assert math.isnan(back["val"]["logloss"]) and back["val"]["reason"] == missing["reason"]
    assert back["val"]["rows"] == 0 and back["seconds"] == 1.5
    judged = [judge(TrainedModel("lr", None, v, v, 3.0, math.nan, 1.5), tests_data).status
              for v in (missing, back["val"])]
    assert judged[0] == judged[1]
    assert Job(tmp_path, "rank 0", ("baseline", "lr"), {"fp": 2}).result() is None  # other settings: over


@pytest.mark.slow
def test_a_fallback_final_stage_stopped_in_its_baseline_resumes_to_the_same_export(tests_data, tests_recipe_path,
                                                                                   data_dir, tmp_path, monkeypatch):
    import json

    import torch

    from ctrnas.pipeline.final import final_stage
    from ctrnas.recipe import load_recipe
    from tests.helpers.chains import chain_arch, search_of

    # two Dot chains at a high learning rate diverge (tests/pipeline/test_selection.py): lr is the fallback
    recipe = load_recipe(tests_recipe_path, [
        f"data.path={data_dir}", "space.num_blocks=3", "space.dense_ops=[fc,dot,gating,sum]", "final.layernorm=false",
        "final.train={lr: 0.5, epochs: 2}", "final.top_k=2", "final.export=false"])  # the model, not its files
    search = search_of([chain_arch("dot", 3), chain_arch("dot", 3, dense_dim=32)])
    whole = final_stage(recipe, tests_data, search, None, tmp_path / "whole", progress=False)
    assert whole.fallback and whole.best.label == "lr"

    per_epoch = -(-recipe.final.train_rows // recipe.final_train.batch_size)
    save = Trainer.save

    def stop_in_the_baseline(self):
        save(self)
        if self.out_dir is not None and self.out_dir.name == "baseline-lr" and self.step == per_epoch:
            raise Injected

    monkeypatch.setattr(Trainer, "save", stop_in_the_baseline)
    with pytest.raises(Injected):
        final_stage(recipe, tests_data, search, None, tmp_path / "run", progress=False)
    monkeypatch.setattr(Trainer, "save", save)
    steps = _count_steps(monkeypatch)
    again = final_stage(recipe, tests_data, search, None, tmp_path / "run", progress=False)
    assert dict(steps) == {"baseline-lr": per_epoch}  # the diverged candidates are not retrained

    def numbers(final):
        return json.dumps([(m.label, m.status, m.val, m.test) for m in (*final.candidates, *final.baselines)])

    assert numbers(again) == numbers(whole) and again.fallback == whole.fallback
    a, b = again.model.state_dict(), whole.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
