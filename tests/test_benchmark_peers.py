"""benchmarks/peers.py: the rows each library gets are the trainer's batch, and the report's ratios are the
per-seed ratios of the runs."""

import math

import numpy as np
import torch

from ctrnas.data.schema import DatasetSchema
from ctrnas.train.batches import make_batch
from tests.helpers.bench_scripts import load_script


def _schema():
    return DatasetSchema.from_json({"label": "y", "dense": ["d0", "d1"],
                                    "sparse": [{"name": "a", "cardinality": 5}, {"name": "b", "cardinality": 7},
                                               {"name": "c", "cardinality": 3}]})


def test_columns_give_back_the_rows_a_batch_was_built_from():
    peers = load_script("peers")
    dense = torch.tensor([[0.5, 1.0], [2.0, -1.0], [0.0, 3.5], [1.5, 0.25]])
    ids = torch.tensor([[4, 6, 2], [0, 1, 0], [3, 5, 1], [2, 0, 2]])
    labels = torch.tensor([1.0, 0.0, 0.0, 1.0])
    d, i, y = peers.columns(make_batch(dense, ids, labels, ["a", "b", "c"]), _schema())
    np.testing.assert_array_equal(d, dense.numpy())
    np.testing.assert_array_equal(i, ids.numpy())  # row r, field f: the id of row r in field f
    np.testing.assert_array_equal(y, labels.numpy())
    fux = peers.fuxictr_batches([make_batch(dense, ids, labels, ["a", "b", "c"])], _schema())[0]
    assert fux["d1"].shape == (4, 1) and fux["d1"][1, 0] == -1.0 and fux["b"].tolist() == [6, 1, 5, 0]


def test_log_loss_is_the_mean_binary_cross_entropy():
    peers = load_script("peers")
    p, y = np.array([0.9, 0.2, 0.5]), np.array([1.0, 0.0, 1.0])
    want = -(math.log(0.9) + math.log(0.8) + math.log(0.5)) / 3
    assert abs(peers.log_loss(p, y) - want) < 1e-12


def test_report_ratios_are_per_seed_ratios_to_the_bare_loop_and_the_fused_trainer():
    peers = load_script("peers")
    meta = {"source": {"profile": "criteo", "rows": 1000}, "splits": {"train": {"rows": 800}, "test": {"rows": 100}}}
    runs = [{"model": "dcnv2", "contender": c, "lr": lr, "seed": s, "rows": 800, "cpu_s": 800 / v,
             "rows_per_cpu_s": v, "test_logloss": 0.5}
            for c, lr, s, v in [("bare", 0.12, 0, 100.0), ("fused", 0.12, 0, 150.0), ("deepctr", 0.01, 0, 50.0),
                                ("bare", 0.12, 1, 200.0), ("fused", 0.12, 1, 200.0), ("deepctr", 0.01, 1, 200.0)]]
    res = {"args": {"command": "python benchmarks/peers.py", "limit": None, "batch_size": 512, "lr": 0.12,
                    "machine": "m"}, "meta": meta, "versions": {"torch": "x"}, "runs": runs}
    text = peers.markdown(res)
    # seed 0: deepctr 50 / bare 100 = 0.50x; over the seeds: mean(0.5, 1.0) = 0.75x against bare,
    # mean(50/150, 200/200) = 0.67x against the fused trainer
    assert "| dcnv2 | DeepCTR-Torch `DCN` (matrix) | 0.01 | 0 | 800 | 16.0 | 50 | 0.50x | 0.50000 |" in text
    assert "| dcnv2 | DeepCTR-Torch `DCN` (matrix) | 0.01 | 2 | 125 | 0.75x | 0.67x | 0.50000 | 0 |" in text
    runs[2]["test_logloss"] = 4.1  # diverged: counted, out of the mean
    assert "| 0.01 | 2 | 125 | 0.75x | 0.67x | 0.50000 | 1 |" in peers.markdown(res)
