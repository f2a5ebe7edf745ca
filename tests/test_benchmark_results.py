"""benchmarks/RESULTS.md is exactly benchmarks/intro.md and the sections, assembled by the script."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _results_module():
    spec = importlib.util.spec_from_file_location("bench_results", BENCH / "_results.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_results_equal_the_assembly():
    assert (BENCH / "RESULTS.md").read_text() == _results_module().assemble(BENCH)


def test_assembly_is_the_intro_then_each_section_in_order_and_check_flags_a_hand_edit(tmp_path):
    (tmp_path / "sections").mkdir()
    (tmp_path / "intro.md").write_text("# R\n\nintro\n")
    (tmp_path / "sections" / "search.md").write_text("## S\ns\n")
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
    assert "mfsearch" in named  # the pattern finds what the scripts write
    assert named <= set(_results_module().SECTIONS), named - set(_results_module().SECTIONS)


def test_mfsearch_pair_noise_is_the_standard_error_of_the_difference_of_two_seed_means(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_mfsearch", BENCH / "mfsearch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    pairs = mod.pair_margins({"dlrm": 0.41, "lr": 0.45}, {"dlrm": 0.003}, 0.40, 0.004)
    # dlrm: sqrt((0.004^2 + 0.003^2) / 2) = sqrt(12.5e-6); lr has one seed: the found model's sd for both,
    # lr's mean one draw: sqrt(0.004^2 / 2 + 0.004^2) = sqrt(24e-6)
    assert [(k, round(m, 10), round(n, 10)) for k, m, n in pairs] == [
        ("dlrm", 0.01, round(12.5e-6 ** 0.5, 10)), ("lr", 0.05, round(24e-6 ** 0.5, 10))]
