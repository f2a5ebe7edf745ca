"""Flags several verbs share (sharded training under torchrun)."""

from __future__ import annotations

import argparse

# ctrnas.distributed.dmp.SHARDING_TYPES, repeated so that building the parser does not import torch (a test
# checks they agree)
SHARDING_CHOICES = ("auto", "table_wise", "row_wise", "column_wise", "table_column_wise", "data_parallel")


def add_distributed_args(p: argparse.ArgumentParser) -> None:
    """The flags `ctrnas train` / `ctrnas run` add for sharded training."""
    p.add_argument("--distributed", action="store_true",
                   help="shard the embedding tables over the torchrun ranks (TorchRec DistributedModelParallel)")
    p.add_argument("--sharding", choices=SHARDING_CHOICES, default="auto",
                   help="how tables are split: auto = TorchRec's planner; row_wise is built by hand (on CPU "
                        "the planner does not offer it)")
    p.add_argument("--dist-backend", choices=("gloo", "nccl"), default=None,
                   help="collective backend (default: nccl with GPUs, gloo on CPU)")


def sharding_from_args(args) -> str | None:
    """The sharding type of the parsed flags (None: TorchRec's planner)."""
    return None if args.sharding == "auto" else args.sharding


def add_recipe_args(p: argparse.ArgumentParser, positional: bool) -> None:
    """RECIPE (or --recipe), --set KEY=VALUE overrides and --no-progress."""
    if positional:
        p.add_argument("recipe", metavar="RECIPE", help="recipe YAML (see recipes/)")
    else:
        p.add_argument("--recipe", "-r", required=True, metavar="RECIPE", help="recipe YAML (see recipes/)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a recipe value, e.g. --set warmup.fraction=0.1 --set search.workers=2 "
                        "(repeatable; VALUE is read as YAML)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")
    add_device_arg(p)


def add_device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default=None, metavar="DEVICE",
                   help="auto | cpu | cuda | cuda:N for every training (default: the recipe's train.device, auto: "
                        "CUDA when torch sees one)")


def floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def check_prepared(path: str | None) -> None:
    """A --data folder that cannot be a prepared dataset fails here, before torch is imported (seconds)."""
    from pathlib import Path

    from ctrnas.errors import CtrnasError

    if path is not None and not (Path(path) / "meta.json").is_file():
        raise CtrnasError(f"{path}: no meta.json: not a prepared dataset, or its preparation did not finish "
                          "(re-run `ctrnas prepare`)")


def check_exist(*paths: str | None) -> None:
    """Input files or folders that are not there fail here, before torch is imported."""
    from pathlib import Path

    from ctrnas.errors import PathError

    for p in paths:
        if p is not None and not Path(p).exists():
            raise PathError(p, "no such file or folder")
