"""The demo recipe runs end to end on a small synthetic set; re-runs resume; compare, study and CLI work."""

import argparse
import csv
import json

import numpy as np
import pytest
import torch
from scipy import stats

from ctrnas import api
from ctrnas.recipe import load_recipe


@pytest.fixture(scope="module")
def demo(tests_data, tests_recipe_path, data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "demo"
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={out}")
    return recipe, api.run(recipe, progress=False, echo=None)


def test_demo_recipe_runs_end_to_end_on_a_small_synthetic_set(demo):
    recipe, result = demo
    out = result.output_dir
    for f in ("summary.md", "metrics.json", "best_arch.json", "recipe.yaml", "environment.json",
              "search/history.csv", "search/history.json", "final/models.csv", "model/model_card.json",
              "plots/best_so_far.png", "plots/score_vs_test.png", "plots/pareto.png"):
        assert (out / f).is_file() and (out / f).stat().st_size > 0, f
    evo = recipe.search.evolution
    with open(out / "search/history.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == evo.population_size + evo.generations * evo.children_per_generation
    assert all(r["term_zico"] != "" for r in rows)  # SiGeo's terms are logged per candidate
    # the best is the retrained candidate with the lowest validation log loss
    with open(out / "final/models.csv") as fh:
        models = [r for r in csv.DictReader(fh) if r["arch_key"]]
    assert len(models) == recipe.top_k
    best = min(models, key=lambda r: float(r["val_logloss"]))
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["best"]["arch_key"] == best["arch_key"] == result.final.best.arch.key()
    assert json.loads((out / "best_arch.json").read_text()) == result.final.best.arch.to_json()
    assert [b["label"] for b in metrics["baselines"]] == ["lr"]
    assert load_recipe(out / "recipe.yaml") == recipe
    assert "torch" in json.loads((out / "environment.json").read_text())["versions"]


def test_exported_model_reproduces_the_reported_test_log_loss(demo, tests_data):
    from ctrnas.pipeline.data import load_rows
    from ctrnas.supernet import load_exported

    recipe, result = demo
    model = load_exported(result.output_dir / "model").eval()
    rows = load_rows(tests_data, "test", 0, recipe.final.test_rows)
    d, k, y = rows.batch(0, len(rows))
    with torch.no_grad():
        z = model(d, k).double().numpy()
    yy = y.double().numpy()
    logloss = float(np.mean(np.logaddexp(0, z) - yy * z))
    assert logloss == pytest.approx(result.final.best.test["logloss"], rel=1e-6)


def test_rerun_reuses_data_and_warmup_and_resumes_the_finished_search(demo):
    recipe, first = demo
    again = api.run(recipe, progress=False, echo=None)
    assert again.data.reused and again.warmup.summary.get("reused")
    assert again.search.history.same_as(first.search.history)
    assert again.final.best.arch.key() == first.final.best.arch.key()


def test_cli_run_applies_set_overrides(tests_recipe_path, data_dir, tests_data, tmp_path):
    from ctrnas.cli import run as commands

    parser = argparse.ArgumentParser()
    commands.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["run", str(tests_recipe_path), "--no-progress", "--set", f"data.path={data_dir}",
                              "--set", f"output={tmp_path / 'cli'}", "--set", "search.strategy=random",
                              "--set", "search.random.budget=5", "--set", "final.baselines=[]",
                              "--set", "proxy.name=params", "--set", "search.constraints.max_params=6000",
                              "--set", "final.export=false"])  # the demo run checks the export
    assert args.func(args) == 0
    history = json.loads((tmp_path / "cli/search/history.json").read_text())
    assert len(history) == 5
    assert all(h["meta"]["proxy"] == "params" for h in history)
    # the parameter budget holds for every candidate, counted on the exported module itself
    from ctrnas.pipeline.stages import new_supernet
    from ctrnas.space import Arch
    from ctrnas.supernet import export

    recipe = load_recipe(tmp_path / "cli/recipe.yaml")
    supernet = new_supernet(recipe, tests_data)
    for h in history:
        net = export(supernet, Arch.from_json(h["arch"])).net
        assert sum(p.numel() for p in net.parameters()) == h["params"] <= 6000


def test_compare_runs_three_settings_on_the_same_data(tests_recipe_path, data_dir, tests_data, tmp_path):
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path / 'cmp'}",
                             "search.evolution.generations=1", "final.baselines=[]", "search.top_k=1",
                             "final.export=false")  # no torch.export per setting: the demo run checks the export
    result = api.compare(recipe, progress=False, echo=None)
    assert [r["setting"] for r in result.table] == ["zero-shot", "sub-one-shot-0.01", "one-shot"]
    assert [r["fitness"] for r in result.table] == ["sigeo", "sigeo", "oneshot"]
    one = result.runs["one-shot"]
    assert not one.search.maximize
    assert all(r.value == r.terms["val_logloss"] for r in one.search.history)
    assert all(r["warmup_s"] >= 0 and r["search_s"] > 0 and np.isfinite(r["test_logloss"]) for r in result.table)
    assert result.runs["zero-shot"].warmup.steps == 0 and one.warmup.rows == tests_data.meta["splits"]["train"]["rows"]
    assert (result.output_dir / "compare.md").read_text().count("|") > 20


