"""Rank functions for tests and benchmarks (here, not in tests/, so spawned ranks can import them)."""

from __future__ import annotations

import time

import numpy as np
import torch

from ctrnas.distributed.data import slice_batch
from ctrnas.supernet.testing import make_schema
from ctrnas.train.batches import TensorBatches
from ctrnas.train.config import TrainConfig


def toy_data(rows: int = 87, batch: int = 15, seed: int = 0, cards=(50, 7, 30, 11)) -> TensorBatches:
    """Rows with a learnable signal (label depends on C0 and I0), served as fixed global batches."""
    schema = make_schema(3, cards)
    rng = np.random.default_rng(seed)
    dense = torch.as_tensor(rng.normal(size=(rows, 3)), dtype=torch.float32)
    ids = torch.as_tensor(np.stack([rng.integers(0, c, size=rows) for c in cards], axis=1))
    logit = dense[:, 0] + (ids[:, 0] % 2).float() * 2 - 1
    labels = (torch.as_tensor(rng.random(rows), dtype=torch.float32) < torch.sigmoid(logit)).float()
    return schema, TensorBatches(dense, ids, labels, schema.sparse_names, batch)


def toy_model(schema, kind: str = "dlrm", seed: int = 0):
    """A small model: a baseline by name, 'supernet' (nasrec-small, run as its full supernet), or 'mixed' (a
    subnet with per-table widths: one field dropped, one narrowed)."""
    if kind == "mixed":
        import dataclasses

        from ctrnas.supernet.export import export
        from ctrnas.supernet.io import build_supernet

        space = {"base": "ctrnas-small", "num_blocks": 2, "dense_dims": [8, 16], "sparse_tokens": [4],
                 "table_dims": [0, 4, 8]}
        net = build_supernet(schema, space, seed, emb_dim=8)
        names = schema.sparse_names
        arch = dataclasses.replace(net.space.sample(np.random.default_rng(seed)),
                                   table_dims=tuple(sorted({names[1]: 0, names[2]: 4}.items())))
        return export(net, arch, init="fresh", seed=seed)
    if kind == "supernet":
        from ctrnas.supernet.io import build_supernet

        return build_supernet(schema, "nasrec-small", seed, emb_dim=8)
    from ctrnas.train.baselines import build_baseline

    return build_baseline(kind, schema, dim=8, seed=seed)


def supernet_forward(model, batch, step):
    return model(batch.dense_features, batch.sparse_features, full=True)


def toy_config(**over) -> TrainConfig:
    """Sparse Adagrad on the tables, the update DMP's sharded tables make, so a one-process run with it is the
    reference a sharded run equals to float rounding (the fused kernel drifts from it by ~1e-5 over a run)."""
    return TrainConfig(**{"lr": 0.05, "batch_size": 16, "warmup_ratio": 0.25, "progress": False,
                          "embedding_update": "sparse", **over})


def train_ranks(env, specs: list[dict], out_path: str) -> None:
    """For each spec {sharding, model, fit, resume, resume_at, out_dir, config, val_seed}: train on this rank's
    slices (step by step, recording the losses, or with `fit` and checkpoints into out_dir; `resume` stops after
    `resume_at` steps, default 3, and finishes with a new trainer resumed from the checkpoint), then gather
    weights and evaluate; rank 0 saves all results to `out_path`."""
    from ctrnas.distributed.checkpoint import gather_state_dict
    from ctrnas.distributed.dmp import ShardingConfig
    from ctrnas.distributed.trainer import DistributedTrainer

    results = []
    for spec in specs:
        schema, data = toy_data()
        model = toy_model(schema, spec.get("model", "dlrm"))
        fwd = supernet_forward if spec.get("model") == "supernet" else None
        kw = {"forward": fwd, "eval_forward": fwd} if fwd else {}
        cfg = toy_config(**spec.get("config", {}))
        val = toy_data(seed=spec["val_seed"])[1] if "val_seed" in spec else data
        trainer = DistributedTrainer(model, cfg, env, ShardingConfig(spec.get("sharding")),
                                     out_dir=spec.get("out_dir"), **kw)
        initial = gather_state_dict(trainer.model)
        losses, summary = [], None
        if spec.get("resume"):
            fit_val = val if spec.get("fit") else None
            trainer.fit(data, val=fit_val, max_steps=spec.get("resume_at", 3))
            trainer = DistributedTrainer(toy_model(schema, spec.get("model", "dlrm")), cfg, env,
                                         ShardingConfig(spec.get("sharding")), out_dir=spec["out_dir"], **kw)
            summary = trainer.fit(data, val=fit_val)
        elif spec.get("fit"):
            summary = trainer.fit(data, val=val)
        else:
            for batch in data.batches():
                losses.append(trainer.train_step(slice_batch(batch, env.rank, env.world_size), len(data)))
        metrics = trainer.evaluate(data).to_dict()
        final = gather_state_dict(trainer.model)
        results.append({"spec": spec, "losses": losses, "initial": initial, "final": final, "summary": summary,
                        "metrics": metrics, "sharding": trainer.sharding})
    if env.is_main:
        torch.save(results, out_path)


def step_time_ranks(env, steps: int, rows: int, cards: tuple, sharding: str | None, out_path: str) -> None:
    """Median seconds per training step of a DLRM on synthetic global batches of `rows` (benchmarks)."""
    from ctrnas.distributed.dmp import ShardingConfig
    from ctrnas.distributed.trainer import DistributedTrainer

    schema, data = toy_data(rows * (steps + 2), rows, cards=cards)
    trainer = DistributedTrainer(toy_model(schema), toy_config(batch_size=rows), env, ShardingConfig(sharding))
    times = []
    for batch in data.batches():
        local = slice_batch(batch, env.rank, env.world_size)
        t0 = time.perf_counter()
        trainer.train_step(local, len(data))
        times.append(time.perf_counter() - t0)
    if env.is_main:
        torch.save({"step_s": float(np.median(times[2:])), "sharding": trainer.sharding}, out_path)


def train_command_ranks(env, data_dir: str, out_dir: str, sharding: str | None, baseline: str = "dlrm") -> None:
    """What `torchrun ... ctrnas train --baseline B --distributed` runs on each rank (tests)."""
    from ctrnas.data.dataset import load_schema
    from ctrnas.distributed.run import train_and_test_distributed
    from ctrnas.distributed.dmp import ShardingConfig
    from ctrnas.train.baselines import build_baseline

    cfg = toy_config(batch_size=64, eval_batch_size=256)
    model = build_baseline(baseline, load_schema(data_dir), cfg.embedding_dim, cfg.row_cap, cfg.seed)
    train_and_test_distributed(model, data_dir, cfg, out_dir, baseline, ShardingConfig(sharding))
