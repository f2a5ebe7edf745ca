"""The CIFAR python release is a pickle, read with an unpickler that builds only what a CIFAR batch holds:
a fake batch file that plants code is refused and the code never runs; real batches of every pickle protocol
still read."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from ctrnas.errors import DataFormatError
from ctrnas.vision.cifar import read_cifar10_pickles, read_cifar100_pickles
from tests.helpers.security import Payload


def _batch(rng, n=4, labels="labels"):
    data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
    return {b"data": data, labels.encode(): rng.integers(0, 10, n).tolist(), b"batch_label": b"training batch"}


def _write_all(folder, make, protocol=2):
    folder.mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        (folder / name).write_bytes(pickle.dumps(make(name), protocol=protocol))


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_real_batches_of_every_protocol_read(protocol, tmp_path):
    rng = np.random.default_rng(protocol)
    written = {}

    def make(name):
        written[name] = _batch(rng)
        return written[name]

    _write_all(tmp_path, make, protocol)
    test = read_cifar10_pickles(tmp_path, "test")
    want = written["test_batch"]
    assert np.array_equal(test.images, want[b"data"].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
    assert test.labels.tolist() == want[b"labels"]


@pytest.mark.parametrize("where", ["data", "labels", "object_array", "top"])
def test_a_fake_batch_planting_code_is_refused_and_the_code_never_runs(where, tmp_path, plant):
    rng = np.random.default_rng(0)
    payload = Payload(plant.marker)

    def make(name):
        d = _batch(rng)
        if name != "data_batch_3":
            return d
        if where == "data":
            d[b"data"] = payload
        elif where == "labels":
            d[b"labels"] = [0, payload, 1, 2]
        elif where == "object_array":  # an object array's items are unpickled by the same unpickler
            d[b"data"] = np.array([payload, 1], dtype=object)
        else:
            return payload
        return d

    _write_all(tmp_path, make)
    with pytest.raises(DataFormatError, match="data_batch_3.*refused"):
        read_cifar10_pickles(tmp_path, "train")
    assert not plant.ran()


def test_cifar100_files_get_the_same_unpickler(tmp_path, plant):
    (tmp_path / "train").write_bytes(pickle.dumps({b"data": Payload(plant.marker), b"fine_labels": [1]}))
    with pytest.raises(DataFormatError, match="refused"):
        read_cifar100_pickles(tmp_path, "train")
    assert not plant.ran()


def test_a_batch_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    import os

    _write_all(tmp_path, lambda name: _batch(np.random.default_rng(1)))
    (tmp_path / "test_batch").unlink()
    os.mkfifo(tmp_path / "test_batch")
    with pytest.raises(Exception, match="FIFO"):
        read_cifar10_pickles(tmp_path, "test")
