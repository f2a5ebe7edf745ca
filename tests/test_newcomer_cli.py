"""What a newcomer meets first: quiet commands (no warning from torch or setuptools they can do nothing about),
flags that win over recipes, the recipe's threads honoured, and errors before the heavy imports."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from ctrnas import api
from ctrnas.pipeline.tasks import train_config

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
NOISE = ("Warning", "warning:", "is_fx_tracing", "deprecated", "W1", "SetuptoolsDeprecationWarning")


def _ctrnas(*args, timeout=300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "ctrnas", *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=ROOT)


def _quiet(text: str) -> bool:
    return not any(word in line for line in text.splitlines() for word in NOISE)


def test_demo_help_and_train_print_no_torch_warning(tmp_path):
    from tests.helpers.samples import criteo_sample

    done = _ctrnas("demo", "--help")
    assert done.returncode == 0 and "usage: ctrnas demo" in done.stdout and _quiet(done.stdout + done.stderr)
    from ctrnas.cli import main

    data = tmp_path / "data"  # the train command's input, made in this process (its output is not the check)
    assert main(["prepare", "criteo", "--input", str(criteo_sample()), "--out", str(data), "--hash-buckets", "100",
                 "--no-progress"]) == 0
    done = _ctrnas("train", "--data", str(data), "--arch", "dcnv2-like", "--out", str(tmp_path / "T"),
                   "--no-progress", "--batch-size", "32", "--protocol", "nasrec", "--epochs", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "test logloss" in done.stdout
    assert f"writing {tmp_path / 'T' / 'model.pt2'} (torch.export) ..." in done.stderr  # before the export's wait
    assert _quiet(done.stdout + done.stderr), done.stderr  # torch's is_fx_tracing warning is dropped


def test_pyproject_reads_without_a_setuptools_warning():
    from setuptools.config.pyprojecttoml import read_configuration

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the deprecated license table would raise here
        project = read_configuration(ROOT / "pyproject.toml")["project"]
    assert project["license"] == "Apache-2.0"


def test_no_progress_wins_over_the_recipe():
    recipe = api.load_recipe(RECIPES / "synthetic-tests.yaml", "train.progress=true")
    assert recipe.train.progress
    quiet = api._progress(recipe, False)
    assert not quiet.train.progress and (quiet.final.train is None or not quiet.final.train.progress)
    assert api._progress(recipe, True) is recipe


def test_train_recipe_gives_its_threads_and_one_thread_by_default(tmp_path):
    run = tmp_path / "recipe.yaml"
    run.write_text((RECIPES / "synthetic.yaml").read_text().replace("threads: 1", "threads: 3"))
    assert train_config(run, final=True, default_threads=1).threads == 3   # the run's threads
    assert train_config(run, final=True, default_threads=1, threads=2).threads == 2  # the flag wins
    assert train_config(None, default_threads=1).threads == 1  # `ctrnas train` alone: one thread


@pytest.mark.parametrize("argv", [["train", "--data", "nowhere", "--baseline", "lr", "--batch-size", "x"],
                                  ["predict", "--model", "m"]])
def test_bad_arguments_fail_before_torch_is_imported(argv):
    t0 = time.perf_counter()
    done = _ctrnas(*argv)
    assert done.returncode == 2 and "usage:" in done.stderr and time.perf_counter() - t0 < 5


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["predict", "--help"], ["train", "--data", "x"],
                                  ["predict", "--model", "m"], ["train", "--data", "x", "--baseline", "lr", "--lr", "y"],
                                  ["predict", "--model", "nowhere", "--input", "nowhere.tsv", "--out", "p.parquet"],
                                  ["train", "--data", "nowhere", "--baseline", "lr"]])
def test_help_and_argument_errors_import_no_torch(argv, tmp_path):
    # the modules loaded when the command has answered (its help, or its one-line error) are read in the child
    code = ("import sys\nfrom ctrnas.cli import main\ntry:\n    code = main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    code = e.code\nprint(code, sorted(m for m in ('torch', 'torchrec', 'sklearn', 'pandas') if m in sys.modules),"
            " file=sys.stderr)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    status, loaded = done.stderr.strip().splitlines()[-1].split(" ", 1)
    assert status in ("0", "1", "2") and (status == "0") == ("--help" in argv), done.stderr
    assert loaded == "[]", done.stderr
