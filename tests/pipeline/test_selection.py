"""Final-stage numerical safety: diverged or useless candidates are never reported, the baseline fallback,
strict metrics JSON, and `final.layernorm: auto` by product degree."""

from __future__ import annotations

import json
import math

import pytest

from ctrnas.pipeline.final import final_stage
from ctrnas.train.normalise import product_degree
from ctrnas.pipeline.report import write_report
from ctrnas.pipeline.results import WarmupResult
from ctrnas.recipe import load_recipe
from tests.helpers.chains import chain_arch, search_of


def _recipe(tests_recipe_path, data_dir, lr: float, top_k: int, layernorm="false", *more):
    return load_recipe(tests_recipe_path, [
        f"data.path={data_dir}", "space.num_blocks=3", "space.dense_ops=[fc,dot,gating,sum]",
        f"final.layernorm={layernorm}", f"final.train={{lr: {lr}}}", f"final.top_k={top_k}", "final.choose_from=all",
        # NASRec's Xavier init: the chains that must (and must not) diverge at these learning rates were
        # chosen with it
        "final.dense_init=nasrec", *more])


def _no_constants(name):
    raise ValueError(f"non-strict JSON constant {name}")


def _report(tmp_path, recipe, data, search, final) -> dict:
    parts = {"data": data, "warm": WarmupResult(None, 0.0, 0, 0, 0.0), "search": search, "final": final,
             "timings": {"final": final.seconds}}
    write_report(tmp_path, recipe, parts)
    return json.loads((tmp_path / "metrics.json").read_text(), parse_constant=_no_constants)


def test_a_diverged_dot_chain_is_marked_and_not_selected(tests_data, tests_recipe_path, data_dir, tmp_path):
    # rank 0 (the best search score) chains three Dot-Products without LayerNorm: at lr 0.5 it blows up
    recipe = _recipe(tests_recipe_path, data_dir, 0.5, 3, "false", "final.export=false")  # no model/ read here
    search = search_of([chain_arch("dot", 3), chain_arch("fc", 3), chain_arch("gating", 3)])
    final = final_stage(recipe, tests_data, search, None, tmp_path, progress=False)
    dot = final.candidates[0]
    assert dot.status == "diverged" and dot.diverged["step"] >= 1 and math.isnan(dot.val["logloss"])
    usable = [m for m in final.candidates if m.status == "ok"]
    assert usable and final.fallback is None
    # the best on validation of everything the stage trained (a baseline included)
    assert final.best is min(usable + [b for b in final.baselines if b.status == "ok"], key=lambda m: m.val["logloss"])
    assert final.best.val["logloss"] < final.best.constant_val_logloss
    m = _report(tmp_path, recipe, tests_data, search, final)
    assert m["diverged"] == [{"label": "rank 0", "step": dot.diverged["step"], "reason": dot.diverged["reason"]}]
    row = m["candidates"][0]
    assert row["status"] == "diverged" and row["val_logloss"] is None and row["test_logloss"] is None
    assert m["best"]["label"] == final.best.label and m["fallback"] is None
    assert "**diverged**: rank 0" in (tmp_path / "summary.md").read_text()


def test_every_candidate_diverged_falls_back_to_the_best_baseline(tests_data, tests_recipe_path, data_dir,
                                                                   tmp_path):
    recipe = _recipe(tests_recipe_path, data_dir, lr=0.5, top_k=2)
    search = search_of([chain_arch("dot", 3), chain_arch("dot", 3, dense_dim=32)])
    final = final_stage(recipe, tests_data, search, None, tmp_path, progress=False)
    assert [m.status for m in final.candidates] == ["diverged", "diverged"]
    assert final.best.label == "lr" and final.best.arch is None and final.best.status == "ok"
    assert final.fallback.startswith("no retrained candidate is usable (rank 0 diverged, rank 1 diverged)")
    assert "the best baseline, lr, is reported and exported instead" in final.fallback
    card = json.loads((tmp_path / "model" / "model_card.json").read_text(), parse_constant=_no_constants)
    assert card["kind"] == "baseline" and card["baseline"] == "lr" and final.fallback in card["why"]
    m = _report(tmp_path, recipe, tests_data, search, final)
    assert m["fallback"] == final.fallback and m["best"]["label"] == "lr" and m["best"]["arch"] is None
    assert [d["label"] for d in m["diverged"]] == ["rank 0", "rank 1"]
    assert not (tmp_path / "best_arch.json").exists()
    assert f"**fallback**: {final.fallback}" in (tmp_path / "summary.md").read_text()


def test_auto_layernorm_keeps_the_chain_finite(tests_data, tests_recipe_path, data_dir, tmp_path):
    # the same Dot chain and learning rate as above, with final.layernorm: auto (degree 8: LayerNorm on)
    recipe = _recipe(tests_recipe_path, data_dir, lr=0.5, top_k=1, layernorm="auto")
    final = final_stage(recipe, tests_data, search_of([chain_arch("dot", 3)]), None, None, progress=False)
    assert final.candidates[0].diverged is None and math.isfinite(final.candidates[0].val["logloss"])


