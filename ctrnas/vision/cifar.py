"""CIFAR readers: the python-pickle releases and the shared `.npz` samples, NB201 normalisation, seeded batches.

Every reader returns `CifarSplit(images uint8 (N, 32, 32, 3) HWC, labels int64 (N,))`, the layout of the
`.npz` files; `to_tensor` turns it into normalised float NCHW. Pickle layout (cs.toronto.edu/~kriz/cifar.html):
a dict with `data` uint8 (N, 3072) holding the 1024 red, then green, then blue values of each row-major image,
and `labels` (CIFAR-10) or `fine_labels` / `coarse_labels` (CIFAR-100).

The python release is a pickle by design, the one pickle ctrnas ever reads (tests/security lists it): only
from the folder the user names (`--data`; the default is an `.npz` sample, read with numpy's pickle-free
`np.load`), and with an unpickler that builds nothing but what a CIFAR batch holds (dicts, lists, strings,
numbers and numpy arrays): a file that names any other class or function is refused, so it cannot run code.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ctrnas.errors import DataFormatError

# NB201's normalisation (its get_datasets): per-channel mean/std of the training set, in 0..255 units.
MEAN_STD = {
    "cifar10": ((125.3, 123.0, 113.9), (63.0, 62.1, 66.7)),
    "cifar100": ((129.3, 124.1, 112.4), (68.2, 65.4, 70.4)),
}
NUM_CLASSES = {"cifar10": 10, "cifar100": 100}


@dataclass(frozen=True)
class CifarSplit:
    """Images uint8 (N, 32, 32, 3) and labels int64 (N,)."""

    images: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, n: int) -> "CifarSplit":
        return CifarSplit(self.images[:n], self.labels[:n])


# the only globals a CIFAR batch's pickle names: numpy's array reconstructors (numpy 1 and 2 spellings) and
# the codec Python 3 uses for bytes in protocol 2; none of them runs code of the file's choosing
_CIFAR_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
}


class _CifarUnpickler(pickle.Unpickler):
    """Builds dicts, lists, strings, numbers and numpy arrays only: any other global is refused."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _CIFAR_GLOBALS:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which a CIFAR batch never holds (refused: "
                                         "unpickling it could run code)")
        return super().find_class(module, name)


def _read_pickle(path: Path) -> dict:
    if not path.exists():
        raise DataFormatError(str(path), None, None, "file not found")
    from ctrnas.safeload import regular_file

    try:
        with open(regular_file(path, "CIFAR batch"), "rb") as f:
            # pickle-ok: the CIFAR python release is a pickle by design; only from the path the user names,
            # and only numpy arrays and plain values (_CifarUnpickler)
            d = _CifarUnpickler(f, encoding="bytes").load()
    except Exception as e:  # a truncated or foreign file: report it as a data error, one line
        raise DataFormatError(str(path), None, None, f"not a CIFAR pickle ({type(e).__name__}: {e})") from None
    if not isinstance(d, dict):
        raise DataFormatError(str(path), None, None, "expected a pickled dict")
    # Python-2 pickles have bytes keys; pickles written by Python 3 may have str keys.
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in d.items()}


