"""benchmarks/subnet_schedules.py: the report's medians, counts, sign-test p values and FTE on constructed
trainings."""

from __future__ import annotations

import json


def _script():
    from tests.helpers.bench_scripts import load_script

    return load_script("subnet_schedules")


def _truth(results, data, truth, tests, steps):
    folder = results / f"{data}-{truth}" / "study"
    folder.mkdir(parents=True)
    trained = {k: {"test": {"logloss": t}, "val": {"logloss": 0.0, "steps": s}} for k, t, s in zip("abc", tests, steps)}
    (folder / "trained.json").write_text(json.dumps(trained))


def test_the_report_gives_hand_computed_medians_counts_and_p_values(tmp_path):
    s = _script()
    results, out = tmp_path / "results", tmp_path / "out"
    _truth(results, "d", "nasrec", [0.30, 0.40, 0.50], [200, 200, 200])
    _truth(results, "d", "early-stop", [0.31, 0.41, 0.49], [300, 500, 400])
    for key, test, steps in zip("abc", [0.305, 0.405, 0.485], [500, 600, 700]):
        s.save(out / "d" / "anneal", key, {"test": test, "val": 0.0, "steps": steps, "best_step": steps,
                                            "per_epoch": 100})
    text = s.report(results, out, ["runs/d"], ["anneal"], "--data runs/d --variants anneal")
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in text.splitlines() if line.startswith("| `")}
    # early-stop - nasrec: +0.01, +0.01, -0.01 -> median +0.01, better for 1 of 3; p = P(X <= 1 or >= 2) = 1
    assert rows["`nasrec`"][0] == "+0.01000, better for 1/3, p 1.000"
    # anneal - nasrec: +0.005, +0.005, -0.015 -> median +0.005
    assert rows["`nasrec`"][1] == "+0.00500, better for 1/3, p 1.000"
    # anneal - early-stop: -0.005, -0.005, -0.005: better for all 3, p = 2 * 0.5^3
    assert rows["`early-stop`"] == ["-", "-0.00500, better for 3/3, p 0.250"]
    # FTE: mean steps / steps per epoch / 2
    assert "FTE: `nasrec` 1.00, `early-stop` 2.00, `anneal` 3.00" in text


def test_a_subnet_missing_from_a_variant_is_left_out_of_every_column(tmp_path):
    s = _script()
    results, out = tmp_path / "results", tmp_path / "out"
    _truth(results, "d", "nasrec", [0.30, 0.40, 0.50], [200, 200, 200])
    s.save(out / "d" / "anneal", "a", {"test": 0.29, "val": 0.0, "steps": 100, "best_step": 100, "per_epoch": 100})
    text = s.report(results, out, ["runs/d"], ["anneal"], "--data runs/d --variants anneal")
    assert "(1 subnets)" in text and "-0.01000, better for 1/1, p 1.000" in text
