"""benchmarks/planted.py: the gap between the best baseline and the planted arch, in units of the pair's sd."""

import math

import pytest


def _planted():
    from tests.helpers.bench_scripts import load_script

    return load_script("planted")


def test_gap_reads_the_best_baseline_by_mean_and_the_pair_sd():
    planted = _planted()

    def runs(*tests):
        return [{"seed": i, "test": x} for i, x in enumerate(tests)]

    # DLRM mean 0.402 (sd 0.0028), DeepFM 0.401 (sd 0.0014): DeepFM is best; the plant 0.391 (sd 0.0014)
    res = {"dlrm": runs(0.400, 0.404), "deepfm": runs(0.400, 0.402), "planted": runs(0.390, 0.392),
           "dcnv2": runs(0.5)}  # one seed only: left out
    g = planted.gap(res, ["dlrm", "deepfm", "dcnv2"])
    assert g["best"] == "deepfm" and g["base"] == pytest.approx(0.401) and g["plant"] == pytest.approx(0.391)
    pair = math.hypot(0.002 / math.sqrt(2), 0.002 / math.sqrt(2))  # each sd: |a - b| / sqrt(2)
    assert g["pair"] == pytest.approx(pair) and g["in_pair"] == pytest.approx(0.010 / pair)
    assert planted.gap({**res, "planted": runs(0.39)}, ["dlrm"]) is None  # the plant needs 2 training seeds


def test_only_planted_profiles_are_taken(tmp_path, capsys):
    planted = _planted()
    assert set(planted.PLANTED) == {"kdd2012-planted", "kdd2012-planted-deep"}
    with pytest.raises(SystemExit):
        planted.main(["--profiles", "criteo", "--out", str(tmp_path), "--report-only"])
    assert "unknown criteo" in capsys.readouterr().err
