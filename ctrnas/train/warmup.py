"""Supernet warm-up (SiGeo's "sub-one-shot" level): NASRec supernet training on the first `fraction` of
the training split. fraction 0 = zero-shot (no training), 1.0 = one epoch (one-shot).

Per step (NASRec's released code; docs/nasrec.md): with probability p_full(t) = max(0, 1 - t / S) the full supernet
(all ops, max widths, all connections) is trained, otherwise one subnet drawn by the space's sampler
(single operator per block, any connection, binomial fan-in). NASRec fixes S = 15000 steps; we make it
relative, S = full_supernet_ratio x warm-up steps (default 0.2, close to NASRec's 15000 / 71.6k Criteo
steps), so a 1% warm-up, like a full one, spends its last 80% on sampled subnets. With a fixed S the
published SiGeo code trains almost only the full supernet at 1% (p_full >= 0.95 throughout).

The per-step choice is drawn from numpy Generator([seed, step]), so a resumed warm-up replays it exactly.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
from torch import nn
from torchrec.datasets.utils import Batch

from ctrnas.train.batches import BatchSource
from ctrnas.train.config import TrainConfig, WarmupConfig
from ctrnas.train.trainer import Trainer


def full_probability(step: int, full_steps: float) -> float:
    """p_full(t) = max(0, 1 - t / S): NASRec's linearly decaying chance of training the whole supernet."""
    if full_steps <= 0:
        return 0.0
    return max(0.0, 1.0 - step / full_steps)


def step_choice(space, seed: int, step: int, full_steps: float):
    """(full?, arch) of warm-up step `step`: a pure function of (seed, step)."""
    rng = np.random.default_rng([seed, step])
    if rng.random() < full_probability(step, full_steps):
        return True, None
    arch = space.sample(rng)
    # a space with several embedding widths: the supernet trains its subnets at its own (the same draws)
    return False, (dataclasses.replace(arch, emb_dim=None) if arch.emb_dim is not None else arch)


def warmup(supernet: nn.Module, space, train: BatchSource, cfg: TrainConfig, wcfg: WarmupConfig,
           out_dir: str | Path | None = None) -> dict:
    """Warm `supernet` up in place on `train` (already cut to the first `wcfg.fraction` of the split).

    Returns a summary: steps, rows, seconds, samples/s, and how many steps trained the full supernet.
    """
    if wcfg.fraction == 0.0 or train.rows == 0:
        return {"fraction": wcfg.fraction, "steps": 0, "rows": 0, "seconds": 0.0, "full_supernet_steps": 0,
                "full_supernet_horizon": 0}
    total = len(train) * cfg.epochs
    full_steps = wcfg.full_supernet_ratio * total

    def forward(model: nn.Module, batch: Batch, step: int):
        full, arch = step_choice(space, cfg.seed, step, full_steps)
        return model(batch.dense_features, batch.sparse_features, arch=arch, full=full)

    def eval_forward(model: nn.Module, batch: Batch, step: int):
        return model(batch.dense_features, batch.sparse_features, full=True)

    trainer = Trainer(supernet, cfg, out_dir, forward=forward, eval_forward=eval_forward)
    summary = trainer.fit(train)
    full_count = sum(step_choice(space, cfg.seed, t, full_steps)[0] for t in range(math.ceil(full_steps)))
    return {"fraction": wcfg.fraction, "full_supernet_steps": full_count,
            "full_supernet_horizon": full_steps, **{k: v for k, v in summary.items() if k != "val_history"}}
