"""Every path a recipe file writes stays under the working folder unless the user names it on the command
line: `output` (tests/security/test_bad_inputs.py) and `data.path` where the run prepares its data, also when
reached through `extends:`."""

from __future__ import annotations

import shutil

import pytest

from ctrnas.cli import main
from ctrnas.errors import RecipeError
from ctrnas.recipe import check_output, load_recipe
from tests.helpers.security import one_line_error


def run(capsys, *argv) -> tuple[int, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


def _snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def places(tmp_path, data_dir, monkeypatch):
    """(working folder, a prepared dataset outside it, a path outside it where nothing is yet)."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    shutil.copytree(data_dir, elsewhere / "D")
    monkeypatch.chdir(work)
    return work, elsewhere / "D", elsewhere / "new"


SYNTH = "synthetic: {profile: criteo, rows: 500, seed: 3}"


def test_data_path_outside_with_overwrite_never_replaces_a_dataset_there(places, capsys):
    """The repro: `data.path: /abs/elsewhere` with `data.overwrite: true` replaced the dataset there, exit 0."""
    work, prepared, _ = places
    before = _snapshot(prepared)
    (work / "r.yaml").write_text(f"name: r\ndata: {{path: {prepared}, overwrite: true, {SYNTH}}}\n")
    rc, err = run(capsys, "run", "r.yaml", "--no-progress")
    line = one_line_error(rc, err)
    assert "data.path" in line and "outside the working folder" in line and "--set data.path=" in line
    assert _snapshot(prepared) == before and not (work / "runs").exists()


def test_data_path_outside_through_extends_writes_nothing(places, capsys):
    """The repro: the same `data.path` reached through `extends:` wrote a new dataset there, exit 0."""
    work, _, new = places
    (work / "base.yaml").write_text(f"name: b\ndata: {{path: {new}, {SYNTH}}}\n")
    (work / "top.yaml").write_text("extends: base.yaml\n")
    rc, err = run(capsys, "run", "top.yaml", "--no-progress")
    assert "data.path" in one_line_error(rc, err) and not new.exists()
    (work / "base.yaml").write_text(f"name: b\ndata: {{path: ../../{new.parent.name}/new, {SYNTH}}}\n")
    rc, err = run(capsys, "run", "top.yaml", "--no-progress")  # escaping with ..
    assert "data.path" in one_line_error(rc, err) and not new.exists()


def test_a_data_path_named_on_the_command_line_or_only_read_is_allowed(places):
    work, prepared, new = places
    (work / "r.yaml").write_text(f"name: r\ndata: {{path: {new}, {SYNTH}}}\n")
    with pytest.raises(RecipeError, match="data.path"):
        check_output(load_recipe("r.yaml"), "r.yaml")
    given = [f"data.path={new}"]
    check_output(load_recipe("r.yaml", given), "r.yaml", given)  # the user named it: allowed
    (work / "read.yaml").write_text(f"name: r\ndata: {{path: {prepared}}}\n")  # a prepared folder, only read
    check_output(load_recipe("read.yaml"), "read.yaml")
    (work / "inside.yaml").write_text(f"name: r\ndata: {{path: data/mine, {SYNTH}}}\n")
    check_output(load_recipe("inside.yaml"), "inside.yaml")
