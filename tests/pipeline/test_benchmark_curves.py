"""benchmarks/curves.py: a curve read in segments ends where one uninterrupted training ends; a retrained
candidate reproduces the final stage's numbers; the report's taus and extrapolation by hand."""

import json
import math

import pytest

from ctrnas import api


def _bench():
    from tests.helpers.bench_scripts import load_script

    return load_script("curves")


@pytest.fixture(scope="module")
def run(tests_recipe_path, data_dir, tests_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("curves") / "run"
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={out}", "final.baselines=[]",
                             "final.export=false")  # its tests retrain from the run's records, not its model
    api.run(recipe, progress=False, echo=lambda *a, **k: None)
    return out


def test_a_curve_read_in_segments_ends_as_one_training(run, tmp_path):
    bench = _bench()
    from ctrnas.pipeline.fitness.scratch import final_template
    from ctrnas.space import Arch
    from ctrnas.train.batches import dataset_batches

    recipe, data = bench._setup(run, None)
    template = final_template(recipe, data, None)
    val = dataset_batches(data.path, "val", recipe.final_train.eval_batch_size, limit=recipe.oneshot.eval_rows)
    arch = Arch.from_json(bench.distinct(run)[0]["arch"])
    pieces = bench.curve(recipe, data, template, arch, [0.3, 0.6, 1.0], val)
    whole = bench.curve(recipe, data, template, arch, [1.0], val)
    assert [p[0] for p in pieces] == [0.3, 0.6, 1.0] and pieces[0][1] < pieces[1][1] < pieces[2][1]
    assert pieces[-1][1:] == whole[0][1:]  # same last step, same loss to the bit

    out = tmp_path / "c.json"
    assert bench.main([str(run), "--out", str(out), "--shares", "0.5,1", "--max-archs", "3"]) == 0
    cached = json.loads(out.read_text())
    assert list(cached) == [r["key"] for r in bench.distinct(run)[:3]]


def test_retrain_reproduces_the_final_stage(run, tmp_path):
    bench = _bench()
    best = json.loads((run / "metrics.json").read_text())["best"]
    out = tmp_path / "r.json"
    assert bench.main([str(run), "--out", str(out), "--retrain", best["arch_key"][:8], "--seeds", "0"]) == 0
    got = json.loads(out.read_text())
    [(tag, r)] = got.items()
    assert tag.endswith("@0") and best["arch_key"] in tag
    assert math.isclose(r["val"], best["val_logloss"], rel_tol=1e-6)
    assert math.isclose(r["test"], best["test_logloss"], rel_tol=1e-6)
    with pytest.raises(SystemExit, match="no arch"):
        bench.main([str(run), "--out", str(out), "--retrain", "zzzz"])


def test_report_taus_and_extrapolation_by_hand():
    bench = _bench()
    # loss at 0.5 orders (b, a, c), at the end (a, b, c): one discordant pair of three, tau (2 - 1) / 3
    curves = {k: {"curve": [[0.5, 1, v0], [1.0, 2, v1]]}
              for k, v0, v1 in (("a", 0.3, 0.2), ("b", 0.2, 0.25), ("c", 0.4, 0.3))}
    lines = bench.report(curves)
    assert lines[1] == "  loss at 0.5: +0.33"
    a, b = 0.1, 0.05  # an exact power law L = a + b t^-0.5 is extrapolated to its a
    points = {t: a + b * t ** -0.5 for t in (0.1, 0.4)}
    assert bench.extrapolate(points, 0.1, 0.4, 0.5) == pytest.approx(a)
