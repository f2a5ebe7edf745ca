"""benchmarks/RESULTS.md is exactly benchmarks/intro.md and the sections, assembled by the script."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.bench_scripts import load_script

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _results_module():
    return load_script("_results")


def test_committed_results_equal_the_assembly():
    assert (BENCH / "RESULTS.md").read_text() == _results_module().assemble(BENCH)


def test_assembly_is_the_intro_then_each_section_in_order_and_check_flags_a_hand_edit(tmp_path):
    (tmp_path / "sections").mkdir()
    (tmp_path / "intro.md").write_text("# R\n\nintro\n")
    (tmp_path / "sections" / "suite.md").write_text("## S\ns\n")
    (tmp_path / "sections" / "prep.md").write_text("## P\np\n\n")
    assert _results_module().assemble(tmp_path) == "# R\n\nintro\n\n## P\np\n\n## S\ns\n"
    (tmp_path / "sections" / "mystery.md").write_text("## M\n")
    with pytest.raises(SystemExit, match="mystery"):
        _results_module().assemble(tmp_path)


def test_check_flag_accepts_the_committed_file():
    ok = subprocess.run([sys.executable, str(BENCH / "_results.py"), "--check"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


def test_raw_results_are_strict_json(tmp_path):
    import json

    mod = _results_module()
    mod.save(tmp_path, "r", {"a": float("nan"), "b": [float("inf"), 1.5], "c": 2})
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": None, "b": ["inf", 1.5], "c": 2}
    assert mod.load(tmp_path, "r")["c"] == 2 and mod.load(tmp_path, "missing") is None


def test_every_section_a_benchmark_script_writes_has_a_place_in_the_assembly():
    import re

    named = {m for p in BENCH.glob("*.py") for m in re.findall(r"sections/(\w+)\.md", p.read_text())}
    assert {"suite", "embedding", "scale"} <= named  # the pattern finds what the scripts write
    assert named <= set(_results_module().SECTIONS), named - set(_results_module().SECTIONS)


def test_a_partial_report_never_erases_the_parts_a_section_shows(tmp_path, capsys):
    """A script's default section keeps its measured parts when a run's report lacks them (their caches are
    not under this run's --out): the report goes to the fallback, said in one line; a full report, or a
    section chosen by hand (no fallback), is written as before. The hand-written notes survive either way."""
    r = _results_module()
    marker = r.notes_marker("x.py")
    section = tmp_path / "x.md"
    old = "## X\n\n**Throughput.** fast\n\n#### profile-a\n\n| a |\n\n#### profile-b\n\n| b |\n"
    section.write_text(old + "\n" + marker + "\nmy note\n")
    partial = "## X\n\nThroughput: not measured yet.\n\n#### profile-b\n\n| b2 |\n"
    where = r.publish(partial, section, marker, fallback=tmp_path / "out" / "section.md")
    assert where == tmp_path / "out" / "section.md" and where.read_text().startswith(partial.rstrip("\n"))
    assert section.read_text() == old + "\n" + marker + "\nmy note\n"  # untouched
    assert "**Throughput.**, #### profile-a" in capsys.readouterr().err
    full = old.replace("| b |", "| b2 |")
    assert r.publish(full, section, marker, fallback=tmp_path / "f.md") == section
    assert section.read_text() == full.rstrip("\n") + "\n\n" + marker + "\nmy note\n"
    assert r.publish(partial, section, marker) == section  # --section given: the user's choice
    assert section.read_text().startswith(partial.rstrip("\n")) and section.read_text().endswith("my note\n")
