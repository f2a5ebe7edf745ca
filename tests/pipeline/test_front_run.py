"""A run that searches per-table widths with the front objective: front.json lists every trained
model with its embedding bytes, marks exactly the non-dominated ones, and `ctrnas export --pick` writes any
of them from the weights the final stage kept, scoring the validation rows as the final stage did."""

import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import log_loss

from ctrnas import api
from ctrnas.errors import CtrnasError
from ctrnas.space import Arch
from ctrnas.supernet import embedding_bytes

SETTINGS = ("space.table_dims=[0, 4, 8, 16]", "search.evolution.objective=front", "final.baselines=[lr, dlrm]",
            "final.emb_dims=[4, 16]")


@pytest.fixture(scope="module")
def run(tests_recipe_path, data_dir, tests_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("front") / "run"
    # no model/ export: `ctrnas export --pick` writes the models these tests read, from the kept weights
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={out}", *SETTINGS,
                             "final.export=false")
    api.run(recipe, progress=False, echo=lambda *a, **k: None)
    return out, recipe, json.loads((out / "front.json").read_text())


def test_front_marks_exactly_the_non_dominated_models(run, tests_data):
    out, recipe, front = run
    rows = front["models"]
    assert {r["kind"] for r in rows} == {"candidate", "baseline"}
    for r in rows:
        if r["kind"] == "candidate":
            arch = Arch.from_json(r["arch"])
            # bytes of the trained tables equal the analytic count (rows x per-table widths x 4)
            assert r["embedding_bytes"] == embedding_bytes(tests_data.schema, arch, 16, recipe.final_train.row_cap)
            assert r["dropped_fields"] == [n for n in tests_data.schema.sparse_names if arch.table_width(n, 16) == 0]

    def dominated(r):
        return any(o is not r and o["val_logloss"] <= r["val_logloss"] and o["embedding_bytes"] <= r["embedding_bytes"]
                   and (o["val_logloss"] < r["val_logloss"] or o["embedding_bytes"] < r["embedding_bytes"])
                   for o in rows)

    def repeat(i):  # the same point as an earlier model (LR at another width): only the first is listed
        return any((o["val_logloss"], o["embedding_bytes"]) == (rows[i]["val_logloss"], rows[i]["embedding_bytes"])
                   for o in rows[:i])

    assert [r["on_front"] for r in rows] == [not dominated(r) and not repeat(i) for i, r in enumerate(rows)]
    picks = sorted((r for r in rows if r["on_front"]), key=lambda r: r["pick"])
    assert [r["pick"] for r in picks] == list(range(len(picks)))
    assert [r["embedding_bytes"] for r in picks] == sorted(r["embedding_bytes"] for r in picks)
    assert any(r["dropped_fields"] for r in rows if r["kind"] == "candidate")  # the widths were searched
    assert (out / "plots" / "front.png").stat().st_size > 0
    assert "## Front" in (out / "summary.md").read_text()


def test_every_model_of_the_run_can_be_picked(run, tests_data, data_dir, tmp_path):
    out, recipe, front = run
    rows = front["models"]
    # each front model, and (after marking it so) a candidate that is off the front, exports and scores the
    # validation rows with the log loss the final stage recorded
    cand = next(r for r in rows if r["kind"] == "candidate")
    if not cand["on_front"]:
        cand.update(on_front=True, pick=99)
        (out / "front.json").write_text(json.dumps(front))
    for r in [r for r in rows if r["on_front"]]:
        folder = tmp_path / f"pick{r['pick']}"
        card = api.export_pick(out, r["pick"], folder)
        if r["kind"] == "candidate":
            assert card["arch_key"] == r["arch_key"] and card["embedding_bytes"] == r["embedding_bytes"]
        preds = tmp_path / f"p{r['pick']}.parquet"
        api.predict(folder, data_dir, preds, split="val", progress=False)
        t = pq.read_table(preds)
        n = recipe.final.val_rows
        p = np.asarray(t["probability"].to_pylist()[:n], dtype=np.float64)
        y = np.asarray(t["label"].to_pylist()[:n], dtype=np.float64)
        assert math.isclose(log_loss(y, p, labels=[0, 1]), r["val_logloss"], abs_tol=2e-5)


def test_pick_errors_are_one_line(run, tmp_path):
    out, _, front = run
    with pytest.raises(CtrnasError, match="no model 77 on the front"):
        api.export_pick(out, 77, tmp_path / "x")
    with pytest.raises(CtrnasError, match="front.json"):
        api.export_pick(tmp_path, 0, tmp_path / "y")


def test_front_top_takes_the_front_spread_then_fills(monkeypatch):
    """Ranked best first with bytes 9, 9, 5, 7, 3, 1: the front is those with fewer bytes than every better one
    (9, 5, 3, 1); k = 3 keeps both ends and one between (9, 3, 1); k = 6 fills with the others."""
    from types import SimpleNamespace as NS

    import ctrnas.pipeline.fitness.build as build
    from ctrnas.pipeline.final.stage import front_top

    sizes = [9, 9, 5, 7, 3, 1]
    recs = [NS(arch={"i": i}, key=str(i)) for i in range(len(sizes))]
    monkeypatch.setattr(build, "bytes_counter", lambda recipe, data: lambda arch: sizes[arch.i])
    monkeypatch.setattr(Arch, "from_json", staticmethod(lambda d: NS(**d)))
    search = NS(result=NS(top_k=lambda k: recs[:k]), history=recs)
    keys = lambda out: [r.key for r in out]  # noqa: E731
    assert keys(front_top(None, None, search, 4)) == ["0", "2", "4", "5"]
    assert keys(front_top(None, None, search, 3)) == ["0", "4", "5"]  # positions 0, 1.5 -> 2, 3 of the front
    assert keys(front_top(None, None, search, 6)) == ["0", "2", "4", "5", "1", "3"]
    assert keys(front_top(None, None, search, 1)) == ["0"]


