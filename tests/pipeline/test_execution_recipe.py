"""`execution:` in a recipe picks where the search scores and the study trains, with the serial numbers."""

import pytest

from ctrnas import api
from ctrnas.errors import RecipeError
from ctrnas.execution import ExecutionConfig


def test_recipe_reads_the_execution_section(tests_recipe_path, data_dir):
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", "execution.backend=ray",
                             "execution.address=auto", "execution.workers=3")
    assert recipe.execution == ExecutionConfig("ray", 3, "auto")
    assert api.load_recipe(tests_recipe_path).execution == ExecutionConfig()  # unset: stages' own workers
    with pytest.raises(RecipeError, match="execution.backend"):
        api.load_recipe(tests_recipe_path, "execution.backend=mpi")


def test_search_on_worker_processes_named_by_the_recipe_equals_serial(tests_recipe_path, data_dir, tests_data,
                                                                      tmp_path):
    from ctrnas.pipeline.stages import search_stage, warmup_stage

    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path}")
    warm = warmup_stage(recipe, tests_data)
    serial = search_stage(recipe, tests_data, warm, progress=False)
    par = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path}",
                          "execution.backend=processes", "execution.workers=2")
    parallel = search_stage(par, tests_data, warm, progress=False)
    assert parallel.result.history.same_as(serial.result.history)
    assert {r.budget for r in serial.result.history} == {recipe.proxy.batches}  # the proxy's k batches


@pytest.mark.slow
def test_study_trains_on_ray_with_the_serial_results(tests_recipe_path, data_dir, tests_data, tmp_path):
    pytest.importorskip("ray")
    from ctrnas.pipeline.stages import new_supernet
    from ctrnas.pipeline.study import train_all, sample_archs

    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path}")
    on_ray = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path}",
                             "execution.backend=ray", "execution.workers=1", "threads=1")  # one actor: each
    # imports torch for seconds; tests/execution/test_executors.py spreads jobs over two
    archs = sample_archs(recipe, 2)
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path}", "threads=1")
    serial = train_all(recipe, tests_data, archs, new_supernet(recipe, tests_data), tmp_path / "a.json", False)
    ray_ = train_all(on_ray, tests_data, archs, new_supernet(on_ray, tests_data), tmp_path / "b.json", False)
    for k in serial:
        assert ray_[k]["val"] == serial[k]["val"] and ray_[k]["test"] == serial[k]["test"]
