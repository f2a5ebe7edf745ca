"""2 gloo ranks on CPU train exactly like 1 process on the same global batches (docs/cpu.md).

The reference is the ordinary 1-process `Trainer` (row-sparse torch Adagrad on unsharded tables): a
second code path, not the distributed one. One spawn runs every case (each rank pays ~4 s importing
torchrec). The toy data has 87 rows in batches of 15, so per-rank slices are uneven (8 + 7, padded) and the
last batch is short: the cases where a careless split or loss scaling goes wrong.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ctrnas.distributed.testing import supernet_forward, toy_config, toy_data, toy_model
from ctrnas.train.trainer import Trainer

SPECS = [{"sharding": "row_wise"}, {"sharding": "table_wise"},
         {"sharding": None, "model": "supernet", "fit": True}, {"sharding": "table_wise", "model": "deepfm", "resume": True},
         # model selection: a large constant LR overfits the 87 rows, so the best val epoch is not the last
         {"sharding": "row_wise", "fit": True, "val_seed": 1,
          "config": {"epochs": 8, "lr": 0.5, "schedule": "constant", "warmup_ratio": 0.0, "restore_best": True}},
         # per-table widths: a 4-wide table, an 8-wide one and a dropped field, sharded row-wise
         {"sharding": "row_wise", "model": "mixed"},
         # the selection above on the weights' moving average (over one epoch: one evaluation an epoch)
         {"sharding": "row_wise", "fit": True, "val_seed": 1,
          "config": {"epochs": 8, "lr": 0.5, "schedule": "constant", "warmup_ratio": 0.0, "restore_best": True,
                     "ema": 1.0}}]
# the same, stopped within the fourth epoch (6 steps an epoch) and resumed from its checkpoint
SPECS.append({**SPECS[6], "resume": True, "resume_at": 21})


def _reference(spec):
    schema, data = toy_data()
    model = toy_model(schema, spec.get("model", "dlrm"))
    kw = {"forward": supernet_forward, "eval_forward": supernet_forward} if spec.get("model") == "supernet" else {}
    trainer = Trainer(model, toy_config(**spec.get("config", {})), **kw)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    losses, summary = [], None
    val = toy_data(seed=spec["val_seed"])[1] if "val_seed" in spec else data
    if spec.get("fit") or spec.get("resume"):
        summary = trainer.fit(data, val=val if spec.get("fit") else None, resume=False)
    else:
        losses = [trainer.train_step(b, len(data)) for b in data.batches()]
    return {"model": model, "initial": initial, "final": model.state_dict(), "losses": losses,
            "summary": summary, "metrics": trainer.evaluate(data).to_dict()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from ctrnas.distributed.launch import spawn
    from ctrnas.distributed.testing import train_ranks

    tmp = tmp_path_factory.mktemp("dmp")
    specs = [dict(s) for s in SPECS]
    specs[2]["out_dir"] = str(tmp / "fit")
    specs[3]["out_dir"] = str(tmp / "resume")
    specs[7]["out_dir"] = str(tmp / "resume-average")
    spawn(train_ranks, 2, specs, str(tmp / "out.pt"))
    results = torch.load(tmp / "out.pt", weights_only=False)
    return {i: (r, _reference(SPECS[i])) for i, r in enumerate(results)}, tmp


def _max_diff(a: dict, b: dict) -> float:
    assert set(a) == set(b)
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


@pytest.mark.parametrize("case", [0, 1, 5], ids=["row_wise", "table_wise", "mixed_widths"])
def test_two_ranks_follow_the_one_process_loss_trajectory(runs, case):
    dist_run, ref = runs[0][case]
    assert set(dist_run["sharding"].values()) == {SPECS[case]["sharding"]}
    assert len(dist_run["losses"]) == len(ref["losses"]) == 6
    np.testing.assert_allclose(dist_run["losses"], ref["losses"], rtol=1e-5, atol=1e-6)
    # the model moved (the test would pass vacuously on a frozen model otherwise)
    assert _max_diff(ref["initial"], ref["final"]) > 1e-2
    assert _max_diff(dist_run["final"], ref["final"]) < 1e-5


@pytest.mark.parametrize("case", [0, 1, 2, 5], ids=["row_wise", "table_wise", "planner", "mixed_widths"])
def test_gathered_state_dict_equals_the_unsharded_model(runs, case):
    dist_run, ref = runs[0][case]
    assert _max_diff(dist_run["initial"], ref["initial"]) == 0.0  # DMP kept the model's own weights
    assert all(isinstance(v, torch.Tensor) for v in dist_run["final"].values())
    assert {k: tuple(v.shape) for k, v in dist_run["final"].items()} == \
        {k: tuple(v.shape) for k, v in ref["final"].items()}


def test_distributed_metrics_equal_one_process(runs):
    for case in range(3):
        dist_run, ref = runs[0][case]
        assert dist_run["metrics"]["rows"] == ref["metrics"]["rows"] == 87  # padding rows dropped
        assert math.isclose(dist_run["metrics"]["logloss"], ref["metrics"]["logloss"], rel_tol=1e-5)
        assert math.isclose(dist_run["metrics"]["auc"], ref["metrics"]["auc"], abs_tol=1e-9)


def test_fit_with_planner_matches_one_process_and_checkpoint_exports(runs):
    from ctrnas.space import get_space
    from ctrnas.supernet import export, load_supernet
    from ctrnas.train.checkpoint import load_checkpoint

    (dist_run, ref), tmp = runs[0][2], runs[1]
    s, r = dist_run["summary"], ref["summary"]
    assert s["steps"] == r["steps"] == 6 and s["rows"] == r["rows"] == 87
    assert math.isclose(s["train_logloss"], r["train_logloss"], rel_tol=1e-5)
    assert math.isclose(s["val_history"][-1]["logloss"], r["val_history"][-1]["logloss"], rel_tol=1e-5)
    assert _max_diff(dist_run["final"], ref["final"]) < 1e-5 * max(1.0, max(float(v.abs().max())
                                                                          for v in ref["final"].values()))
    # rank 0's checkpoint holds the gathered model: a bare supernet state_dict that export reads
    state = load_checkpoint(tmp / "fit" / "checkpoint.pt")["model"]
    torch.save(state, tmp / "supernet.pt")
    schema, data = toy_data()
    loaded, _ = load_supernet(tmp / "supernet.pt", schema=schema, space="nasrec-small", emb_dim=8)
    arch = get_space("nasrec-small").sample(np.random.default_rng(3))
    batch = next(data.batches())
    with torch.no_grad():
        got = export(loaded, arch)(batch.dense_features, batch.sparse_features)
        want = export(ref["model"], arch)(batch.dense_features, batch.sparse_features)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_resumed_distributed_run_equals_uninterrupted_one_process_run(runs):
    """3 steps, a checkpoint, a new trainer resumed from it, 3 more steps. DeepFM under table-wise: each rank's
    fused Adagrad state lists only its own tables, and the 1-wide first-order tables are replicated."""
    dist_run, ref = runs[0][3]
    sharding = dist_run["sharding"]
    assert {sharding[k] for k in sharding if k.startswith("stem.")} == {"table_wise"}
    assert {sharding[k] for k in sharding if not k.startswith("stem.")} == {"data_parallel"}
    assert dist_run["summary"]["steps"] == 6 and dist_run["summary"]["rows"] == 87
    assert math.isclose(dist_run["summary"]["train_logloss"], ref["summary"]["train_logloss"], rel_tol=1e-5)
    assert _max_diff(ref["initial"], ref["final"]) > 1e-2
    assert _max_diff(dist_run["final"], ref["final"]) < 1e-5


def test_restore_best_ends_on_the_same_weights_as_one_process(runs):
    dist_run, ref = runs[0][4]
    best, last = ref["summary"]["best"]["step"], ref["summary"]["steps"]
    assert best < last, "the case must overfit so that the restore is exercised"
    assert dist_run["summary"]["best"]["step"] == best
    assert _max_diff(dist_run["final"], ref["final"]) < 1e-5
    assert _max_diff(ref["final"], ref["initial"]) > 1e-3


def test_the_moving_average_ends_on_the_same_weights_as_one_process(runs):
    dist_run, ref = runs[0][6]
    best = ref["summary"]["best"]["step"]
    assert dist_run["summary"]["best"]["step"] == best
    # the first evaluations scored the same averages (later, rate 0.5 on 87 rows amplifies float rounding
    # from one code path to the other: 3e-6 at the fourth epoch, 3% at the eighth)
    first = [[h["logloss"] for h in run["summary"]["val_history"][:3]] for run in (dist_run, ref)]
    np.testing.assert_allclose(first[0], first[1], rtol=1e-5)
    assert _max_diff(dist_run["final"], ref["final"]) < 1e-5
    assert _max_diff(ref["final"], runs[0][4][1]["final"]) > 1e-3  # not the weights the same run ends on without it


def test_a_resumed_run_keeps_its_best_weights_and_average(runs):
    """The checkpoint gathers the best weights and the moving average like the model: stopped within the fourth
    epoch and resumed, the run evaluates and ends as the uninterrupted one on the same ranks."""
    from ctrnas.train.checkpoint import load_checkpoint

    (resumed, _), (whole, _) = runs[0][7], runs[0][6]
    history = [[h["logloss"] for h in run["summary"]["val_history"]] for run in (resumed, whole)]
    assert len(history[0]) == len(history[1]) > 4
    np.testing.assert_allclose(history[0], history[1], rtol=1e-6)
    assert resumed["summary"]["best"] == whole["summary"]["best"]
    assert _max_diff(resumed["final"], whole["final"]) < 1e-6
    selection = load_checkpoint(runs[1] / "resume-average" / "checkpoint.pt")["selection"]
    assert set(selection["average"]) == set(selection["weights"]) == set(whole["final"])