def test_archs_choosing_their_common_width_export_from_the_front(tests_recipe_path, data_dir, tests_data, tmp_path):
    """`emb_dims` beside `table_dims` (short rungs train each arch at its own width): a model of the front
    whose ops run at its own width exports and scores validation as the final stage did."""
    out = tmp_path / "run"
    recipe = api.load_recipe(
        tests_recipe_path, f"data.path={data_dir}", f"output={out}", *SETTINGS[:2], "space.emb_dims=[8, 16]",
        "final.baselines=[dlrm]", "final.emb_dims=[]", "search.strategy=multifidelity",
        "search.multifidelity.rungs=[{fitness: short, budget: 1024, keep: 0.5}, {fitness: short, budget: 2048}]",
        "search.predictor.pool=3", "search.predictor.min_train=4", "search.predictor.proxies=[naswot]",
        "final.export=false")  # `ctrnas export --pick` writes the model this test reads
    api.run(recipe, progress=False, echo=lambda *a, **k: None)
    # the predictor read each field's width (and a proxy scored on the supernet at the run's width)
    importances = json.loads((out / "metrics.json").read_text())["search"]["predictor"]["importances"]
    assert {f"width {n}" for n in tests_data.schema.sparse_names} <= set(importances) and "naswot" in importances
    rows = json.loads((out / "front.json").read_text())["models"]
    cands = [r for r in rows if r["kind"] == "candidate"]
    assert {r["arch"].get("emb_dim", 16) for r in cands} <= {8, 16}
    for r in cands:  # every table fits its arch's common width
        common = r["arch"].get("emb_dim", 16)
        assert all(w <= common for w in r["arch"].get("table_dims", {}).values())
    r = next(r for r in rows if r["on_front"] and r["kind"] == "candidate")  # the seeded run has one
    card = api.export_pick(out, r["pick"], tmp_path / "m")
    assert card["emb_dim"] == r["arch"].get("emb_dim", 16) and card["embedding_bytes"] == r["embedding_bytes"]
    api.predict(tmp_path / "m", data_dir, tmp_path / "p.parquet", split="val", progress=False)
    t = pq.read_table(tmp_path / "p.parquet")
    n = recipe.final.val_rows
    p = np.asarray(t["probability"].to_pylist()[:n], dtype=np.float64)
    y = np.asarray(t["label"].to_pylist()[:n], dtype=np.float64)
    assert math.isclose(log_loss(y, p, labels=[0, 1]), r["val_logloss"], abs_tol=2e-5)


def test_a_widths_only_search_keeps_the_seeds_blocks(tests_recipe_path, data_dir, tests_data, tmp_path):
    """`search.evolution.widths_only` with an arch file as the only seed: every model the run trained or
    scored has the file's blocks, and the widths were searched (models of the front differ in bytes)."""
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", *SETTINGS[:2], "final.baselines=[]")
    seed = recipe.search_space(tests_data.schema).sample(np.random.default_rng(3))
    (tmp_path / "seed.json").write_text(json.dumps(seed.to_json()))
    out = tmp_path / "run"
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={out}", *SETTINGS[:2],
                             "final.baselines=[]", f"search.seeds=[{tmp_path / 'seed.json'}]",
                             "search.evolution.widths_only=true", "final.export=false")  # the models' list is read
    api.run(recipe, progress=False, echo=lambda *a, **k: None)
    archs = [Arch.from_json(r["arch"]) for r in json.loads((out / "search" / "history.json").read_text())]
    assert len(archs) == 6 + 2 * 3
    assert all(a.blocks == seed.blocks for a in archs)
    assert len({a.key() for a in archs}) == len(archs)
    rows = json.loads((out / "front.json").read_text())["models"]
    assert len({r["embedding_bytes"] for r in rows}) > 1
    assert seed.key() in {r["arch_key"] for r in rows}  # the final stage retrained the seed itself


def test_a_widths_only_final_stage_retrains_the_seeds_it_lacks():
    """The front's picks lack the seed (a short rung dropped it): the final stage retrains it as well, once;
    a search that is not widths-only retrains its picks alone."""
    from types import SimpleNamespace as NS

    from ctrnas.pipeline.final.stage import with_seeds
    from ctrnas.space.baselines import baseline_arch

    seed = baseline_arch("dlrm-like").key()
    recs = [NS(key=k) for k in ("a", "b", seed, "c")]
    search = NS(result=NS(top_k=lambda k: recs[:k]), history=recs)

    def recipe(widths_only):
        return NS(search=NS(evolution=NS(widths_only=widths_only)), seed_names=("dlrm-like", "dcnv2-like"))

    assert [r.key for r in with_seeds(recipe(True), search, recs[:2])] == ["a", "b", seed]
    assert [r.key for r in with_seeds(recipe(True), search, recs[1:3])] == ["b", seed]
    assert [r.key for r in with_seeds(recipe(False), search, recs[:2])] == ["a", "b"]
