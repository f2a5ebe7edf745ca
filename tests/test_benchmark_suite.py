"""benchmarks/suite.py in small: three structure profiles, two baselines, one seed; resumable from its cache."""

from __future__ import annotations

import json

import pytest


def _suite():
    from tests.helpers.bench_scripts import load_script

    return load_script("suite")


def test_suite_smoke_trains_caches_resumes_and_reports(tmp_path, monkeypatch, capsys):
    suite = _suite()
    argv = ["--rows", "20000", "--profiles", "criteo,avazu-pairwise,kdd2012-deep", "--methods", "baselines",
            "--baselines", "lr,fm", "--seeds", "1", "--out", str(tmp_path / "out"), "--section", str(tmp_path / "s.md"),
            "--set", "data.synthetic.settings={chunk_rows: 8192, calibration_rows: 8192, cardinality_cap: 2000}"]
    assert suite.main(argv) == 0
    text = (tmp_path / "s.md").read_text()
    rows = {}
    for profile in ("criteo", "avazu-pairwise", "kdd2012-deep"):
        cache = json.loads((tmp_path / "out" / profile / "trainings.json").read_text())
        assert sorted(r["model"] for r in cache.values()) == ["fm", "lr"]
        rows[profile] = {r["model"]: r for r in cache.values()}
        assert f"| {profile} |" in text
        for r in rows[profile].values():
            assert r["bayes"] < r["test"] and r["bayes"] < r["constant"]  # nothing beats the known optimum
    # on the pairwise structure (FM's own model) FM closes a large part of LR's gap to the optimum
    lr, fm = rows["avazu-pairwise"]["lr"], rows["avazu-pairwise"]["fm"]
    assert (lr["test"] - fm["test"]) / (lr["test"] - lr["bayes"]) > 0.15  # 26% measured at 20k rows
    assert "| avazu-pairwise | fm |" in text

    import ctrnas.train.run

    def no_training(*a, **k):
        raise AssertionError("a cached training ran again")

    monkeypatch.setattr(ctrnas.train.run, "train_and_test", no_training)
    assert suite.main(argv) == 0  # resumed: every training comes from the cache
    assert (tmp_path / "s.md").read_text() == text


def test_suite_rejects_unknown_profiles_and_methods(tmp_path, capsys):
    suite = _suite()
    for flag, value in (("--profiles", "criteo,cubic"), ("--methods", "grid")):
        with pytest.raises(SystemExit):
            suite.main([flag, value, "--out", str(tmp_path), "--report-only"])
        err = capsys.readouterr().err
        assert "unknown" in err and ("cubic" in err or "grid" in err)
