"""Every command that writes a folder follows the rule of `prepare` and `run` (ctrnas.data.ownership): a
folder holding files ctrnas did not write is refused unless --overwrite, and even then a user's file where
ctrnas writes is refused and kept."""

from __future__ import annotations

import json

import pytest

from ctrnas.cli import main
from tests.helpers.security import one_line_error


def run(capsys, *argv) -> tuple[int, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


def users_files(folder, names) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        (folder / n).write_text(f"mine: {n}\n")
    return {n: f"mine: {n}\n" for n in names}


def intact(folder, files: dict) -> bool:
    return all((folder / n).read_text() == text for n, text in files.items())


@pytest.fixture(scope="module")
def trained(data_dir, tmp_path_factory):
    """A `ctrnas train --baseline lr` folder."""
    out = tmp_path_factory.mktemp("trained") / "T"
    assert main(["train", "--data", str(data_dir), "--baseline", "lr", "--out", str(out), "--no-progress"]) == 0
    return out


def _train(data_dir, out, *extra):
    return ("train", "--data", data_dir, "--baseline", "lr", "--out", out, "--no-progress", *extra)


def _export(trained, out, *extra):
    return ("export", "--trained", trained, "--out", out, *extra)


def _warmup(data_dir, out, *extra):
    return ("warmup", "--data", data_dir, "--space", "nasrec-small", "--fraction", "0", "--out", out,
            "--no-progress", *extra)


CASES = {"train": (_train, ["metrics.json", "model.pt", "model_card.md"]),
         "export": (_export, ["model.pt", "model_card.json"]),
         "warmup": (_warmup, ["supernet.pt"])}


@pytest.mark.parametrize("verb", list(CASES))
def test_a_users_files_are_never_replaced(verb, data_dir, trained, tmp_path, capsys):
    """The repro: each command silently replaced the user's files, exit 0."""
    argv, names = CASES[verb]
    source = trained if verb == "export" else data_dir
    out = tmp_path / "O"
    mine = users_files(out, names)
    rc, err = run(capsys, *argv(source, out))
    assert "holds files ctrnas did not write" in one_line_error(rc, err) and "--overwrite" in err
    assert intact(out, mine)
    rc, err = run(capsys, *argv(source, out, "--overwrite"))  # --overwrite never replaces a user's file
    assert "never replaces files it did not write" in one_line_error(rc, err) and intact(out, mine)


@pytest.mark.parametrize("verb", list(CASES))
def test_overwrite_writes_beside_a_users_file_and_a_rerun_takes_its_own_folder(verb, data_dir, trained, tmp_path,
                                                                             capsys):
    argv, names = CASES[verb]
    source = trained if verb == "export" else data_dir
    out = tmp_path / "O"
    mine = users_files(out, ["notes.txt"])
    assert run(capsys, *argv(source, out))[0] == 1
    rc, err = run(capsys, *argv(source, out, "--overwrite"))
    assert rc == 0, err
    assert intact(out, mine) and all((out / n).is_file() for n in names)
    man = json.loads((out / "ctrnas-manifest.json").read_text())
    assert "notes.txt" not in man["files"] and set(names) <= set(man["files"])
    # the folder is now ctrnas's but for notes.txt: a re-run without --overwrite is refused for it alone
    rc, err = run(capsys, *argv(source, out))
    assert "(notes.txt)" in one_line_error(rc, err)
    (out / "notes.txt").unlink()
    rc, err = run(capsys, *argv(source, out))
    assert rc == 0, err


def test_a_folder_a_train_wrote_before_manifests_is_its_own(data_dir, trained, tmp_path, capsys):
    old = tmp_path / "old"
    old.mkdir()
    for f in trained.iterdir():
        if f.is_file() and f.name != "ctrnas-manifest.json":
            (old / f.name).write_bytes(f.read_bytes())
    rc, err = run(capsys, *_train(data_dir, old))
    assert rc == 0, err
