"""A benchmark section is written by its command from that command's output files: `benchmarks/numerics.py`
(the smallest section with raw results) run for real on a few rows, then re-rendered from its raw JSON alone."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _numerics(monkeypatch, root: Path):
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_numerics", BENCH / "numerics.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (root / "recipes").mkdir(parents=True)
    shutil.copy(BENCH.parent / "recipes" / "avazu.yaml", root / "recipes")
    monkeypatch.setattr(mod, "ROOT", root)  # raw results under root/benchmarks/out, not the checkout's
    return mod


def _table(text: str, heading: str) -> tuple[str, list[str]]:
    """The command line printed under `heading` and the rows of the table after it."""
    part = text[text.index(heading):]
    command = next(line for line in part.splitlines() if line.startswith("Command:"))
    rows = []
    for line in part[part.index(command):].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return command, rows[2:]  # without the header and the |---| line


def test_the_section_is_its_commands_output_and_rerenders_from_the_raw_files(tmp_path, monkeypatch):
    mod = _numerics(monkeypatch, tmp_path)
    section = tmp_path / "numerics.md"
    args = ["--parts", "chains", "--rows", "2000", "--seed", "1", "--depths", "1", "--data",
            str(tmp_path / "data"), "--out", str(section)]
    assert mod.main(args) == 0
    raw_file = tmp_path / "benchmarks" / "out" / "numerics_chains.json"
    raw = json.loads(raw_file.read_text())
    command, rows = _table(section.read_text(), "### (1) Chains")
    # the command printed above the table is the one that ran, and the table is one row per raw result
    assert command.startswith("Command: `python benchmarks/numerics.py --parts chains --rows 2000 --seed 1 --depths 1`")
    assert len(rows) == len(raw["rows"]) == len(mod.OPS) * 2  # each op at depth 1, LayerNorm off and on
    for line, r in zip(rows, raw["rows"]):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[:3] == [r["op"], str(r["depth"]), "on" if r["layernorm"] else "off"]
        assert cells[3] == ", ".join("%.3g" % x for x in r["init_rms"])
        if r["diverged"]:
            assert cells[4].startswith("diverged (")
        else:
            assert cells[4] == f"test log loss {r['test_logloss']:.4f}"
    # rendering alone (no part trained) rewrites the section from the raw file: a changed result shows
    r0 = raw["rows"][0]
    r0["diverged"], r0["test_logloss"] = False, 0.123456
    raw_file.write_text(json.dumps(raw))
    section.write_text("stale\n")
    assert mod.main([*args[:1], "none", *args[2:]]) == 0
    _, again = _table(section.read_text(), "### (1) Chains")
    assert again[0].endswith("| test log loss 0.1235 |") and again[1:] == rows[1:]
    assert "stale" not in section.read_text() and "(2)" not in section.read_text()  # no subnets part saved
