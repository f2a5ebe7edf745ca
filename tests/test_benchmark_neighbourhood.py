"""benchmarks/neighbourhood.py in small: a shipped arch and every one-step local edit of it, trained, cached
and reported; a rerun trains nothing."""

from __future__ import annotations

import argparse
import json


def _script():
    from tests.helpers.bench_scripts import load_script

    return load_script("neighbourhood")


def test_edits_name_each_changed_choice():
    nb = _script()
    base = {"format": "ctrnas-arch/1", "blocks": [{"dense_dim": 16, "fm": False}, {"dense_dim": 64, "fm": False}]}
    child = {"format": "ctrnas-arch/1", "blocks": [{"dense_dim": 16, "fm": True}, {"dense_dim": 128, "fm": False}],
             "first_order": True}
    assert nb.edits(base, base) == "(the arch itself)"
    assert nb.edits(base, child) == "block 1 fm: False -> True; block 2 dense_dim: 64 -> 128; first_order: None -> True"


def test_neighbourhood_smoke_trains_every_edit_once_and_reports(tmp_path, monkeypatch):
    nb = _script()
    argv = ["--rows", "3000", "--profiles", "kdd2012-deep", "--bases", "dlrm-like", "--train-seeds", "0",
            "--out", str(tmp_path / "out"), "--section", str(tmp_path / "s.md"),
            "--set", "data.synthetic.settings={chunk_rows: 8192, calibration_rows: 8192, cardinality_cap: 2000}"]
    assert nb.main(argv) == 0
    cache = json.loads((tmp_path / "out" / "kdd2012-deep" / "neighbourhood.json").read_text())

    from ctrnas.space import Arch, get_space
    args = argparse.Namespace(rows=3000, set=argv[-1:], out=str(tmp_path / "out"), recipe=nb.suite.RECIPE,
                              baseline_seeds=4)
    recipe = nb.suite.recipe_for(nb._suite_args(args), "kdd2012-deep")
    space = get_space(recipe.space)
    base = Arch.from_json((nb.ROOT / "ctrnas/space/archs/dlrm-like.json").read_text())
    expected = {base.key()} | {a.key() for a in space.local_neighbours(base)}
    assert {r["arch_key"] for r in cache.values()} == expected  # the arch and each neighbour, once
    edits = {r["arch_key"]: r["edit"] for r in cache.values()}
    assert edits.pop(base.key()) == "(the arch itself)"
    assert all(e.count("->") == 1 for e in edits.values())  # one choice each
    assert all(0 < r["test"] < 1 for r in cache.values())
    text = (tmp_path / "s.md").read_text()
    assert all(f"`{k[:8]}`" in text for k in expected)

    import ctrnas.pipeline.fitness.scratch

    def no_training(*a, **k):
        raise AssertionError("a cached training ran again")

    monkeypatch.setattr(ctrnas.pipeline.fitness.scratch, "train_as_final", no_training)
    assert nb.main(argv) == 0
    assert (tmp_path / "s.md").read_text() == text
