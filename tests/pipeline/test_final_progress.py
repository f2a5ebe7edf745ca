"""The final stage's progress bar counts every training it runs: the top-k and the baselines beside them."""

import pytest

from ctrnas import api


@pytest.mark.parametrize("workers", [1, 2])
def test_final_stage_bar_counts_top_k_and_baselines(tests_data, tests_recipe_path, data_dir, tmp_path, capsys,
                                                    workers):
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path / 'run'}",
                             "search.strategy=random", "search.random.budget=3", "final.top_k=1",
                             "final.baselines=[lr]", "final.train_rows=256", "final.export=false",
                             f"final.workers={workers}")
    api.run(recipe, progress=True, echo=None)
    err = capsys.readouterr().err
    assert "final stage (top-k + baselines)" in err and "2/2" in err
    assert "retrain top-k" not in err and "baselines:" not in err
