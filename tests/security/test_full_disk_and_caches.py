"""A full disk under any writer is one line naming it and what to do, with no temp file left; a damaged
benchmark cache stops the benchmark with one line instead of a traceback."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.security import one_line_error, run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def full_parquet(monkeypatch):
    """Every Parquet write fills the disk, as pyarrow reports it."""
    import pyarrow.parquet as pq

    real = pq.ParquetWriter.write_table

    def full(self, *a, **k):
        real(self, *a, **k)
        raise OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")  # no errno attr

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)


def test_a_full_disk_in_predict_is_one_line(model_dir, data_dir, tmp_path, capsys, full_parquet):
    rc, err = run(capsys, "predict", "--model", model_dir, "--input", data_dir, "--out", tmp_path / "p.parquet",
                  "--no-progress")
    line = one_line_error(rc, err)
    assert "no space left" in line and "p.parquet" in line and "free some space" in line
    assert not list(tmp_path.glob("*p.parquet*"))


def test_a_full_disk_while_generating_synthetic_data_is_one_line(tmp_path, capsys, full_parquet):
    rc, err = run(capsys, "prepare", "synthetic", "--rows", "500", "--out", tmp_path / "S")
    line = one_line_error(rc, err)
    assert "no space left" in line and "cannot write the dataset" in line
    assert not [p for p in (tmp_path / "S").rglob("*") if ".tmp-" in p.name or ".staging-" in p.name]


def test_a_full_disk_under_any_other_writer_is_one_line(data_dir, tmp_path, capsys, monkeypatch):
    """`train` writing its metrics.json when the disk fills: was a traceback."""
    real = Path.write_text

    def full(self, *a, **k):
        if "metrics.json" in self.name:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full)
    rc, err = run(capsys, "train", "--data", data_dir, "--baseline", "lr", "--out", tmp_path / "O", "--no-progress")
    line = one_line_error(rc, err)
    assert "metrics.json" in line and "no space left" in line
    assert not [p for p in (tmp_path / "O").rglob("*") if ".tmp-" in p.name]


@pytest.mark.parametrize("content", [b"\xff\xfe{}", b"[1, 2]", b"[" * 100_000])
def test_a_damaged_suite_cache_is_one_line(content, tmp_path):
    """benchmarks/suite.py's trainings.json as bytes, as a list, nested too deeply: was a traceback."""
    (tmp_path / "criteo").mkdir()
    (tmp_path / "criteo" / "trainings.json").write_bytes(content)
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "suite.py"), "--rows", "100", "--seeds", "1",
                        "--profiles", "criteo", "--methods", "baselines", "--out", str(tmp_path),
                        "--section", str(tmp_path / "s.md")], capture_output=True, text=True, timeout=300,
                       env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    lines = [s for s in p.stderr.splitlines() if s.strip()]
    assert p.returncode == 1 and "Traceback" not in p.stderr and len(lines) == 1, p.stderr
    assert lines[0].startswith("damaged ") and "trainings.json" in lines[0] and "delete it" in lines[0]
    assert (tmp_path / "criteo" / "trainings.json").read_bytes() == content
