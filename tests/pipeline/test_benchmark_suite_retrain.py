"""benchmarks/suite.py's `--own-seeds` retraining: a run's arch trained again as its final stage trained it."""

import json
import math


def test_retrain_reproduces_the_final_stage(tests_recipe_path, data_dir, tests_data, tmp_path):
    """At the run's own training seed the retraining gives the final stage's val and test log loss again."""
    from ctrnas import api
    from tests.helpers.bench_scripts import load_script

    run = tmp_path / "run"
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={run}", "final.baselines=[]",
                             "final.export=false")  # the retraining reads the run's recipe and arch, not model/
    api.run(recipe, progress=False, echo=lambda *a, **k: None)
    best = json.loads((run / "metrics.json").read_text())["best"]
    arch = next(r["arch"] for r in json.loads((run / "search" / "history.json").read_text())
                if r["key"] == best["arch_key"])
    got = load_script("suite").retrain(run, arch, 0)
    assert math.isclose(got["val"], best["val_logloss"], rel_tol=1e-6)
    assert math.isclose(got["test"], best["test_logloss"], rel_tol=1e-6)
