"""`ctrnas train --arch` retrains what `ctrnas run` found, from the run's own files (its best_arch.json and
its recipe.yaml as the space), to the final stage's numbers; every arch error names the file."""

import csv
import json

import pytest
import yaml

from ctrnas.cli import main


@pytest.fixture(scope="module")
def small_run(tests_data, tests_recipe_path, data_dir, tmp_path_factory):
    """A tiny run whose final stage trains as `ctrnas train` does: all rows, LayerNorm off, no baselines."""
    out = tmp_path_factory.mktemp("arch-run") / "run"
    assert main(["run", str(tests_recipe_path), "--no-progress", "--set", f"data.path={data_dir}",
                 "--set", f"output={out}", "--set", "search.strategy=random", "--set", "search.random.budget=3",
                 "--set", "final.top_k=1", "--set", "final.baselines=[]", "--set", "final.train_rows=null",
                 "--set", "final.val_rows=null", "--set", "final.test_rows=null", "--set", "final.layernorm=false",
                 "--set", "final.export=false"]) == 0
    return out


def _train(data_dir, arch, space, out, *more) -> int:
    return main(["train", "--data", str(data_dir), "--arch", str(arch), "--space", str(space), "--out", str(out),
                 "--no-progress", "--threads", "1", *more])


@pytest.mark.slow
def test_train_arch_with_the_runs_recipe_as_space_gives_the_final_stage_numbers(small_run, data_dir, tmp_path):
    with open(small_run / "final/models.csv") as fh:
        row = next(csv.DictReader(fh))
    best = json.loads((small_run / "best_arch.json").read_text())
    # the final stage's train settings of the test recipe (final.train: 2 epochs, best epoch restored)
    ft = yaml.safe_load((small_run / "recipe.yaml").read_text())["final"]["train"]
    assert (ft["epochs"], ft["restore_best"]) == (2, True)
    assert _train(data_dir, small_run / "best_arch.json", small_run / "recipe.yaml", tmp_path / "t",
                  "--recipe", str(small_run / "recipe.yaml"), "--epochs", "2", "--restore-best") == 0
    m = json.loads((tmp_path / "t/metrics.json").read_text())
    assert m["arch"] == best
    assert m["model"] == f"arch-{row['arch_key']}"
    assert m["test"]["logloss"] == float(row["test_logloss"])
    assert m["test"]["auc"] == float(row["test_auc"])
    assert m["val"]["logloss"] == float(row["val_logloss"])


@pytest.mark.slow
def test_the_runs_space_yaml_and_a_shipped_arch_name_are_accepted(small_run, data_dir, tmp_path):
    space = yaml.safe_load((small_run / "recipe.yaml").read_text())["space"]
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(space))
    assert _train(data_dir, small_run / "best_arch.json", tmp_path / "space.yaml", tmp_path / "a",
                  "--train-fraction", "0.05") == 0
    assert _train(data_dir, "dcnv2-like", "ctrnas-small", tmp_path / "b", "--train-fraction", "0.05") == 0
    from ctrnas.space.baselines import baseline_arch

    m = json.loads((tmp_path / "b/metrics.json").read_text())
    assert m["arch"] == baseline_arch("dcnv2-like").to_json()


def _bad_archs(run, tmp_path):
    best = json.loads((run / "best_arch.json").read_text())
    out_of_range = json.loads(json.dumps(best))
    out_of_range["blocks"][1]["dense_idx"] = [0, 5]
    files = {"list.json": b"[1, 2]", "string.json": b'"x"', "no-blocks.json": b'{"format": "ctrnas-arch/1"}',
             "binary.json": b"\xff\xfe\x00", "truncated.json": json.dumps(best).encode()[:40],
             "out-of-range.json": json.dumps(out_of_range).encode()}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "folder").mkdir()
    return [tmp_path / n for n in files] + [tmp_path / "folder", tmp_path / "missing.json"]


@pytest.mark.slow
def test_every_arch_error_of_train_names_the_file_in_one_line(small_run, data_dir, tmp_path, capsys):
    for path in _bad_archs(small_run, tmp_path):
        capsys.readouterr()
        assert _train(data_dir, path, small_run / "recipe.yaml", tmp_path / "out") == 1, path
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"ctrnas train: error: {path}: "), (path, err)
    assert not (tmp_path / "out").exists()  # nothing trained, nothing written


@pytest.mark.slow
def test_a_run_arch_checked_against_another_space_points_at_the_runs_recipe(small_run, data_dir, tmp_path, capsys):
    assert _train(data_dir, small_run / "best_arch.json", "nasrec-full", tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert f"pass --space {small_run / 'recipe.yaml'}" in err and str(small_run / "best_arch.json") in err
    assert _train(data_dir, "dcnv2-like", "nasrec-full", tmp_path / "out") == 1
    assert "ctrnas-small and ctrnas-full" in capsys.readouterr().err