def test_final_stage_in_worker_processes_equals_the_serial_run(demo, tmp_path):
    import dataclasses

    recipe, result = demo
    par = dataclasses.replace(recipe, final=dataclasses.replace(recipe.final, workers=2))
    final = api.train_final(par, result.data, result.search, out_dir=tmp_path, progress=False)
    serial = result.final
    assert [c.arch.key() for c in final.candidates] == [c.arch.key() for c in serial.candidates]
    for a, b in zip(final.candidates + final.baselines, serial.candidates + serial.baselines):
        assert (a.label, a.val, a.test, a.params) == (b.label, b.val, b.test, b.params)
    assert final.best.arch.key() == serial.best.arch.key()
    # the exported model carries the trained weights of the serial run's best
    got, want = final.model.state_dict(), serial.model.state_dict()
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    assert final.model.stem.sparse_gradients == serial.model.stem.sparse_gradients  # the trainer's table setting
    assert (tmp_path / "model").is_dir()
    # a candidate's params are the trained model's own (not the supernet's count with its LayerNorms)
    dense = sum(p.numel() for n, p in serial.model.named_parameters() if "embedding_bags" not in n)
    assert serial.best.params == final.best.params == dense


def test_final_workers_that_do_not_fit_train_in_this_process_or_stop_in_one_line(demo, tmp_path, monkeypatch,
                                                                                capsys):
    import dataclasses

    from ctrnas.errors import NotEnoughMemory
    from ctrnas.pipeline.final import memory as final_memory

    recipe, result = demo
    monkeypatch.setattr(final_memory, "WORKER_BYTES", 1 << 50)  # no worker process fits; this process does
    # no torch.export of the model here: the numbers are the check (the demo run checks the export)
    par = dataclasses.replace(recipe, final=dataclasses.replace(recipe.final, workers=2, export=False))
    final = api.train_final(par, result.data, result.search, out_dir=tmp_path / "a", progress=False)
    assert "2 training workers would need" in capsys.readouterr().err
    for a, b in zip(final.candidates + final.baselines, result.final.candidates + result.final.baselines):
        assert (a.label, a.val, a.test) == (b.label, b.val, b.test)
    tiny = dataclasses.replace(recipe, final=dataclasses.replace(recipe.final, memory_limit_gb=1e-6))
    with pytest.raises(NotEnoughMemory, match="training one model needs"):
        api.train_final(tiny, result.data, result.search, out_dir=tmp_path / "b", progress=False)
    assert not (tmp_path / "b" / "model").exists()


def test_ranking_study_correlations_match_scipy_on_its_own_scores(tests_recipe_path, data_dir, tests_data, tmp_path):
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path / 'study'}")
    printed = []
    result = api.ranking_study(recipe, archs=5, fractions=(0.0, 0.05), proxies=("params", "oneshot"),
                               progress=False, echo=printed.append)
    assert len(result.archs) == 5 and len({a.key() for a in result.archs}) == 5
    with open(result.output_dir / "scores.csv") as fh:
        rows = list(csv.DictReader(fh))
    loss = np.array([float(r["test_logloss"]) for r in rows])
    for c in result.correlations:
        s = np.array([float(r[f"{c['proxy']}@{'zero-shot' if c['fraction'] == 0 else 'sub-one-shot-0.05'}"])
                      for r in rows])
        assert c["kendall"] == pytest.approx(stats.kendalltau(s, -loss).statistic, nan_ok=True)
        assert c["spearman"] == pytest.approx(stats.spearmanr(s, -loss).statistic, nan_ok=True)
    assert (result.output_dir / "plots" / "params-0.png").is_file()
    # the attribution table: architecture features (features.csv) against the trained loss, as scipy has it
    with open(result.output_dir / "features.csv") as fh:
        feats = list(csv.DictReader(fh))
    assert [f["arch_key"] for f in feats] == [r["arch_key"] for r in rows]
    on_loss = [f for f in result.features if f["target"] == "test logloss"]
    assert on_loss
    for f in on_loss:
        col = np.array([float(r[f["feature"]]) for r in feats])
        assert f["spearman"] == pytest.approx(stats.spearmanr(col, loss).statistic)
    summary = (result.output_dir / "summary.md").read_text()
    assert "| feature | test logloss (p) |" in summary and "params@zero-shot" in summary
    # the console shows the scores at the recipe's own warm-up (0.05) only
    header = next(line for line in printed[-1].splitlines() if line.startswith("| feature |"))
    assert header == "| feature | test logloss (p) | params@sub-one-shot-0.05 | oneshot@sub-one-shot-0.05 |"


