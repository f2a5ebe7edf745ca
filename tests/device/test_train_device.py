"""The trainer's device setting: resolved once, the model and every batch on it, recipes and CLI pass it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

pytest.importorskip("torchrec")  # the lent GPU machine runs tests/device without TorchRec

from ctrnas import api  # noqa: E402
from ctrnas.errors import DeviceError  # noqa: E402
from ctrnas.train.batches import TensorBatches  # noqa: E402
from ctrnas.train.config import TrainConfig, numeric_settings  # noqa: E402
from ctrnas.train.trainer import Trainer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "synthetic-tests.yaml"


class Recorder(nn.Module):
    """A model that records the devices of its inputs (dense, kjt values, labels are checked by the trainer)."""

    def __init__(self, n_dense: int):
        super().__init__()
        self.lin = nn.Linear(n_dense, 1)
        self.seen: list[tuple[torch.device, torch.device]] = []

    def forward(self, dense, kjt):
        self.seen.append((dense.device, kjt.values().device))
        return self.lin(dense).squeeze(1)


def _batches(n_dense=3, rows=40):
    g = torch.Generator().manual_seed(0)
    dense, ids = torch.randn(rows, n_dense, generator=g), torch.randint(0, 5, (rows, 2), generator=g)
    return TensorBatches(dense, ids, (torch.rand(rows, generator=g) < 0.3).float(), ["a", "b"], 10)


def test_cpu_trainer_keeps_everything_on_the_cpu():
    model = Recorder(3)
    t = Trainer(model, TrainConfig(device="cpu", progress=False, batch_size=10))
    t.fit(_batches())
    t.evaluate(_batches())
    assert t.device == torch.device("cpu")
    assert model.seen and all(d == torch.device("cpu") and k == torch.device("cpu") for d, k in model.seen)


def test_trainer_moves_model_and_batches_to_its_device(monkeypatch):
    """With a stand-in device (`meta`: shapes only), the model and every batch it is given land there."""
    import ctrnas.train.trainer as trainer_mod

    monkeypatch.setattr(trainer_mod, "resolve_device", lambda spec: torch.device("meta"))
    model = Recorder(3)
    t = Trainer(model, TrainConfig(device="cuda", progress=False, batch_size=10))
    assert all(p.device.type == "meta" for p in model.parameters())
    batch = next(iter(_batches().batches(0)))
    moved = t.to_device(batch)
    assert moved.dense_features.device.type == "meta" and moved.labels.device.type == "meta"
    assert moved.sparse_features.values().device.type == "meta"


def test_device_is_a_run_setting_not_a_numeric_one():
    """Warm-up and study caches are keyed by the numeric settings: the device must not change the key."""
    assert numeric_settings(TrainConfig(device="cpu")) == numeric_settings(TrainConfig(device="cuda:1"))


def test_recipe_device_reaches_every_training():
    r = api.load_recipe(RECIPE, device="cpu")
    assert r.train.device == "cpu" and r.final_train.device == "cpu"
    r2 = api.load_recipe(RECIPE, "final.train={lr: 0.05}", device="cpu")
    assert r2.final.train is not None and r2.final_train.device == "cpu" and r2.final_train.lr == 0.05
    with pytest.raises(DeviceError, match="expected auto"):
        api.load_recipe(RECIPE, device="tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cli_device_cuda_without_a_gpu_is_one_line(tmp_path):
    from ctrnas.data import synthetic

    synthetic.generate("criteo", 500, 0, tmp_path / "data")  # a prepared folder: the data is checked first
    r = subprocess.run([sys.executable, "-m", "ctrnas", "train", "--data", str(tmp_path / "data"), "--baseline", "lr",
                        "--device", "cuda"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "no CUDA device" in lines[0] and "Traceback" not in r.stderr
