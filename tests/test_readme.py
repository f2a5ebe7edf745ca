"""The README as a newcomer reads it: its snippets run as written, its links resolve, and its first screen
goes from nothing to a scored model.

Blocks after a `<!-- readme-test: NAME -->` line are run with bash in a scratch folder, `ctrnas` and `python`
being this checkout's; the demo's model is stood in for by a small model of the same shape (the demo itself
takes minutes and `make demo` runs it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.samples import criteo_sample

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *(ROOT / "docs" / f for f in ("gpu.md", "search.md", "results.md", "vision.md"))]


def blocks() -> dict[str, str]:
    text = README.read_text()
    return dict(re.findall(r"<!-- readme-test: (\S+) -->\n```bash\n(.*?)```", text, flags=re.S))


def run_block(name: str, cwd: Path) -> subprocess.CompletedProcess:
    bin_dir = cwd / ".bin"
    bin_dir.mkdir(exist_ok=True)
    for tool, run in (("ctrnas", "-m ctrnas "), ("python", "")):  # scripts, not links: a venv's python
        (bin_dir / tool).write_text(f'#!/bin/sh\nexec "{sys.executable}" {run}"$@"\n')  # finds its venv by path
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", blocks()[name]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_the_marked_snippets_are_the_ones_a_newcomer_needs():
    assert set(blocks()) == {"demo-model", "raw"}
    first = "\n".join(README.read_text().splitlines()[:60])
    for step in ("make demo", "make test", "min", "ctrnas predict", "torch.export.load", "ctrnas train",
                 "ctrnas prepare", "prepared rows only"):
        assert step in first, step


def test_demo_model_snippet_runs(tmp_path, monkeypatch, capsys):
    """`ctrnas predict` on the demo's prepared data and the torch-only load, on a stand-in of the demo's
    model (same data profile: 13 counts, 26 ids; same arch). The stand-in is made in this process (the
    snippet itself runs as written, in its own processes)."""
    from ctrnas.cli import main  # the CLI's exit codes and messages, without another torch import

    monkeypatch.chdir(tmp_path)
    assert main(["prepare", "synthetic", "--profile", "criteo", "--rows", "2000", "--out",
                 "runs/data/synthetic-criteo-300k"]) == 0
    assert main(["train", "--data", "runs/data/synthetic-criteo-300k", "--arch", "dcnv2-like", "--out",
                 "runs/demo/model", "--no-progress", "--batch-size", "256", "--protocol", "nasrec", "--epochs", "1"]) == 0
    done = run_block("demo-model", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "predicted" in done.stdout and "tensor([" in done.stdout
    assert (tmp_path / "preds.parquet").is_file()
    # raw rows: the model says plainly that it scores prepared rows only, with --data too (synthetic has none)
    shutil.copy(criteo_sample(), tmp_path / "day.tsv")
    for more in ([], ["--data", "runs/data/synthetic-criteo-300k"]):
        capsys.readouterr()
        assert main(["predict", "--model", "runs/demo/model", "--input", "day.tsv", "--out", "raw.parquet",
                     *more]) == 1
        assert "scores prepared rows only" in capsys.readouterr().err


def test_raw_rows_snippet_runs(tmp_path):
    """prepare -> train -> predict on a Criteo-format train.txt, as written."""
    shutil.copy(criteo_sample(), tmp_path / "train.txt")
    done = run_block("raw", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "predicted 100 rows" in done.stdout and (tmp_path / "preds.parquet").is_file()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_path_a_page_names_exists(page):
    """Repository paths in backticks (docs/x.md, recipes/y.yaml, benchmarks/..., datasets/...) resolve."""
    text = page.read_text()
    # a path after "REV:" is a file of an earlier commit (`git show REV:path`), not of the working tree
    named = set(re.findall(r"(?<![0-9a-f]:)`((?:docs|recipes|benchmarks|datasets|ctrnas|tests)/[\w./-]+)`", text))
    named |= set(re.findall(r"(?<![0-9a-f]:)\b((?:docs|recipes|benchmarks|datasets)/[\w-]+\.(?:md|yaml|py|sh))\b",
                            text))
    missing = sorted(p for p in named if not (ROOT / p.rstrip("/")).exists())
    assert not missing, f"{page.name} names missing paths: {missing}"
