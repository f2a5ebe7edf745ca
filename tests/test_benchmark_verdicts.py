"""benchmarks/verdicts.py: runs named as ROWS[:PROFILES], and one table row per finished run."""

import json


def _verdicts():
    from tests.helpers.bench_scripts import load_script

    return load_script("verdicts")


def test_rows_take_their_own_profiles_or_the_default_ones_in_order():
    v = _verdicts()
    assert v.runs(["100000", "1000000:kdd2012-crosses"], "avazu-pairwise,kdd2012-crosses") == [
        (100000, "avazu-pairwise"), (100000, "kdd2012-crosses"), (1000000, "kdd2012-crosses")]


def _metrics(export: str, test: float, margin: float, sd: float) -> dict:
    line = f"the {export} baseline was chosen on validation"
    return {"best": {"label": export, "test_logloss": test},
            "origin": {"line": line, "verdict": {"words": "level within noise", "rival": "fm", "margin": margin,
                                                 "in_pair_sd": margin / sd}},
            "baselines": [{"label": export, "val_logloss": 0.30, "test_logloss": test},
                          {"label": "fm", "val_logloss": 0.31, "test_logloss": test + margin}],
            "candidates": [{"label": "rank 0", "val_logloss": 0.32, "test_logloss": 0.33}],
            "bayes_test_logloss": 0.25, "compute": {"fte": {"total": 30.0}}, "cpu_seconds": {"total": 600.0}}


def test_report_has_a_row_per_finished_run_with_its_size(tmp_path):
    v = _verdicts()
    pairs = [(100000, "avazu-pairwise"), (1000000, "avazu-pairwise"), (1000000, "kdd2012-crosses")]
    for (rows, profile), (export, test) in zip(pairs[:2], [("deepfm", 0.28354), ("dcnv2", 0.27001)]):
        folder = v.run_folder(tmp_path, profile, rows)
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps(_metrics(export, test, 0.001, 0.002)))
    text = v.report(tmp_path, pairs, "--rows 100000 --rows 1000000")
    table = [line for line in text.splitlines() if line.startswith("| avazu") or line.startswith("| kdd")]
    assert table == [
        "| avazu-pairwise | 100,000 | deepfm | 0.28354 | deepfm (0.28354) | 0.33000 | 0.2500 | "
        "level within noise vs fm (+0.00100, +0.5 pair sd) | 30.0 | 10.0 |",
        "| avazu-pairwise | 1,000,000 | dcnv2 | 0.27001 | dcnv2 (0.27001) | 0.33000 | 0.2500 | "
        "level within noise vs fm (+0.00100, +0.5 pair sd) | 30.0 | 10.0 |"]  # the unfinished run is left out
    assert "- avazu-pairwise, 1,000,000 rows: the dcnv2 baseline was chosen on validation" in text
    assert "Command: `python benchmarks/verdicts.py --rows 100000 --rows 1000000`" in text
