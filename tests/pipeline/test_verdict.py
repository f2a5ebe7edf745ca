"""The verdict: its words on constructed numbers, and the final stage training the export and its rival at a
second training seed, the numbers of which equal those trainings run on their own."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from ctrnas.pipeline.final import final_stage
from ctrnas.pipeline.origin import judge_seeds, verdict_line, words
from ctrnas.recipe import load_recipe
from tests.helpers.chains import chain_arch, search_of


def test_words_follow_the_margin_in_pair_sd():
    assert words(-0.0021, 0.001) == "better"
    assert words(-0.0019, 0.001) == "level within noise"
    assert words(0.0019, 0.001) == "level within noise"
    assert words(0.0021, 0.001) == "worse"
    assert words(math.nan, 0.001) == "not measured"


def test_judge_seeds_against_a_hand_computation():
    a, b = [0.430, 0.434], [0.440, 0.441]
    v = judge_seeds(a, b)
    pair = math.sqrt(statistics.variance(a) + statistics.variance(b))  # sqrt(8e-6 + 5e-7)
    assert v["margin"] == pytest.approx(0.432 - 0.4405) and v["pair_sd"] == pytest.approx(pair)
    assert v["in_pair_sd"] == pytest.approx(-0.0085 / pair) and v["words"] == "better"
    assert judge_seeds([0.43], [0.44])["words"] == "not measured"  # one seed: no noise to judge against
    line = verdict_line({**v, "rival": "dcnv2"})
    assert line == f"verdict over 2 training seeds: better than dcnv2 (test -0.00850, {-0.0085 / pair:+.1f} pair sd " \
                   f"of {pair:.5f})"


def test_the_final_stage_trains_the_export_and_its_rival_at_a_second_seed(tests_data, tests_recipe_path, data_dir,
                                                                         tmp_path):
    # the tests recipe's fixed 2 epochs (the verdict does not depend on the protocol); at 2048 training rows LR
    # is exported, so its rival is the best other model: the candidate
    recipe = load_recipe(tests_recipe_path, [f"data.path={data_dir}", "space.num_blocks=3",
                                             "space.dense_ops=[fc,dot,gating,sum]", "final.top_k=1",
                                             "final.baselines=[lr]", "final.choose_from=all", "final.verdict_seeds=2"])
    search = search_of([chain_arch("fc", 3, fm=False)])
    final = final_stage(recipe, tests_data, search, None, tmp_path, progress=False)
    v = final.verdict
    (cand,), (lr,) = final.candidates, final.baselines
    export, rival = (cand, lr) if final.best is cand else (lr, cand)
    assert cand.status == lr.status == "ok" and final.best is export
    assert v["seeds"] == 2 and v["export"] == export.label and v["rival"] == rival.label
    # seed +0 is the stage's own training; seed +1 is a training of the same job at seed 1 (stored as its result)
    assert v["tests"]["export"][0] == export.test["logloss"] and v["tests"]["rival"][0] == rival.test["logloss"]
    stored = sorted((tmp_path / "verdict" / "seed+1").rglob("result.json"))
    assert len(stored) == 2
    seconds = {json.loads(p.read_text())["test"]["logloss"] for p in stored}
    assert seconds == {v["tests"]["export"][1], v["tests"]["rival"][1]}
    assert v["tests"]["export"][1] != v["tests"]["export"][0]  # another seed, other numbers
    assert v == {**judge_seeds(v["tests"]["export"], v["tests"]["rival"]), **{k: v[k] for k in
                                                                              ("export", "rival", "tests", "samples")}}
    assert final.origin["verdict"] == v and "verdict over 2 training seeds" in final.origin["line"]
    card = json.loads((tmp_path / "model" / "model_card.json").read_text())
    assert "verdict over 2 training seeds" in json.dumps(card)
    # a re-run reads the verdict's trainings back instead of training them again
    again = final_stage(recipe, tests_data, search, None, tmp_path, progress=False)
    assert again.verdict["tests"] == v["tests"]
