"""The `--distributed` training command on 2 ranks writes the metrics and model of the 1-process command."""

from __future__ import annotations

import json
import math

import pytest
import torch


@pytest.fixture(scope="module")
def two_rank_trainings(tmp_path_factory):
    """2000 synthetic rows, and on one spawn of 2 ranks (row-wise, DLRM) both what `ctrnas train --distributed`
    runs without a model folder (`dist/`) and what it runs with `--out` (`model/`)."""
    from ctrnas.data import synthetic
    from ctrnas.distributed.launch import spawn
    from tests.helpers.distributed_run import train_command_then_model_ranks

    tmp = tmp_path_factory.mktemp("dist-train")
    synthetic.generate("criteo", 2000, 7, tmp / "data", chunk_rows=10_000)
    spawn(train_command_then_model_ranks, 2, str(tmp / "data"), str(tmp / "dist"), str(tmp / "model"), "row_wise",
          ("baseline", "dlrm"))
    return tmp


@pytest.mark.slow
def test_distributed_train_command_equals_one_process(two_rank_trainings, tmp_path):
    from ctrnas.data.dataset import load_schema
    from ctrnas.distributed.testing import toy_config
    from ctrnas.train.baselines import build_baseline
    from ctrnas.train.run import train_and_test

    data, dist = two_rank_trainings / "data", two_rank_trainings / "dist"
    cfg = toy_config(batch_size=64, eval_batch_size=256)
    ref = train_and_test(build_baseline("dlrm", load_schema(data), cfg.embedding_dim, cfg.row_cap, cfg.seed),
                         data, cfg, tmp_path / "one", "dlrm")
    got = json.loads((dist / "metrics.json").read_text())
    assert got["distributed"]["world_size"] == 2
    assert set(got["distributed"]["sharding"].values()) == {"row_wise"}
    assert got["train"]["steps"] == ref["train"]["steps"] and got["train"]["rows"] == ref["train"]["rows"]
    assert math.isclose(got["train"]["train_logloss"], ref["train"]["train_logloss"], rel_tol=1e-5)
    assert got["test"]["rows"] == ref["test"]["rows"]
    assert math.isclose(got["test"]["logloss"], ref["test"]["logloss"], rel_tol=1e-5)
    a, b = torch.load(tmp_path / "one" / "model.pt"), torch.load(dist / "model.pt")
    assert set(a) == set(b)
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5


def test_cli_flags_offer_every_sharding_type_and_default_to_the_planner():
    import argparse

    from ctrnas.cli.common import SHARDING_CHOICES, add_distributed_args, sharding_from_args
    from ctrnas.distributed.dmp import SHARDING_TYPES

    assert SHARDING_CHOICES == ("auto", *SHARDING_TYPES)
    p = argparse.ArgumentParser()
    add_distributed_args(p)
    assert sharding_from_args(p.parse_args(["--distributed"])) is None
    assert sharding_from_args(p.parse_args(["--sharding", "row_wise"])) == "row_wise"


@pytest.mark.slow
def test_distributed_train_writes_a_model_folder_with_the_gathered_weights(two_rank_trainings, tmp_path):
    """`torchrun ... ctrnas train --distributed --out T`: T is a model folder as in one process (predict takes
    it), and its model holds the gathered weights rank 0 wrote."""
    from ctrnas.api import predict
    from ctrnas.train.baselines.folder import load_baseline

    data, out = two_rank_trainings / "data", two_rank_trainings / "model"
    card = json.loads((out / "model_card.json").read_text())
    assert card["kind"] == "baseline" and card["baseline"] == "dlrm" and (out / "model.pt2").is_file()
    metrics = json.loads((out / "metrics.json").read_text())
    s = predict(out, str(data), tmp_path / "p.parquet", split="test", progress=False)
    assert s["metrics"]["logloss"] == pytest.approx(metrics["test"]["logloss"], rel=1e-5)
    assert sum(p.numel() for p in load_baseline(out).parameters()) == metrics["params"]["total"]