@pytest.mark.parametrize("op, depth, degree", [
    ("fc", 3, 2),      # block 1's FM squares the embeddings; FC keeps the degree
    ("fc", 2, 1),      # (without the FM) a plain MLP on the embeddings
    ("gating", 3, 2),  # a sigmoid gate in (0, 1) keeps its right input's degree
    ("dot", 1, 2),     # one Dot: pairwise products of degree-1 inputs
    ("dot", 2, 4),     # Dot on Dot: a product of products
    ("dot", 3, 8),
])
def test_product_degree_of_chains(op, depth, degree):
    assert product_degree(chain_arch(op, depth, fm=degree != 1)) == degree


def test_attention_resets_the_degree_and_merge_carries_it():
    import dataclasses

    a = chain_arch("dot", 2)  # block 2: dot on block 1 (degree 2) -> 4
    b2 = a.blocks[1]
    assert product_degree(dataclasses.replace(a, blocks=(a.blocks[0], dataclasses.replace(
        b2, dense_op="fc")))) == 2
    # the head reads block 2's sparse output too: EFC on block 1's merged dense output (degree 2) keeps 2
    merged = dataclasses.replace(a.blocks[0], dense_sparse_merge=True)
    fc2 = dataclasses.replace(b2, dense_op="fc", dense_idx=(0,))
    assert product_degree(dataclasses.replace(a, blocks=(merged, fc2))) == 2
    # with FM on block 2, its sparse input (degree 2 via the merge) is squared: 4; attention resets it to 1 -> 2
    fm2 = dataclasses.replace(fc2, fm=True)
    assert product_degree(dataclasses.replace(a, blocks=(merged, fm2))) == 4
    att = dataclasses.replace(fm2, sparse_op="attention")
    assert product_degree(dataclasses.replace(a, blocks=(merged, att))) == 2


def test_an_overflowed_score_is_written_with_its_reason(tmp_path):
    import csv

    from ctrnas.search.history import History, HistoryRecord

    hist = History([HistoryRecord(0, 0, "a", {}, 1.5, {"x": 1.5}),
                    HistoryRecord(1, 0, "b", {}, math.inf, {"x": 2.0, "loss": math.inf}, {"error": "overflow"})])
    hist.to_csv(tmp_path / "h.csv")
    with open(tmp_path / "h.csv") as fh:
        notes = [row["note"] for row in csv.DictReader(fh)]
    assert notes == ["", "score inf; non-finite terms: loss=inf; overflow"]


def test_a_baseline_better_on_validation_than_every_candidate_is_exported(tests_data, tests_recipe_path,
                                                                           data_dir, tmp_path):
    # at 2048 training rows the three-layer FC chain (no FM) trails logistic regression on validation
    recipe = load_recipe(tests_recipe_path, [f"data.path={data_dir}", "space.num_blocks=3",
                                             "space.dense_ops=[fc,dot,gating,sum]", "final.top_k=1",
                                             "final.baselines=[dlrm,lr]", "final.choose_from=all"])
    search = search_of([chain_arch("fc", 3, fm=False)])
    final = final_stage(recipe, tests_data, search, None, tmp_path, progress=False)
    (cand,), (dlrm, lr) = final.candidates, final.baselines
    assert cand.status == "ok" and final.fallback is None
    assert lr.val["logloss"] < cand.val["logloss"] and lr.val["logloss"] < dlrm.val["logloss"]
    assert final.best is lr
    line = final.origin["line"]
    assert line.startswith("the lr baseline was chosen on validation")
    card = json.loads((tmp_path / "model" / "model_card.json").read_text(), parse_constant=_no_constants)
    assert card["kind"] == "baseline" and card["baseline"] == "lr" and card["why"] == line
    assert (tmp_path / "model" / "model_card.md").read_text().splitlines()[2] == line
    # the exported weights are the trained baseline's: its validation log loss again
    import torch

    from ctrnas.train.batches import dataset_batches
    from ctrnas.train.trainer import Trainer

    from ctrnas.train.baselines import build_baseline

    cfg = recipe.final_train
    model = build_baseline("lr", tests_data.schema, dim=cfg.embedding_dim, row_cap=cfg.row_cap, seed=cfg.seed + 1)
    model.load_state_dict(torch.load(tmp_path / "model" / "model.pt", weights_only=True))
    val = dataset_batches(tests_data.path, "val", 8192, limit=recipe.final.val_rows)
    again = Trainer(model, recipe.final_train).evaluate(val).logloss
    assert again == pytest.approx(lr.val["logloss"], abs=1e-6)
    m = _report(tmp_path, recipe, tests_data, search, final)
    assert m["origin"]["kind"] == "baseline" and m["best"]["label"] == "lr"
    assert (tmp_path / "summary.md").read_text().splitlines()[2] == f"**{line}**"


def test_choose_from_candidates_exports_the_searched_arch_even_when_a_baseline_is_better(tests_data,
                                                                                       tests_recipe_path, data_dir):
    # the same chain and baselines as above: LR is better on validation, but only a fallback may export it
    recipe = load_recipe(tests_recipe_path, [f"data.path={data_dir}", "space.num_blocks=3",
                                             "space.dense_ops=[fc,dot,gating,sum]", "final.top_k=1",
                                             "final.baselines=[lr]", "final.choose_from=candidates"])
    final = final_stage(recipe, tests_data, search_of([chain_arch("fc", 3, fm=False)]), None, None, progress=False)
    (cand,), (lr,) = final.candidates, final.baselines
    assert lr.val["logloss"] < cand.val["logloss"] and final.best is cand and final.fallback is None
    assert final.origin["kind"] == "random" and final.origin["vs_best_baseline"]["val"] > 0
