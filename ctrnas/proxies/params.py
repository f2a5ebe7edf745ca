"""#params: the number of trainable parameters (a strong zero-cost baseline, SiGeo Table 2)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ctrnas.proxies.base import Proxy, forward, register, trainable_params


@register("params")
@dataclass(frozen=True)
class Params(Proxy):
    """Trainable parameter count. `used_only` counts only parameters a backward pass of the first batch
    reaches, which is the subnet's own share when it is a path through a weight-sharing supernet whose
    `parameters()` still list every candidate op."""

    needs_labels = False
    embeddings: bool = True
    used_only: bool = False

    def _compute(self, model, batches, loss_fn):
        params = trainable_params(model, embeddings=self.embeddings)
        if self.used_only:
            self._set_mode(model, "eval")
            out = forward(model, batches[0])
            gs = torch.autograd.grad(out.float().sum(), [p for _, p in params], allow_unused=True)
            params = [(n, p) for (n, p), g in zip(params, gs) if g is not None]
        count = sum(p.numel() for _, p in params)
        return float(count), {"params": float(count)}, {"params": [n for n, _ in params]}
