"""The final stage's progress bar counts every training it runs: the top-k and the baselines beside them; the
report gives each model's dense and embedding parameters."""

import json

import pytest

from ctrnas import api
from ctrnas.data.dataset import load_schema


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

    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    (lr,) = metrics["baselines"]
    schema, cfg = load_schema(data_dir), recipe.final_train
    rows = [min(c, cfg.row_cap) if cfg.row_cap else c for c in schema.cardinalities]
    # LR: one weight per id of every table; a weight per dense feature, the dense layer's bias and w0
    assert (lr["params_embedding"], lr["params"]) == (sum(rows), schema.dense_dim + 2)
    (cand,) = metrics["candidates"]
    assert cand["params_embedding"] == sum(rows) * cfg.embedding_dim  # one table width for every field
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "| params: dense + embedding |" in summary and f"| {schema.dense_dim + 2} + " in summary
