"""benchmarks/protocol.py: the default against the better other protocol, in pair sd, and its cost in FTE."""

import math

import pytest


def _protocol():
    from tests.helpers.bench_scripts import load_script

    return load_script("protocol")


def _runs(tests, epochs):
    return [{"test": t, "val": None, "epochs": e, "best_epoch": e, "first_val": None} for t, e in zip(tests, epochs)]


def _cached(protocol, name: str, seed: int, test: float) -> str:
    """A cache file's text: one training of `name` at `seed`, with the settings it would train with today."""
    import dataclasses
    import json

    cfg = dataclasses.replace(protocol.protocols(name), seed=seed)
    return json.dumps({**_runs([test], [2])[0], "settings": protocol.settings(cfg)})


def test_verdict_reads_the_better_other_by_mean_and_the_pair_sd():
    v = _protocol().verdict({"nasrec": (0.300, 0.003, 2.0), "cosine-10": (0.302, 0.001, 6.0),
                             "default": (0.304, 0.004, 9.0)})
    assert v["other"] == "nasrec"  # the lower mean, though cosine-10's sd is smaller
    assert v["z"] == pytest.approx(0.004 / 0.005)  # hypot(0.004, 0.003) = 0.005
    assert v["met"] and v["fte"] == 4.5 and v["other_fte"] == 1.0


def test_verdict_fails_beyond_one_pair_sd_and_without_noise():
    protocol = _protocol()
    v = protocol.verdict({"cosine-10": (0.300, 0.003, 4.0), "default": (0.306, 0.004, 4.0)})
    assert v["other"] == "cosine-10" and v["z"] == pytest.approx(1.2) and not v["met"]
    flat = protocol.verdict({"nasrec": (0.300, 0.0, 2.0), "default": (0.300, 0.0, 2.0)})
    assert math.isnan(flat["z"]) and not flat["met"]  # no noise to judge by: not counted as met
    assert protocol.verdict({"default": (0.3, 0.001, 2.0)}) is None
    assert protocol.verdict({"nasrec": (0.3, 0.001, 2.0)}) is None


def test_report_counts_the_goal_per_data_and_in_all():
    protocol = _protocol()
    # seeds 0.300/0.302 (sd 0.00141) and 0.303/0.305: +1.5 pair sd, not met; the second data meets it
    results = {"a-70k": {"dlrm": {"nasrec": _runs([0.300, 0.302], [2, 2]),
                                  "default": _runs([0.303, 0.305], [5, 7])}},
               "b-70k": {"fm": {"cosine-10": _runs([0.31, 0.32], [4, 6]), "default": _runs([0.31, 0.31], [3, 3])}}}
    text = protocol.report(results, "--data a-70k --data b-70k")
    assert "| +1.5 vs nasrec (not met) | 3.00 (1.00) |" in text
    assert "| -0.7 vs cosine-10 (met) | 1.50 (2.50) |" in text  # (0.31 - 0.315) / hypot(0, 0.00707)
    assert "Goal met for 0 of 1 models; the default trains 3.00 FTE on average, the better other 1.00." in text
    assert "Goal met for 1 of 2 model-and-data pairs." in text


def test_plateau_is_the_default_without_the_moving_average():
    import dataclasses

    from ctrnas.train.config import EMA

    protocol = _protocol()
    default, plateau = protocol.protocols("default"), protocol.protocols("plateau")
    assert default.ema == EMA > 0 and plateau == dataclasses.replace(default, ema=0.0)
    assert protocol.protocols("plateau@3").lr == pytest.approx(3 * plateau.lr) and protocol.protocols("adam").ema == 0


def test_columns_read_fixed_then_old_early_stopping_then_plateau_then_default():
    names = ["plateau@3", "nasrec", "default", "cosine-10", "plateau", "adam"]
    assert sorted(names, key=_protocol().column_order) == ["nasrec", "cosine-10", "plateau", "plateau@3", "default",
                                                            "adam"]


def test_optimizer_table_shows_only_the_models_trained_with_adam():
    protocol = _protocol()
    results = {"a-300k": {"lr": {"plateau": _runs([0.45, 0.46], [4, 4])},
                          "dlrm": {"plateau": _runs([0.43, 0.44], [4, 4]), "adam": _runs([0.44, 0.45], [3, 3])}},
               "b-70k": {"fm": {"plateau": _runs([0.30, 0.31], [5, 5])}}}
    lines = protocol.optimizer_report(results)
    assert "**a-300k, optimizers**" in lines and not any("b-70k" in x for x in lines)
    rows = [x for x in lines if x.startswith("| ") and not x.startswith("| model")]
    assert [r.split(" | ")[:2] for r in rows] == [["| dlrm", "adagrad"], ["| dlrm", "adam"]]
    assert "| +1.0 |" in rows[1]  # (0.445 - 0.435) / hypot(0.00707, 0.00707)


def test_main_reads_the_caches_and_counts_a_repeated_protocol_once(tmp_path):
    import json

    protocol = _protocol()
    out = tmp_path / "out"
    for p, tests in {"nasrec": (0.300, 0.302), "default": (0.299, 0.301)}.items():
        for seed, t in enumerate(tests):
            (out / "d-70k").mkdir(parents=True, exist_ok=True)
            (out / "d-70k" / f"fm-{p}-{seed}.json").write_text(_cached(protocol, p, seed, t))
    section = tmp_path / "protocol.md"
    protocol.main(["--data", "x/d-70k:fm:nasrec,default", "--data", "x/d-70k:fm:default", "--out", str(out),
                   "--section", str(section)])
    text = section.read_text()
    # two seeds each (a repeat would make the default's four): 0.300 (0.00141) against 0.301 (0.00141)
    assert "| 0.30100 (0.00141) [2.0 (2.0)] | 0.30000 (0.00141) [2.0 (2.0)] | -0.5 vs nasrec (met) |" in text


def test_main_lists_a_folders_models_in_the_usual_order_across_entries(tmp_path):
    import json

    protocol = _protocol()
    out = tmp_path / "out" / "d-1m"
    out.mkdir(parents=True)
    for model in ("lr", "dcnv2", "fm"):
        for p in ("nasrec", "default"):
            for seed, t in enumerate((0.300, 0.302)):
                (out / f"{model}-{p}-{seed}.json").write_text(_cached(protocol, p, seed, t))
    section = tmp_path / "protocol.md"
    protocol.main(["--data", "x/d-1m:lr", "--data", "x/d-1m:dcnv2", "--data", "x/d-1m:fm",
                   "--protocols", "nasrec,default", "--out", str(tmp_path / "out"), "--section", str(section)])
    rows = [x.split(" | ")[0] for x in section.read_text().splitlines() if x.startswith("| ") and "model" not in x]
    assert rows == ["| lr", "| fm", "| dcnv2"]  # as in MODELS, not as the entries named them
