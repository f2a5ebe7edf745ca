"""The `--distributed` path of `ctrnas train` (and of the final stage of `ctrnas run`), under torchrun:

    torchrun --nproc_per_node 2 -m ctrnas train --data D --baseline dlrm --distributed [--sharding row_wise]

Every rank builds the same model from the recipe's seed and calls `train_and_test_distributed`; the
embedding tables are sharded, each rank trains on its slice of every global batch, metrics are computed
over all ranks, and rank 0 alone prints, writes `metrics.json` and the gathered (unsharded) `model.pt`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# dmp.SHARDING_TYPES, repeated so that building the CLI parser does not import torch
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


def sharding_from_args(args):
    """The ShardingConfig of the parsed flags (auto -> the planner)."""
    from ctrnas.distributed.dmp import ShardingConfig

    return ShardingConfig(None if args.sharding == "auto" else args.sharding)


def train_and_test_distributed(model, data_dir, cfg, out_dir, name: str, sharding=None,
                               train_fraction: float | None = None, extra: dict | None = None,
                               backend: str | None = None) -> dict | None:
    """`ctrnas.train.run.train_and_test` on every rank of a torchrun job; rank 0 returns the metrics dict
    (same keys, plus world_size and the sharding of every table), the other ranks None."""
    from ctrnas.config import to_dict
    from ctrnas.data.dataset import atomic_write_text, read_meta, versions
    from ctrnas.distributed.checkpoint import gather_state_dict
    from ctrnas.distributed.dmp import init_distributed
    from ctrnas.distributed.trainer import DistributedTrainer
    from ctrnas.train.batches import dataset_batches, fraction_rows
    from ctrnas.train.metrics import constant_logloss
    from ctrnas.train.run import count_parameters

    env = init_distributed(backend)
    meta = read_meta(data_dir)
    splits = meta["splits"]
    train = dataset_batches(data_dir, "train", cfg.batch_size, shuffle=True, seed=cfg.seed, fraction=train_fraction)
    val = dataset_batches(data_dir, "val", cfg.eval_batch_size) if splits.get("val", {}).get("rows") else None
    test = dataset_batches(data_dir, "test", cfg.eval_batch_size) if splits.get("test", {}).get("rows") else None
    params = count_parameters(model)  # before sharding: the sharded model holds only this rank's slices
    trainer = DistributedTrainer(model, cfg, env, sharding, out_dir)
    summary = trainer.fit(train, val)
    test_result = trainer.evaluate(test) if test is not None else None
    state = gather_state_dict(trainer.model)  # collective: every rank takes part
    if not env.is_main:
        return None
    train_ctr = splits.get("train", {}).get("ctr")
    metrics = {
        "model": name, "data": str(data_dir), "params": params,
        "train": {k: v for k, v in summary.items() if k != "val_history"},
        "train_rows_used": train.rows if train_fraction is None else fraction_rows(splits["train"]["rows"],
                                                                                  train_fraction),
        "val_history": summary["val_history"],
        "val": summary["val_history"][-1] if summary["val_history"] else None,
        "test": test_result.to_dict() if test_result is not None else None,
        "bayes_logloss": meta.get("bayes_logloss"),
        "constant_logloss": constant_logloss(train_ctr) if train_ctr is not None else None,
        "config": to_dict(cfg), "versions": versions(),
        "distributed": {"world_size": env.world_size, "backend": env.backend, "sharding": trainer.sharding},
        **(extra or {}),
    }
    if out_dir is not None:
        import torch

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        torch.save(state, out / "model.pt")
        atomic_write_text(out / "metrics.json", json.dumps(metrics, indent=2))
    return metrics
