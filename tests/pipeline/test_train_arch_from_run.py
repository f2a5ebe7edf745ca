"""`ctrnas train --arch` retrains what `ctrnas run` found, from the run's own files (its best_arch.json and
its recipe.yaml), to the final stage's numbers; every arch error names the file."""

import csv
import json

import pytest
import yaml

from ctrnas.cli import main


@pytest.fixture(scope="module")
def small_run(tests_data, tests_recipe_path, data_dir, tmp_path_factory):
    """A tiny run (one final model, no baselines) whose final stage trains on the first 2048 training rows,
    tests on 2000 and picks LayerNorm per arch (`final.layernorm: auto`, the default)."""
    out = tmp_path_factory.mktemp("arch-run") / "run"
    assert main(["run", str(tests_recipe_path), "--no-progress", "--set", f"data.path={data_dir}",
                 "--set", f"output={out}", "--set", "search.strategy=random", "--set", "search.random.budget=3",
                 "--set", "final.top_k=1", "--set", "final.baselines=[]", "--set", "final.export=false"]) == 0
    return out


def _train(data_dir, arch, space, out, *more) -> int:
    return main(["train", "--data", str(data_dir), "--arch", str(arch), "--space", str(space), "--out", str(out),
                 "--no-progress", "--threads", "1", *more])


def test_a_runs_recipe_gives_its_final_train_settings_and_a_train_yaml_its_own(tests_recipe_path, tmp_path):
    from ctrnas.pipeline.tasks import train_config

    # the test recipe: train 1 epoch; final.train: 2 epochs ending on the best one, other keys from train
    cfg = train_config(tests_recipe_path, final=True)
    assert (cfg.epochs, cfg.restore_best, cfg.batch_size) == (2, True, 256)
    assert (train_config(tests_recipe_path).epochs, train_config(tests_recipe_path).restore_best) == (1, False)
    assert train_config(tests_recipe_path, final=True, epochs=3).epochs == 3  # flags on top
    (tmp_path / "t.yaml").write_text("train: {epochs: 4}\n")  # no recipe: its train section either way
    assert train_config(tmp_path / "t.yaml", final=True).epochs == train_config(tmp_path / "t.yaml").epochs == 4


@pytest.mark.slow
def test_train_arch_with_the_runs_recipe_gives_the_final_stage_numbers(small_run, data_dir, tmp_path):
    with open(small_run / "final/models.csv") as fh:
        row = next(csv.DictReader(fh))
    best = json.loads((small_run / "best_arch.json").read_text())
    # no flag but the recipe: its final.train (2 epochs, best restored), rows, space and LayerNorm choice
    assert main(["train", "--data", str(data_dir), "--arch", str(small_run / "best_arch.json"), "--recipe",
                 str(small_run / "recipe.yaml"), "--out", str(tmp_path / "t"), "--no-progress"]) == 0
    m = json.loads((tmp_path / "t/metrics.json").read_text())
    assert m["arch"] == best
    assert m["model"] == f"arch-{row['arch_key']}"
    assert (m["config"]["epochs"], m["train_rows_used"]) == (2, 2048)
    assert m["test"]["logloss"] == float(row["test_logloss"])
    assert m["test"]["auc"] == float(row["test_auc"])
    assert m["val"]["logloss"] == float(row["val_logloss"])
    # the recipe's train section (1 epoch) would not give them
    assert _train(data_dir, small_run / "best_arch.json", small_run / "recipe.yaml", tmp_path / "one",
                  "--recipe", str(small_run / "recipe.yaml"), "--epochs", "1") == 0
    assert json.loads((tmp_path / "one/metrics.json").read_text())["test"]["logloss"] != float(row["test_logloss"])


@pytest.mark.slow
def test_the_runs_space_yaml_and_a_shipped_arch_name_are_accepted(small_run, data_dir, tmp_path):
    space = yaml.safe_load((small_run / "recipe.yaml").read_text())["space"]
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(space))
    one = ("--train-fraction", "0.05", "--epochs", "1")  # what is checked: the names are read, the inits differ
    assert _train(data_dir, small_run / "best_arch.json", tmp_path / "space.yaml", tmp_path / "a", *one) == 0
    assert _train(data_dir, "dcnv2-like", "ctrnas-small", tmp_path / "b", *one) == 0
    from ctrnas.space.baselines import baseline_arch

    m = json.loads((tmp_path / "b/metrics.json").read_text())
    assert m["arch"] == baseline_arch("dcnv2-like").to_json()
    assert m["dense_init"] == "torchrec"
    # NASRec's dense init: other starting weights, so other numbers
    assert _train(data_dir, "dcnv2-like", "ctrnas-small", tmp_path / "c", *one, "--dense-init", "nasrec") == 0
    c = json.loads((tmp_path / "c/metrics.json").read_text())
    assert c["dense_init"] == "nasrec" and c["test"]["logloss"] != m["test"]["logloss"]


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
        assert len(err) == 1 and err[0].startswith((f"ctrnas train: error: {path}: ",
                                                     f"ctrnas train: error: damaged {path}: ")), (path, err)
    assert not (tmp_path / "out").exists()  # nothing trained, nothing written


@pytest.mark.slow
def test_a_run_arch_checked_against_another_space_points_at_the_runs_recipe(small_run, data_dir, tmp_path, capsys):
    assert _train(data_dir, small_run / "best_arch.json", "nasrec-full", tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert f"pass --space {small_run / 'recipe.yaml'}" in err and str(small_run / "best_arch.json") in err
    assert _train(data_dir, "dcnv2-like", "nasrec-full", tmp_path / "out") == 1
    assert "ctrnas-small and ctrnas-full" in capsys.readouterr().err


def test_a_recipe_object_records_its_space_by_name(tests_recipe_path, tests_data, data_dir, tmp_path):
    import numpy as np

    from ctrnas import api
    from ctrnas.space import get_space

    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", "final.train_rows=256",
                             "final.train.epochs=1", "final.val_rows=256", "final.test_rows=256")
    arch = get_space(recipe.space).sample(np.random.default_rng(0))
    (tmp_path / "arch.json").write_text(json.dumps(arch.to_json()))
    cfg = api.train_config(tests_recipe_path, final=True, epochs=1, progress=False, threads=1)
    m, _ = api.train_model(data_dir, cfg, arch=tmp_path / "arch.json", out_dir=tmp_path / "t", recipe=recipe)
    assert m["space"] == recipe.space.name and m["train_rows_used"] == 256
