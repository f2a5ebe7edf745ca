"""The device reaches every network and batch: proxies refuse a model and batches on different devices,
and the vision harness and search put both on the device they are given (`meta`: shapes only, no compute)."""

import pytest
import torch
import torch.nn.functional as F

from ctrnas.errors import DeviceError
from ctrnas.proxies import ProxyResult, get_proxy, list_proxies
from ctrnas.proxies.base import Proxy
from ctrnas.vision import correlate
from ctrnas.vision.correlate import CorrelateConfig, read_rows, run_correlation
from ctrnas.vision.network import build_network
from ctrnas.vision.space import NB201Table, enumerate_cells

META = torch.device("meta")


class Recorder(Proxy):
    """Records the devices of the model's parameters and of every batch tensor it is given."""

    needs_labels = False
    seen: list

    def __init__(self):
        object.__setattr__(self, "seen", [])

    def _compute(self, model, batches, loss_fn):
        params = {p.device for p in model.parameters()}
        inputs = {t.device for (xs, y) in batches for t in (*xs, y)}
        self.seen.append((params, inputs))
        return 0.0, {}, {}


def _images(n=16):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 3, 32, 32, generator=g), torch.randint(0, 10, (n,), generator=g)


@pytest.fixture(scope="module")
def table():
    return NB201Table("stand-in", {c.to_str(): {"cifar10_test": 50.0 + i % 7} for i, c in enumerate(enumerate_cells())})


@pytest.mark.parametrize("name", list_proxies())
def test_every_proxy_refuses_a_model_and_batches_on_different_devices(name):
    model = build_network(enumerate_cells()[123], channels=4, cells_per_stage=1).to(META)
    x, y = _images(8)
    with pytest.raises(DeviceError, match=f"proxy {name}: the model is on meta but an input tensor is on cpu"):
        get_proxy(name).score(model, [((x,), y)] * 4, F.cross_entropy)


def test_harness_puts_networks_and_batches_on_the_device(tmp_path, table, monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(correlate, "proxy_for", lambda name, warmup: rec)
    x, y = _images()
    cfg = CorrelateConfig(archs=3, proxies=("a", "b"), batch_size=4, k=2, channels=4, cells_per_stage=1)
    run_correlation(cfg, x, y, table, tmp_path / "s.csv", progress=False, device=META)
    assert len(rec.seen) == 6 and all(p == {META} and i == {META} for p, i in rec.seen)
    assert len(read_rows(tmp_path / "s.csv")) == 6
    # the default stays the CPU
    rec.seen.clear()
    run_correlation(cfg, x, y, table, tmp_path / "t.csv", progress=False)
    assert all(p == {torch.device("cpu")} and i == {torch.device("cpu")} for p, i in rec.seen)


def test_search_fitness_puts_networks_and_batches_on_the_device(monkeypatch):
    from ctrnas.vision import search

    rec = Recorder()
    monkeypatch.setattr(search, "proxy_for", lambda name, warmup: rec)
    x, y = _images()
    fitness = search.ProxyFitness("sigeo", x, y, batch_size=4, k=2, device=META)
    fitness(enumerate_cells()[7], 0)
    assert rec.seen == [({META}, {META})]
    assert fitness.channels_last is False  # NCHW off the CPU, NHWC on it
    assert search.ProxyFitness("sigeo", x, y, batch_size=4, k=2, device="cpu").channels_last is True


def test_warm_up_first_loss_is_that_of_the_seeded_images():
    """The order is drawn on the CPU and moved to the images' device; step 1's loss is the fresh network's
    loss on the first `batch_size` images of that order."""
    from ctrnas.vision.warmup import warm_up

    x, y = _images(32)
    cell = enumerate_cells()[4000]
    losses = warm_up(build_network(cell, seed=3, channels=4, cells_per_stage=1), x, y, 0.5,
                     torch.Generator().manual_seed(1))
    idx = torch.randperm(32, generator=torch.Generator().manual_seed(1))[:16]
    fresh = build_network(cell, seed=3, channels=4, cells_per_stage=1).train()
    assert len(losses) == 1 and losses[0] == pytest.approx(float(F.cross_entropy(fresh(x[idx]), y[idx])), rel=1e-6)
