"""`ctrnas vision correlate/search` through the real CLI on the shared data (skipped when absent)."""

import argparse
import json
from pathlib import Path

import pytest

from ctrnas.cli import vision as commands

TABLE = Path("../shared/data/nb201/nb201_acc.csv")
TRAIN = Path("../shared/data/cifar10/cifar10_train_first4000.npz")


def _parser():
    p = argparse.ArgumentParser(prog="ctrnas")
    commands.register(p.add_subparsers(dest="command"))
    return p


def test_arguments_parse_with_defaults():
    args = _parser().parse_args(["vision", "correlate", "--archs", "5", "--warmup", "0,0.1"])
    assert args.archs == 5 and args.warmup == "0,0.1" and args.batch_size == 64 and args.k == 4
    assert args.func is commands._correlate
    s = _parser().parse_args(["vision", "search", "--proxy", "nwot"])
    assert s.func is commands._search and s.strategy == "evolution"


@pytest.mark.skipif(not (TABLE.exists() and TRAIN.exists()), reason="shared NB201 / CIFAR-10 data absent")
def test_correlate_and_search_end_to_end_with_params(tmp_path):
    p = _parser()
    args = p.parse_args(["vision", "correlate", "--archs", "8", "--proxies", "params", "--out", str(tmp_path),
                         "--n-boot", "50", "--threads", "1"])
    assert args.func(args) == 0
    summary = (tmp_path / "summary.md").read_text()
    assert "| params | 0 | 8 (all) |" in summary and (tmp_path / "scatter.png").stat().st_size > 0
    args = p.parse_args(["vision", "search", "--proxy", "params", "--seeds", "0", "--population", "4",
                         "--generations", "2", "--tournament", "2", "--children", "2", "--out", str(tmp_path),
                         "--scores-csv", str(tmp_path / "scores.csv")])
    assert args.func(args) == 0
    (o,) = json.loads((tmp_path / "search.json").read_text())
    assert o["best_accuracy"] == pytest.approx(94.37, abs=0.01) and o["evaluations"] == 8
