"""Fisher–Rao norm θᵀF̂θ of a network with the empirical Fisher from per-sample or batch-mean gradients.

SiGeo defines the empirical Fisher per sample (§3.3: F̂ = (1/N) Σ_n ∇ℓ_n ∇ℓ_nᵀ) but computes the FR
norm from batch-mean gradients (App. E: (1/k) Σ_i (θᵀ∇ℓ(D_i))²); the library's `sigeo` follows App. E
(docs/proxies.md, A7). This module gives both readings from one pass, as a diagnostic:

    θᵀ∇ℓ_n = d/dt ℓ_n((1 + t) θ) at t = 0,

one forward-mode derivative per batch gives every per-sample directional derivative d_n at once.
With BatchNorm in train mode ℓ_n depends on the whole batch through the batch statistics; d_n is the
derivative of sample n's loss as computed in that batch (what `loss_n.backward()` would give).

    fr_sample = mean_n d_n²                   (§3.3, per-sample empirical Fisher)
    fr_batch  = mean_i (mean_{n∈D_i} d_n)²    (App. E; equals the library's `fr_raw`)
    dot_mean  = mean_n d_n                    (signed: < 0 when scaling the weights up lowers the loss)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, jvp


def per_sample_dots(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """d_n = θᵀ∇_θ ℓ_n for every sample of one batch (θ = all trainable parameters), float64.

    The model's parameters and buffers (BN running statistics) are left unchanged.
    """
    params = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    frozen = {n: p.detach() for n, p in model.named_parameters() if not p.requires_grad}
    buffers = {n: b.detach() for n, b in model.named_buffers()}

    def losses(t):
        scaled = {n: p * (1 + t) for n, p in params.items()}
        # Fresh copies made inside the transform: train-mode BN updates its running statistics in place.
        own = {n: b.clone() for n, b in buffers.items()}
        out = functional_call(model, {**scaled, **frozen, **own}, (x,))
        return F.cross_entropy(out, y, reduction="none")

    ref = next(iter(params.values()))
    t0 = torch.zeros((), dtype=ref.dtype, device=ref.device)
    _, dots = jvp(losses, (t0,), (torch.ones_like(t0),))
    return dots.detach().double()


def fr_norms(model: nn.Module, batches) -> dict[str, float]:
    """The FR norms of `batches` ([((x,), y), ...]) at the model's current weights and train/eval mode."""
    per_batch = [per_sample_dots(model, inputs[0], y) for inputs, y in batches]
    d = torch.cat(per_batch)
    fr_sample = float(d.square().mean())
    fr_batch = float(torch.stack([b.mean() for b in per_batch]).square().mean())
    log = lambda v: math.log(v) if v > 0 else float("nan")  # noqa: E731
    return {
        "fr_sample": log(fr_sample), "fr_batch": log(fr_batch), "fr_sample_raw": fr_sample,
        "fr_batch_raw": fr_batch, "dot_mean": float(d.mean()), "dot_pos_frac": float((d > 0).double().mean()),
    }
