"""CIFAR readers on generated pickle files (and the workspace's npz sample where present), normalisation and
seeded batches."""

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from ctrnas.errors import DataFormatError
from ctrnas.vision.cifar import (
    MEAN_STD, make_batches, read_cifar, read_cifar10_pickles, read_cifar100_pickles, read_npz, to_tensor,
)

NPZ = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "cifar10" / "cifar10_train_first4000.npz"


def _write(path, d):
    with open(path, "wb") as f:
        pickle.dump(d, f)


def _images(rng, n):
    return rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)


def _planes(images):  # the release layout: 1024 R, 1024 G, 1024 B per row-major image
    return np.stack([np.concatenate([im[:, :, c].ravel() for c in range(3)]) for im in images]).astype(np.uint8)


def test_cifar10_pickles_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    imgs = [_images(rng, 3) for _ in range(6)]
    labels = [rng.integers(0, 10, 3).tolist() for _ in range(6)]
    for i in range(5):  # bytes keys, as the Python-2 release pickles have
        _write(tmp_path / f"data_batch_{i + 1}", {b"data": _planes(imgs[i]), b"labels": labels[i], b"batch_label": b"x"})
    _write(tmp_path / "test_batch", {"data": _planes(imgs[5]), "labels": labels[5]})
    train = read_cifar10_pickles(tmp_path, "train")
    assert train.images.shape == (15, 32, 32, 3)
    assert np.array_equal(train.images, np.concatenate(imgs[:5]))
    assert train.labels.tolist() == sum(labels[:5], [])
    test = read_cifar(tmp_path, "test")
    assert np.array_equal(test.images, imgs[5]) and test.labels.tolist() == labels[5]
    # a known pixel: red plane value 7 at row 2, column 5 of image 0
    planes = np.zeros((1, 3072), dtype=np.uint8)
    planes[0, 2 * 32 + 5] = 7
    _write(tmp_path / "test_batch", {b"data": planes, b"labels": [1]})
    assert read_cifar10_pickles(tmp_path, "test").images[0, 2, 5].tolist() == [7, 0, 0]


def test_cifar100_pickles_fine_and_coarse(tmp_path):
    rng = np.random.default_rng(1)
    im = _images(rng, 4)
    _write(tmp_path / "train", {b"data": _planes(im), b"fine_labels": [99, 0, 5, 42], b"coarse_labels": [19, 0, 1, 2]})
    fine = read_cifar100_pickles(tmp_path, "train")
    assert fine.labels.tolist() == [99, 0, 5, 42] and np.array_equal(fine.images, im)
    assert read_cifar100_pickles(tmp_path, "train", coarse=True).labels.tolist() == [19, 0, 1, 2]


def test_bad_pickles_raise_data_format_errors(tmp_path):
    _write(tmp_path / "test_batch", {b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]})
    with pytest.raises(DataFormatError, match="3072"):
        read_cifar10_pickles(tmp_path, "test")
    _write(tmp_path / "test_batch", {b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]})
    with pytest.raises(DataFormatError, match="labels"):
        read_cifar10_pickles(tmp_path, "test")
    (tmp_path / "test_batch").write_bytes(b"not a pickle")
    with pytest.raises(DataFormatError):
        read_cifar10_pickles(tmp_path, "test")
    with pytest.raises(DataFormatError, match="not found"):
        read_cifar10_pickles(tmp_path / "nowhere", "test")


def test_normalisation_matches_formula():
    x = np.zeros((1, 32, 32, 3), dtype=np.uint8)
    x[0, 0, 0] = [255, 0, 128]
    from ctrnas.vision.cifar import CifarSplit

    t, y = to_tensor(CifarSplit(x, np.array([3])), "cifar10")
    mean, std = MEAN_STD["cifar10"]
    assert t.shape == (1, 3, 32, 32) and t.dtype == torch.float32
    expected = [(255 - mean[0]) / std[0], (0 - mean[1]) / std[1], (128 - mean[2]) / std[2]]
    assert torch.allclose(t[0, :, 0, 0], torch.tensor(expected), atol=1e-5)
    assert y.tolist() == [3]


def test_batches_are_seeded_and_disjoint():
    images, labels = torch.arange(200).float().view(200, 1, 1, 1), torch.arange(200)
    a = make_batches(images, labels, 64, 3, torch.Generator().manual_seed(5))
    b = make_batches(images, labels, 64, 3, torch.Generator().manual_seed(5))
    c = make_batches(images, labels, 64, 3, torch.Generator().manual_seed(6))
    assert all(torch.equal(x[1], z[1]) for x, z in zip(a, b))
    assert not torch.equal(a[0][1], c[0][1])
    seen = torch.cat([t for _, t in a])
    assert len(seen) == 192 and len(set(seen.tolist())) == 192
    assert torch.equal(a[0][0][0].view(-1).long(), a[0][1])  # images travel with their labels
    assert len(make_batches(images[:10], labels[:10], 4, 5, torch.Generator().manual_seed(0))) == 5


if NPZ.exists():  # the workspace's genuine images: an extra check where present (a fresh clone has none)
    def test_shared_npz_sample_reads_and_normalises():
        s = read_npz(NPZ)
        assert s.images.shape == (4000, 32, 32, 3) and s.labels.shape == (4000,)
        assert set(np.unique(s.labels)) == set(range(10))
        x, _ = to_tensor(s, "cifar10")
        # NB201's statistics are the full training set's, so the 4000-image sample is near mean 0, std 1
        assert x.mean(dim=(0, 2, 3)).abs().max() < 0.1
        assert (x.std(dim=(0, 2, 3)) - 1).abs().max() < 0.1