def test_study_trains_in_worker_processes_with_the_serial_results(tests_recipe_path, data_dir, tests_data, tmp_path):
    from ctrnas.pipeline.stages import new_supernet
    from ctrnas.pipeline.study import train_all, sample_archs

    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path}", "final.protocol=early-stop")
    archs = sample_archs(recipe, 3)
    serial = train_all(recipe, tests_data, archs, new_supernet(recipe, tests_data), tmp_path / "a.json", False)
    parallel = train_all(recipe, tests_data, archs, new_supernet(recipe, tests_data), tmp_path / "b.json", False,
                          workers=2)
    assert set(serial) == set(parallel) == {a.key() for a in archs}
    # the truth the proxies are ranked against is the final stage's protocol: each subnet trained to its best
    for r in serial.values():
        assert r["how"]["train"]["schedule"] == "plateau" and r["how"]["train"]["early_stop_patience"] == 4
        assert r["how"]["train"]["restore_best"] and r["val"]["best_step"] <= r["val"]["steps"]
    for k in serial:
        assert parallel[k]["val"] == serial[k]["val"] and parallel[k]["test"] == serial[k]["test"]
    assert json.loads((tmp_path / "b.json").read_text()).keys() == serial.keys()  # every model cached
    # a second call finds everything cached and trains nothing
    again = train_all(recipe, tests_data, archs, new_supernet(recipe, tests_data), tmp_path / "b.json", False,
                       workers=2)
    assert again == parallel


def test_cli_prints_a_recipe_error_in_one_line(tests_recipe_path, capsys):
    import ctrnas.cli as cli

    code = cli.main(["run", str(tests_recipe_path), "--set", "warmup.fraction=lots"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert "warmup.fraction" in err[0] and "override 'warmup.fraction=lots'" in err[0]


def test_gap_closed_is_the_share_of_the_lr_to_bayes_gap():
    from ctrnas.pipeline.report import gap_closed

    assert gap_closed(0.45, lr=0.47, bayes=0.43) == pytest.approx(0.5)
    assert gap_closed(0.43, lr=0.47, bayes=0.43) == pytest.approx(1.0)
    assert gap_closed(0.48, lr=0.47, bayes=0.43) == pytest.approx(-0.25)
    assert gap_closed(0.45, lr=None, bayes=0.43) is None and gap_closed(0.45, lr=0.43, bayes=0.43) is None


def test_stage_clock_counts_the_cpu_of_joined_worker_processes():
    import subprocess
    import sys

    from ctrnas.pipeline.run import StageClock

    clock = StageClock()
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"],
                   check=True)
    clock.lap("work", 0.0)
    assert clock.cpu["work"] >= 0.45  # the child's busy loop, not this process's idle wait


def test_study_cache_reuses_only_models_trained_the_same_way(tests_recipe_path, data_dir, tests_data, tmp_path):
    from ctrnas.pipeline.stages import new_supernet
    from ctrnas.pipeline.study import train_all, sample_archs

    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path}")
    a = sample_archs(recipe, 1)
    cache = tmp_path / "t.json"
    first = train_all(recipe, tests_data, a, new_supernet(recipe, tests_data), cache, False)
    entry = first[a[0].key()]
    assert entry["how"]["embedding_init"] == "torchrec"
    # an entry from before the embedding_init key was trained with NASRec's init: reused for `nasrec` only
    old = {**entry, "how": {k: v for k, v in entry["how"].items() if k != "embedding_init"}, "test": {"logloss": -1.0}}
    cache.write_text(json.dumps({a[0].key(): old}))
    nasrec = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path}",
                             "final.embedding_init=nasrec")
    kept = train_all(nasrec, tests_data, a, new_supernet(nasrec, tests_data), cache, False)
    assert kept[a[0].key()]["test"]["logloss"] == -1.0  # not retrained
    redone = train_all(recipe, tests_data, a, new_supernet(recipe, tests_data), cache, False)
    assert redone[a[0].key()]["test"] == entry["test"]  # retrained with the torchrec init, same numbers as before
    # likewise `dense_init` (torchrec by default): an entry without it was trained with NASRec's dense init,
    # reused for `nasrec` only
    assert entry["how"]["dense_init"] == "torchrec"
    old = {**entry, "how": {k: v for k, v in entry["how"].items() if k != "dense_init"}, "test": {"logloss": -1.0}}
    cache.write_text(json.dumps({a[0].key(): old}))
    nasrec_dense = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path}",
                                   "final.dense_init=nasrec")
    assert train_all(nasrec_dense, tests_data, a, new_supernet(nasrec_dense, tests_data), cache, False)[
        a[0].key()]["test"]["logloss"] == -1.0
    other = train_all(recipe, tests_data, a, new_supernet(recipe, tests_data), cache, False)[a[0].key()]
    assert other["how"]["dense_init"] == "torchrec" and other["test"] == entry["test"]
