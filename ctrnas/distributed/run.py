"""The `--distributed` path of `ctrnas train` (and of the final stage of `ctrnas run`), under torchrun:

    torchrun --nproc_per_node 2 -m ctrnas train --data D --baseline dlrm --distributed [--sharding row_wise]

Every rank builds the same model from the recipe's seed and calls `train_and_test_distributed`; the
embedding tables are sharded, each rank trains on its slice of every global batch, metrics are computed
over all ranks, and rank 0 alone prints, writes `metrics.json` and the gathered (unsharded) `model.pt`.
"""

from __future__ import annotations

import argparse

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
    from ctrnas.distributed.checkpoint import gather_state_dict
    from ctrnas.distributed.dmp import init_distributed
    from ctrnas.distributed.trainer import DistributedTrainer
    from ctrnas.train.run import count_parameters, metrics_record, split_batches, write_results

    env = init_distributed(backend)
    meta, train, val, test = split_batches(data_dir, cfg, train_fraction)
    params = count_parameters(model)  # before sharding: the sharded model holds only this rank's slices
    trainer = DistributedTrainer(model, cfg, env, sharding, out_dir)
    summary = trainer.fit(train, val)
    test_result = trainer.evaluate(test) if test is not None else None
    state = gather_state_dict(trainer.model)  # collective: every rank takes part
    if not env.is_main:
        return None
    dist = {"world_size": env.world_size, "backend": env.backend, "sharding": trainer.sharding}
    metrics = metrics_record(name, data_dir, meta, params, summary, test_result, train, train_fraction, cfg,
                             {"distributed": dist, **(extra or {})})
    write_results(out_dir, state, metrics)
    return metrics
