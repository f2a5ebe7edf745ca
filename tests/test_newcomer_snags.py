"""The snags a newcomer met on a fresh clone, each pinned: the demo's folder is the one the next command
reads, `train --arch` draws its weights as the final stage does, and errors name the flag that fixes them."""

from __future__ import annotations

import re
from pathlib import Path

from ctrnas import api
from ctrnas.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_the_demo_writes_where_make_demo_and_the_readme_read(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(api, "run", lambda recipe, progress=True: seen.append(recipe))
    assert main(["demo", "--no-progress"]) == 0
    assert main(["demo", "--no-progress", "--out", str(tmp_path / "x")]) == 0
    assert [Path(r.output) for r in seen] == [Path("runs/demo"), tmp_path / "x"]
    make_demo = re.search(r"ctrnas demo --out (\S+)", (ROOT / "Makefile").read_text()).group(1)
    assert make_demo == "runs/demo"
