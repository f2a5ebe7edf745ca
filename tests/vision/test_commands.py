"""`ctrnas vision correlate/search` through the real CLI: the shipped NB201 table and a tiny CIFAR-10 python
release the test writes (the genuine images of the workspace, ../shared/data, where present)."""

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from ctrnas.cli import vision as commands
from ctrnas.vision.space import SHIPPED_TABLE

SHARED_TRAIN = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "cifar10" / "cifar10_train_first4000.npz"
IMAGES = ("release",) + (("shared",) if SHARED_TRAIN.exists() else ())  # the genuine images: an extra check


def write_release(folder: Path, per_batch: int = 16, seed: int = 0) -> Path:
    """A tiny `cifar-10-batches-py`: data_batch_1..5 and test_batch, each a pickled dict as the release has
    (bytes keys, `data` uint8 (N, 3072) of R, G, B planes, `labels` a list)."""
    import pickle

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        d = {b"batch_label": name.encode(), b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
             b"labels": [int(v) for v in rng.integers(0, 10, per_batch)]}
        with open(folder / name, "wb") as f:
            pickle.dump(d, f, protocol=2)
    return folder


def _parser():
    p = argparse.ArgumentParser(prog="ctrnas")
    commands.register(p.add_subparsers(dest="command"))
    return p


def test_arguments_parse_with_defaults():
    args = _parser().parse_args(["vision", "correlate", "--data", "c10", "--archs", "5", "--warmup", "0,0.1"])
    assert args.archs == 5 and args.warmup == "0,0.1" and args.batch_size == 64 and args.k == 4
    assert args.func is commands._correlate
    assert Path(args.table) == SHIPPED_TABLE and SHIPPED_TABLE.is_file()  # the table ships with ctrnas
    s = _parser().parse_args(["vision", "search", "--data", "c10", "--proxy", "nwot"])
    assert s.func is commands._search and s.strategy == "evolution"
    with pytest.raises(SystemExit):  # the images have no default: nothing outside the checkout is assumed
        _parser().parse_args(["vision", "correlate"])


@pytest.mark.parametrize("images", IMAGES)
def test_correlate_and_search_end_to_end_with_params(tmp_path, images):
    data = write_release(tmp_path / "cifar-10-batches-py") if images == "release" else SHARED_TRAIN
    p = _parser()
    args = p.parse_args(["vision", "correlate", "--data", str(data), "--archs", "8", "--proxies", "params",
                         "--out", str(tmp_path), "--n-boot", "50", "--threads", "1"])
    assert args.func(args) == 0
    summary = (tmp_path / "summary.md").read_text()
    assert "| params | 0 | 8 (all) |" in summary and (tmp_path / "scatter.png").stat().st_size > 0
    args = p.parse_args(["vision", "search", "--data", str(data), "--proxy", "params", "--seeds", "0",
                         "--population", "4", "--generations", "2", "--tournament", "2", "--children", "2", "--out", str(tmp_path),
                         "--scores-csv", str(tmp_path / "scores.csv")])
    assert args.func(args) == 0
    (o,) = json.loads((tmp_path / "search.json").read_text())
    assert o["best_accuracy"] == pytest.approx(94.37, abs=0.01) and o["evaluations"] == 8