def _batch_from_pickle(path: Path, label_key: str) -> CifarSplit:
    d = _read_pickle(path)
    for key in ("data", label_key):
        if key not in d:
            raise DataFormatError(str(path), None, key, f"missing key (has {sorted(d)})")
    data = np.asarray(d["data"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise DataFormatError(str(path), None, "data", f"expected uint8 (N, 3072), got {data.dtype} {data.shape}")
    labels = np.asarray(d[label_key], dtype=np.int64)
    if labels.shape != (data.shape[0],):
        raise DataFormatError(str(path), None, label_key, f"{labels.shape[0]} labels for {data.shape[0]} images")
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # CHW planes -> HWC
    return CifarSplit(np.ascontiguousarray(images), labels)


def _concat(parts: list[CifarSplit]) -> CifarSplit:
    return CifarSplit(np.concatenate([p.images for p in parts]), np.concatenate([p.labels for p in parts]))


def read_cifar10_pickles(folder: str | Path, split: str = "train") -> CifarSplit:
    """`cifar-10-batches-py/`: `data_batch_1..5` (train) or `test_batch` (test)."""
    folder = Path(folder)
    names = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
    parts = [_batch_from_pickle(folder / n, "labels") for n in names]
    out = _concat(parts)
    _check_labels(out, 10, folder)
    return out


def read_cifar100_pickles(folder: str | Path, split: str = "train", coarse: bool = False) -> CifarSplit:
    """`cifar-100-python/`: `train` or `test`, fine labels (100) by default."""
    folder = Path(folder)
    out = _batch_from_pickle(folder / ("train" if split == "train" else "test"), "coarse_labels" if coarse else "fine_labels")
    _check_labels(out, 20 if coarse else 100, folder)
    return out


def read_npz(path: str | Path) -> CifarSplit:
    """The shared samples: `x` uint8 (N, 32, 32, 3), `y` int64 (N,)."""
    path = Path(path)
    if not path.exists():
        raise DataFormatError(str(path), None, None, "file not found")
    with np.load(path) as z:
        for key in ("x", "y"):
            if key not in z:
                raise DataFormatError(str(path), None, key, "missing array")
        x, y = z["x"], z["y"].astype(np.int64)
    if x.dtype != np.uint8 or x.shape[1:] != (32, 32, 3):
        raise DataFormatError(str(path), None, "x", f"expected uint8 (N, 32, 32, 3), got {x.dtype} {x.shape}")
    if y.shape != (x.shape[0],):
        raise DataFormatError(str(path), None, "y", f"{y.shape} labels for {x.shape[0]} images")
    return CifarSplit(x, y)


def _check_labels(split: CifarSplit, num_classes: int, where: Path) -> None:
    if len(split) and (split.labels.min() < 0 or split.labels.max() >= num_classes):
        raise DataFormatError(str(where), None, "labels", f"labels outside 0..{num_classes - 1}")


def read_cifar(path: str | Path, split: str = "train", dataset: str = "cifar10") -> CifarSplit:
    """Dispatch on what `path` is: a `.npz` file, a `cifar-10-batches-py` or a `cifar-100-python` folder."""
    path = Path(path)
    if path.suffix == ".npz":
        return read_npz(path)
    if (path / "data_batch_1").exists() or (path / "test_batch").exists():
        return read_cifar10_pickles(path, split)
    if (path / "train").exists() or (path / "test").exists():
        return read_cifar100_pickles(path, split)
    if dataset == "cifar100":
        return read_cifar100_pickles(path, split)
    return read_cifar10_pickles(path, split)


def to_tensor(split: CifarSplit, dataset: str = "cifar10") -> tuple[torch.Tensor, torch.Tensor]:
    """Normalised float32 NCHW images, (x/255 - mean)/std with NB201's per-channel statistics, and labels."""
    mean, std = (np.asarray(v, dtype=np.float32) / 255.0 for v in MEAN_STD[dataset])
    x = (split.images.astype(np.float32) / 255.0 - mean) / std
    return torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2))), torch.from_numpy(split.labels)


def make_batches(
    images: torch.Tensor, labels: torch.Tensor, batch_size: int, num_batches: int, generator: torch.Generator
) -> list[tuple[tuple[torch.Tensor], torch.Tensor]]:
    """`num_batches` batches drawn without replacement from a seeded permutation, as `((images,), labels)`.

    The permutation is cycled if the data hold fewer than batch_size * num_batches images.
    """
    n = len(labels)
    need = batch_size * num_batches
    order = torch.cat([torch.randperm(n, generator=generator) for _ in range(-(-need // n))])[:need]
    return [((images[idx],), labels[idx]) for idx in order.split(batch_size)]


def nhwc_for(channels_last: bool | None, device: torch.device) -> bool:
    """Whether to use NHWC: as asked, else on the CPU only (NHWC convolutions are several times faster
    there, forward and backward; NCHW is cuDNN's usual float32 layout)."""
    return device.type == "cpu" if channels_last is None else channels_last


def batches_to(batches, device: torch.device, nhwc: bool = False):
    """The batches of `make_batches` on `device` (images NHWC if `nhwc`)."""
    fmt = torch.channels_last if nhwc else torch.contiguous_format
    return [((x.to(device).contiguous(memory_format=fmt),), y.to(device)) for (x,), y in batches]
