"""Warm-up of one NB201 network before scoring (SiGeo Exp. 3, Table 3: 10/20/40% of the training data).

NB201 has no weight-sharing supernet, so each candidate is warmed up on its own. SiGeo does not state
the optimizer; we use NB201's own training recipe (SGD, Nesterov momentum 0.9, weight decay 5e-4,
lr 0.1 with cosine decay) for a single pass over `fraction` of the training images given.

A fraction above 1 (not in the paper) means round(fraction * N) images drawn as successive reshuffled
passes over the N images, e.g. 1.25 of a 4000-image sample = 5000 images = 1.25 epochs, the number of
images (and steps) of the paper's 10% of CIFAR-10's 50,000, but with every image seen more than once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ctrnas.errors import RecipeError


@dataclass(frozen=True)
class WarmupConfig:
    """One pass over ceil(fraction * N / batch_size) seeded batches of the N training images."""

    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    batch_size: int = 64

    def __post_init__(self):
        if self.lr <= 0 or self.batch_size < 1:
            raise RecipeError("warmup", "lr/batch_size", f"expected positive values, got {self.lr}, {self.batch_size}")


def warmup_steps(fraction: float, num_images: int, batch_size: int) -> int:
    """Number of optimizer steps for `fraction` x `num_images` images (> 1: several passes)."""
    if not fraction >= 0.0:
        raise RecipeError("warmup", "fraction", f"expected >= 0, got {fraction}")
    return math.ceil(round(fraction * num_images) / batch_size)


def warm_up(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    fraction: float,
    generator: torch.Generator,
    config: WarmupConfig = WarmupConfig(),
) -> list[float]:
    """Train `model` in place on a seeded `fraction` of the images; returns the per-step losses."""
    steps = warmup_steps(fraction, len(labels), config.batch_size)
    if steps == 0:
        return []
    total = round(fraction * len(labels))
    passes = [torch.randperm(len(labels), generator=generator) for _ in range(max(1, math.ceil(total / len(labels))))]
    order = torch.cat(passes)[:total]  # fraction <= 1: exactly the first pass's prefix, as before
    opt = torch.optim.SGD(
        model.parameters(), lr=config.lr, momentum=config.momentum, nesterov=True, weight_decay=config.weight_decay
    )
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    model.train()
    losses = []
    # The order is drawn on the CPU (same images on every device); the losses are read once at the end,
    # so a CUDA device is never waited for between steps.
    for idx in order.to(images.device).split(config.batch_size):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(images[idx]), labels[idx])
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.detach())
    opt.zero_grad(set_to_none=True)
    return [float(v) for v in torch.stack(losses).tolist()]
