"""One model trained with its tables sharded over the torchrun ranks (the `--distributed` path of `ctrnas train`):

    torchrun --nproc_per_node 2 -m ctrnas train --data D --baseline dlrm --distributed [--sharding row_wise]

Every rank builds the same model from the recipe's seed and calls `train_and_test_distributed`; the
embedding tables are sharded, each rank trains on its slice of every global batch, metrics are computed
over all ranks, and rank 0 alone prints, writes `metrics.json` and the gathered (unsharded) `model.pt`.
"""

from __future__ import annotations


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
