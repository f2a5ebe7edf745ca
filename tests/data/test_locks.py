"""One writer per folder, with real processes: a held lock refuses a second `prepare` in one line, a killed
holder's lock is taken over with a message, and two `prepare`s racing for one folder leave one whole result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ctrnas.data.dataset import read_meta
from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.locks import LOCK_FILE, FolderLock

ROOT = Path(__file__).resolve().parents[2]


def python(code: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def hold(folder: Path) -> subprocess.Popen:
    """A process that takes the folder's lock, says so, and waits to be killed."""
    p = python(f"""
        import time
        from ctrnas.locks import FolderLock
        FolderLock({str(folder)!r}, "prepare criteo").acquire()
        print("locked", flush=True)
        time.sleep(600)
    """)
    assert p.stdout.readline().strip() == "locked", p.stderr.read()
    return p


@pytest.fixture
def criteo(tmp_path, raw):
    rng = np.random.default_rng(0)
    return raw.write_text(tmp_path / "t.txt", [raw.criteo_line(rng) for _ in range(300)])


def test_held_lock_refuses_in_one_line_and_a_killed_holder_is_taken_over(tmp_path, criteo, capsys):
    out = tmp_path / "o"
    holder = hold(out)
    try:
        cli = python(f"""
            import sys
            from ctrnas.cli import main
            sys.exit(main(["prepare", "criteo", "-i", {str(criteo)!r}, "-o", {str(out)!r}, "--no-progress"]))
        """)
        _, err = cli.communicate(timeout=300)
        assert cli.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"in use by process {holder.pid} on host" in err and "`ctrnas prepare criteo`" in err
        assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing written beside the holder
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    meta = prepare("criteo", [str(criteo)], out, PrepareConfig(progress=False))
    err = capsys.readouterr().err
    assert f"taking over the lock left by process {holder.pid}" in err and meta["rows"]["written"] == 300
    assert (out / LOCK_FILE).read_text() == ""  # released cleanly: the next writer has nothing to report
    prepare("criteo", [str(criteo)], out, PrepareConfig(progress=False))
    assert "taking over" not in capsys.readouterr().err


def test_lock_is_reentrant_in_one_process_and_exclusive_across_processes(tmp_path):
    with FolderLock(tmp_path / "f", "run") as outer:
        with FolderLock(tmp_path / "f", "prepare criteo"):  # `run` locks, then its prepare stage locks again
            pass
        assert json.loads((tmp_path / "f" / LOCK_FILE).read_text())["pid"] == os.getpid()  # still held
        other = python(f"""
            from ctrnas.locks import FolderLock
            from ctrnas.errors import FolderInUseError
            try:
                FolderLock({str(tmp_path / "f")!r}, "x").acquire()
            except FolderInUseError as e:
                print(e)
        """)
        text, err = other.communicate(timeout=120)
        assert f"in use by process {os.getpid()}" in text and "`ctrnas run`" in text, err
        assert outer.took_over is None
    assert (tmp_path / "f" / LOCK_FILE).read_text() == ""


def test_two_prepares_racing_for_one_folder_leave_one_whole_result(tmp_path, raw):
    rng = np.random.default_rng(1)
    inputs = [raw.write_text(tmp_path / f"in{k}.txt", [raw.criteo_line(rng) for _ in range(2000 + 1000 * k)])
              for k in range(2)]
    out = tmp_path / "o"
    code = """
        import sys
        from ctrnas.cli import main
        sys.exit(main(["prepare", "criteo", "-i", {inp!r}, "-o", {out!r}, "--no-progress", "--block-size", "4096"]))
    """
    procs = [python(code.format(inp=str(p), out=str(out))) for p in inputs]
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]
    won = [k for k, (rc, _, _) in enumerate(results) if rc == 0]
    assert len(won) == 1, results  # the loser found the lock held, or the winner's finished dataset
    rc, _, err = results[1 - won[0]]
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert "in use by process" in err or "already holds a prepared dataset" in err
    meta = read_meta(out)
    assert meta["rows"]["written"] == 2000 + 1000 * won[0] and f"read {meta['rows']['read']:,} rows" in results[won[0]][1]
    assert meta["source"]["inputs"][0]["name"] == inputs[won[0]].name
    assert sum(len(list((out / s).iterdir())) for s in ("train", "val", "test")) == 3  # no one else's shards


def test_a_file_system_without_locks_warns_and_goes_on(tmp_path, monkeypatch, capsys):
    import fcntl

    def no_locks(fd, op):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with FolderLock(tmp_path / "nfs", "prepare criteo") as lock:
        assert lock.took_over is None
    assert "cannot lock this folder (No locks available)" in capsys.readouterr().err


def test_synthetic_generation_records_its_source_while_it_holds_the_folder_lock(tmp_path, monkeypatch):
    from ctrnas.data import synthetic
    from ctrnas.data.dataset import recorded_source, synthetic_source

    holders = []
    real = synthetic.write_source

    def spy(path, record):  # who holds the folder's lock when the record is written
        holders.append(json.loads((Path(path) / LOCK_FILE).read_text() or "{}").get("pid"))
        real(path, record)

    monkeypatch.setattr(synthetic, "write_source", spy)
    settings = {"chunk_rows": 1024, "calibration_rows": 2048}
    source = synthetic_source("criteo", 500, 0, settings)
    synthetic.generate("criteo", 500, 0, tmp_path / "d", source=source, **settings)
    assert holders == [os.getpid()] and recorded_source(tmp_path / "d") == source
    assert (tmp_path / "d" / LOCK_FILE).read_text() == ""  # released after the record


def test_a_holder_record_written_just_after_the_lock_is_read_not_reported_unknown(tmp_path):
    import json
    import os
    import threading
    import time

    from ctrnas.locks import _holder

    path = tmp_path / "lockfile"
    path.write_text("")  # the holder has the lock but has not written its record yet

    def write_later():
        time.sleep(0.05)
        path.write_text(json.dumps({"pid": 4242, "host": "h", "command": "prepare x", "started": "t"}) + "\n")

    fd = os.open(path, os.O_RDONLY)
    try:
        t = threading.Thread(target=write_later)
        t.start()
        assert _holder(fd).startswith("process 4242 on host h")
        t.join()
        path.write_text("")
        assert _holder(fd, tries=3) == "an unknown process"  # never written: said so, after a short wait
    finally:
        os.close(fd)
