"""`ctrnas train` and `ctrnas warmup` end to end on a small synthetic dataset folder."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sklearn.metrics import log_loss, roc_auc_score

from ctrnas import cli
from ctrnas.data.dataset import load_schema, read_meta
from ctrnas.train.baselines.folder import load_baseline
from ctrnas.train.baselines import build_baseline
from ctrnas.train.batches import dataset_batches


@pytest.fixture
def ctrnas(monkeypatch):
    if "ctrnas.cli.train" not in cli.COMMANDS:
        monkeypatch.setattr(cli, "COMMANDS", [*cli.COMMANDS, "ctrnas.cli.train"])
    return cli.main


@pytest.mark.parametrize("ema", [None, "0"])
def test_train_baseline_writes_metrics_that_match_an_independent_evaluation(ctrnas, synthetic_dir, tmp_path, ema):
    """The folder holds the weights' moving average by default, the trained weights with --ema 0; the test log
    loss is of the weights it holds."""
    out = tmp_path / "run"
    rc = ctrnas(["train", "--data", str(synthetic_dir), "--baseline", "fm", "--out", str(out), "--no-progress",
                 "--train-fraction", "0.5", "--batch-size", "256", "--seed", "3", *(["--ema", ema] if ema else [])])
    assert rc == 0
    m = json.loads((out / "metrics.json").read_text())
    meta = read_meta(synthetic_dir)
    assert m["bayes_logloss"] == meta["bayes_logloss"]
    half = -(-meta["splits"]["train"]["rows"] // 2)
    # the early-stop protocol by default: over the half, evaluated four times an epoch, ending on the best
    from ctrnas.train.config import EMA
    from ctrnas.train.trainer import eval_interval

    per_epoch = -(-half // 256)
    interval, steps = eval_interval(per_epoch, 2000, 4), m["train"]["steps"]
    assert m["train_rows_used"] == half and (steps % per_epoch) % interval == 0
    assert m["train"]["rows"] == (steps // per_epoch) * half + (steps % per_epoch) * 256
    assert m["config"]["schedule"] == "plateau" and m["config"]["restore_best"]
    assert m["config"]["ema"] == (float(ema) if ema else EMA) and EMA > 0
    assert m["val"]["step"] == m["train"]["best"]["step"]
    # re-evaluate the saved weights on the test split with scikit-learn
    model = build_baseline("fm", load_schema(synthetic_dir), seed=0)
    model.load_state_dict(load_baseline(out).state_dict())  # the folder is a model folder (ctrnas predict)
    model.eval()
    z, y = [], []
    with torch.no_grad():
        for b in dataset_batches(synthetic_dir, "test", 1000).batches():
            z.append(model(b.dense_features, b.sparse_features).double().numpy())
            y.append(b.labels.numpy())
    p, y = 1 / (1 + np.exp(-np.concatenate(z))), np.concatenate(y)
    assert m["test"]["rows"] == len(y) == meta["splits"]["test"]["rows"]
    assert m["test"]["logloss"] == pytest.approx(log_loss(y, p), rel=1e-6)
    assert m["test"]["auc"] == pytest.approx(roc_auc_score(y, p), abs=1e-6)
    assert m["test"]["logloss"] < m["constant_logloss"]


def test_unknown_baseline_is_a_one_line_error(ctrnas, synthetic_dir, tmp_path, capsys):
    rc = ctrnas(["train", "--data", str(synthetic_dir), "--baseline", "nope", "--out", str(tmp_path)])
    assert rc == 1 and "unknown baseline 'nope'" in capsys.readouterr().err


def test_warmup_fraction_zero_saves_the_untrained_supernet(ctrnas, synthetic_dir, tmp_path):
    sn = pytest.importorskip("ctrnas.supernet.supernet", reason="supernet not available")
    out = tmp_path / "wu"
    rc = ctrnas(["warmup", "--data", str(synthetic_dir), "--space", "nasrec-small", "--fraction", "0",
                 "--out", str(out), "--seed", "4", "--no-progress"])
    assert rc == 0
    rec = json.loads((out / "warmup.json").read_text())
    assert rec["summary"]["steps"] == 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(4)
        fresh = sn.Supernet(load_schema(synthetic_dir), "nasrec-small")
    saved = torch.load(out / "supernet.pt")
    assert saved["format"] == "ctrnas-supernet/1"  # the checkpoint `ctrnas run` writes
    saved = saved["state_dict"]
    for k, v in fresh.state_dict().items():
        assert torch.equal(saved[k], v), k


def test_train_arch_from_json(ctrnas, synthetic_dir, tmp_path):
    pytest.importorskip("ctrnas.supernet.export", reason="supernet export not available")
    from ctrnas.space.space import get_space
    from ctrnas.train.normalise import product_degree

    # an arch that trains without LayerNorm in 10 steps (products may blow up: tests/train/test_divergence.py)
    rng = np.random.default_rng(0)
    arch = get_space("nasrec-small").sample(rng)
    while product_degree(arch) > 1:  # no Dot-Product, no FM: a plain MLP-like subnet
        arch = get_space("nasrec-small").sample(rng)
    path = tmp_path / "arch.json"
    path.write_text(json.dumps(arch.to_json()))
    out = tmp_path / "run"
    rc = ctrnas(["train", "--data", str(synthetic_dir), "--arch", str(path), "--space", "nasrec-small",
                 "--out", str(out), "--no-progress", "--train-fraction", "0.1", "--batch-size", "256", "--protocol", "nasrec",
                 "--epochs", "1"])
    assert rc == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["arch"] == arch.to_json() and m["model"] == f"arch-{arch.key()}"
    assert np.isfinite(m["test"]["logloss"]) and m["train"]["steps"] > 0
    # stand-alone training drops the ops' LayerNorms (NASRec); 'space' keeps them: 2 x width more params
    assert m["layernorm"] is False
    rc = ctrnas(["train", "--data", str(synthetic_dir), "--arch", str(path), "--space", "nasrec-small",
                 "--out", str(tmp_path / "ln"), "--no-progress", "--train-fraction", "0.1", "--batch-size", "256",
                 "--layernorm", "space", "--epochs", "2", "--restore-best"])
    assert rc == 0
    m2 = json.loads((tmp_path / "ln" / "metrics.json").read_text())
    assert m2["layernorm"] is True and m2["params"]["dense"] > m["params"]["dense"]
    assert len(m2["val_history"]) == 2 * 4 and m2["config"]["restore_best"]  # the early-stop protocol: 4 an epoch
    assert m2["val"]["logloss"] == min(h["logloss"] for h in m2["val_history"])


def test_resume_over_the_dataset_loader_is_bit_identical(synthetic_dir, tmp_path):
    # Two epochs over real Parquet shards with a per-epoch reshuffle, interrupted inside epoch 2.
    from ctrnas.train.config import TrainConfig
    from ctrnas.train.trainer import Trainer

    schema = load_schema(synthetic_dir)
    cfg = TrainConfig(batch_size=1024, epochs=2, progress=False, seed=1)

    def source():
        return dataset_batches(synthetic_dir, "train", 1024, shuffle=True, seed=1, fraction=0.5)

    ref = build_baseline("fm", schema, seed=2)
    Trainer(ref, cfg).fit(source())
    part = build_baseline("fm", schema, seed=2)
    steps = len(source())
    Trainer(part, cfg, out_dir=tmp_path).fit(source(), max_steps=steps + 3)
    resumed = build_baseline("fm", schema, seed=9)
    Trainer(resumed, cfg, out_dir=tmp_path).fit(source())
    for k, v in ref.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k


def test_recipe_with_unknown_key_names_file_and_key(ctrnas, synthetic_dir, tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("train:\n  lr: 0.1\n  learning_rate: 0.2\n")
    rc = ctrnas(["train", "--data", str(synthetic_dir), "--baseline", "lr", "--recipe", str(recipe)])
    err = capsys.readouterr().err
    assert rc == 1 and str(recipe) in err and "learning_rate" in err
