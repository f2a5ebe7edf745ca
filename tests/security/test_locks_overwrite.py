"""Locks cannot be turned against their owner (a symlink or another file at the lock's path is refused and
left intact), readers hold a shared lock a writer respects, and --overwrite never replaces a user's file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ctrnas.cli import main
from ctrnas.errors import CtrnasError
from ctrnas.locks import LOCK_FILE, FolderLock, folder_lock, reading
from tests.helpers.security import criteo_lines, one_line_error, run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def victim(tmp_path):
    v = tmp_path / "v.txt"
    v.write_text("data\n")
    return v


@pytest.mark.parametrize("verb", ["train", "prepare", "run"])
def test_a_lock_symlink_never_truncates_its_target(verb, victim, data_dir, tmp_path, capsys):
    out = tmp_path / "O"
    out.mkdir()
    (out / LOCK_FILE).symlink_to(victim)
    if verb == "train":
        rc, err = run(capsys, "train", "--data", data_dir, "--baseline", "lr", "--out", out, "--no-progress")
    elif verb == "prepare":
        crit = tmp_path / "crit.tsv"
        crit.write_text("\n".join(criteo_lines(50)) + "\n")
        rc, err = run(capsys, "prepare", "criteo", "--input", crit, "--out", out, "--overwrite", "--no-progress")
    else:
        recipe = tmp_path / "r.yaml"
        recipe.write_text(f"name: r\ndata: {{path: {data_dir}}}\n")
        rc, err = run(capsys, "run", recipe, "--set", f"output={out}", "--no-progress")
    line = one_line_error(rc, err)
    assert "symbolic link" in line and victim.read_text() == "data\n" and (out / LOCK_FILE).is_symlink()


@pytest.mark.parametrize("kind", ["foreign_text", "hard_link", "folder"])
def test_a_lock_path_holding_something_else_is_refused_and_kept(kind, victim, tmp_path):
    out = tmp_path / "O"
    out.mkdir()
    if kind == "foreign_text":
        (out / LOCK_FILE).write_text("my notes\n")
    elif kind == "hard_link":
        os.link(victim, out / LOCK_FILE)
    else:
        (out / LOCK_FILE).mkdir()
    with pytest.raises(CtrnasError, match="not a ctrnas lock file|cannot write here"):
        folder_lock(out, "train").acquire()
    assert victim.read_text() == "data\n"
    if kind == "foreign_text":
        assert (out / LOCK_FILE).read_text() == "my notes\n"


def _hold(folder: Path, shared: bool) -> subprocess.Popen:
    code = f"""
        import time
        from ctrnas.locks import FolderLock
        FolderLock({str(folder)!r}, "run", shared={shared}).acquire()
        print("locked", flush=True)
        time.sleep(600)
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked", p.stderr.read()
    return p


def test_prepare_refuses_a_folder_a_reader_is_reading_and_readers_share(tmp_path, capsys):
    """The repro: `prepare` into a folder a running `run` reads used to succeed, and the run then died."""
    data = tmp_path / "D"
    crit = tmp_path / "crit.tsv"
    crit.write_text("\n".join(criteo_lines(60)) + "\n")
    assert main(["prepare", "criteo", "--input", str(crit), "--out", str(data)]) == 0
    meta = (data / "meta.json").read_text()
    reader = _hold(data, shared=True)
    try:
        with reading(data, "train"):  # another reader at once is fine
            pass
        rc, err = run(capsys, "prepare", "criteo", "--input", crit, "--out", data, "--overwrite", "--seed", "5",
                      "--no-progress")
        assert "reading it" in one_line_error(rc, err) and (data / "meta.json").read_text() == meta
    finally:
        reader.kill()
        reader.wait()
    writer = _hold(data, shared=False)
    try:
        with pytest.raises(CtrnasError, match="being written by process"):
            reading(data, "train").acquire()
    finally:
        writer.kill()
        writer.wait()


def test_a_readers_own_writer_upgrades_its_lock_and_a_later_folder_is_locked_after_it_is_made(tmp_path):
    """`run`: the reader's lock on the data folder, then its own data stage prepares it (same process)."""
    data = tmp_path / "D"
    crit = tmp_path / "crit.tsv"
    crit.write_text("\n".join(criteo_lines(60)) + "\n")
    from ctrnas.data.prepare import prepare
    from ctrnas.data.prepare_config import PrepareConfig

    with reading(data, "run") as r:  # no folder yet: nothing held until the writer below made it
        assert not r.held
        prepare("criteo", [str(crit)], data, PrepareConfig(progress=False))
        assert r.held
        prepare("criteo", [str(crit)], data, PrepareConfig(progress=False, seed=9), overwrite=True)  # upgrade
        assert r.held and (data / LOCK_FILE).read_text() == ""  # back to shared: no holder record
    lock = FolderLock(data, "prepare").acquire()  # every lock of this process was released
    assert lock.held
    lock.release()


def test_overwrite_never_replaces_a_users_files_at_ctrnas_paths(tmp_path, capsys):
    """The repro: a user's train/part-00000.parquet and meta.json, `prepare --overwrite`: both replaced, exit 0."""
    u = tmp_path / "U"
    (u / "train").mkdir(parents=True)
    (u / "train" / "part-00000.parquet").write_text("mine\n")
    (u / "meta.json").write_text("mine\n")
    crit = tmp_path / "crit.tsv"
    crit.write_text("\n".join(criteo_lines(60)) + "\n")
    rc, err = run(capsys, "prepare", "criteo", "--input", crit, "--out", u, "--overwrite")
    assert "replaces only ctrnas's files" in one_line_error(rc, err)
    assert (u / "train" / "part-00000.parquet").read_text() == "mine\n" and (u / "meta.json").read_text() == "mine\n"
    # a user file elsewhere in the folder still lets --overwrite write beside it
    (u / "meta.json").unlink()
    (u / "train" / "part-00000.parquet").unlink()
    (u / "notes.txt").write_text("mine\n")
    assert main(["prepare", "criteo", "--input", str(crit), "--out", str(u), "--overwrite"]) == 0
    assert (u / "notes.txt").read_text() == "mine\n"
