"""`ctrnas run` touches only what ctrnas wrote in its output folder: a manifest lists it; a folder holding
anything else is refused unless the recipe allows it, and even then those files are left as they were."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctrnas import api
from ctrnas.cli import main
from ctrnas.data.ownership import MANIFEST
from ctrnas.errors import CtrnasError
from ctrnas.pipeline.run_folder import OPEN

ROOT = Path(__file__).resolve().parents[2]
SMALL = ("search.strategy=random", "search.random.budget=3", "final.top_k=1", "final.baselines=[]",
         "final.train_rows=256", "final.export=false")


def _run(tests_recipe_path, data_dir, out, *more):
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={out}", *SMALL, *more)
    return api.run(recipe, progress=False, echo=None)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _listed(folder: Path) -> set[str]:
    man = json.loads((folder / MANIFEST).read_text())
    assert OPEN not in man  # closed: no run is writing
    return set(man["files"])


@pytest.mark.slow
def test_a_run_lists_what_it_wrote_and_a_rerun_needs_no_permission(tests_data, tests_recipe_path, data_dir,
                                                                  tmp_path):
    out = tmp_path / "run"
    _run(tests_recipe_path, data_dir, out)
    on_disk = {f for f in _tree(out) if f not in (MANIFEST, ".ctrnas.lock")}
    assert _listed(out) == on_disk and {"summary.md", "search/history.json", "final/models.csv"} <= on_disk
    _run(tests_recipe_path, data_dir, out)  # the same folder again: all of it is ctrnas's
    (out / MANIFEST).unlink()  # a folder from before manifests: known by its environment.json
    _run(tests_recipe_path, data_dir, out)
    assert "summary.md" in _listed(out)


@pytest.mark.slow
def test_a_finished_run_of_another_recipe_is_refused_and_left_alone(tests_data, tests_recipe_path, data_dir,
                                                                   tmp_path):
    out = tmp_path / "run"
    _run(tests_recipe_path, data_dir, out)
    before = {f: b for f, b in _tree(out).items() if f != ".ctrnas.lock"}
    with pytest.raises(CtrnasError, match=r"another recipe \(search\.random\.budget: 3 -> 4\).*overwrite=true"):
        _run(tests_recipe_path, data_dir, out, "search.random.budget=4")
    assert {f: b for f, b in _tree(out).items() if f != ".ctrnas.lock"} == before
    _run(tests_recipe_path, data_dir, out, "final.workers=2")  # how it runs, not what it finds: a resume
    _run(tests_recipe_path, data_dir, out, "search.random.budget=4", "overwrite=true")
    assert api.load_recipe(out / "recipe.yaml").search.random.budget == 4


@pytest.mark.slow
def test_a_foreign_file_is_refused_in_one_line_and_left_alone(tests_data, tests_recipe_path, data_dir, tmp_path,
                                                             capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    before = _tree(out)
    assert main(["run", str(tests_recipe_path), "--no-progress", "--set", f"data.path={data_dir}", "--set",
                 f"output={out}", *[x for kv in SMALL for x in ("--set", kv)]]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{out} holds files ctrnas did not write (notes.txt)" in err[0]
    assert "--set overwrite=true" in err[0]
    assert {k: v for k, v in _tree(out).items() if k != ".ctrnas.lock"} == before
    # told to, it writes beside the file, leaves it as it was and does not list it as its own
    _run(tests_recipe_path, data_dir, out, "overwrite=true")
    assert (out / "notes.txt").read_text() == "mine" and "notes.txt" not in _listed(out)
    with pytest.raises(CtrnasError, match="holds files ctrnas did not write"):  # still not ctrnas's
        _run(tests_recipe_path, data_dir, out)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["summary.md", "search/notes.txt"])
def test_a_foreign_file_where_a_run_writes_is_refused_even_when_allowed(tests_data, tests_recipe_path, data_dir,
                                                                      tmp_path, where):
    out = tmp_path / "run"
    (out / where).parent.mkdir(parents=True)
    (out / where).write_text("mine")
    with pytest.raises(CtrnasError, match="not written by ctrnas, and a run writes there"):
        _run(tests_recipe_path, data_dir, out, "overwrite=true")
    assert (out / where).read_text() == "mine" and not (out / MANIFEST).exists()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").exists(), reason="SIGKILL of a real run")
def test_a_killed_run_leaves_a_manifest_by_which_its_files_are_its_own(tests_data, tests_recipe_path, data_dir,
                                                                       tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "ctrnas", "run", str(tests_recipe_path), "--no-progress", "--set",
           f"data.path={data_dir}", "--set", f"output={out}", "--set", "overwrite=true"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (out / "warmup/warmup.json").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    man = json.loads((out / MANIFEST).read_text())
    assert man[OPEN] == ["notes.txt"]  # still open: what it found there, nothing of its own
    _run(tests_recipe_path, data_dir, out, "overwrite=true")  # its files are its own; only notes.txt is not
    assert (out / "notes.txt").read_text() == "mine" and "warmup/warmup.json" in _listed(out)


def test_a_run_that_fails_before_writing_leaves_no_folder(tests_recipe_path, tmp_path, capsys):
    out = tmp_path / "runs" / "failed"
    assert main(["run", str(tests_recipe_path), "--no-progress", "--set", f"data.path={tmp_path / 'nodata'}",
                 "--set", "data.synthetic=null", "--set", f"output={out}"]) == 1
    assert "error" in capsys.readouterr().err
    assert not out.exists()
    # a folder that was there before stays, and so does a file of yours in it
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["run", str(tests_recipe_path), "--no-progress", "--set", f"data.path={tmp_path / 'nodata'}",
                 "--set", "data.synthetic=null", "--set", f"output={out}", "--set", "overwrite=true"]) == 1
    assert (out / "notes.txt").read_text() == "mine"


def test_a_recipe_yaml_in_either_form_of_final_train_is_the_same_recipe(tests_recipe_path, tmp_path):
    """A run folder's recipe.yaml with final.train written in full (as older versions wrote it) or only its own
    keys (as now) holds the same recipe: a rerun resumes; another value is still refused."""
    import yaml

    from ctrnas.pipeline.run_folder import check_same_recipe
    from ctrnas.recipe import dump_recipe, recipe_settings

    recipe = api.load_recipe(tests_recipe_path)
    full = yaml.safe_dump(recipe_settings(recipe), sort_keys=False)
    for text in (full, dump_recipe(recipe)):
        folder = tmp_path / str(len(text))
        folder.mkdir()
        (folder / "metrics.json").write_text("{}")
        (folder / "recipe.yaml").write_text(text)
        assert check_same_recipe(folder, recipe) is False
        with pytest.raises(CtrnasError, match=r"another recipe \(.*train\.lr: 0\.12 -> 0\.5"):
            check_same_recipe(folder, api.load_recipe(tests_recipe_path, "train.lr=0.5"))
