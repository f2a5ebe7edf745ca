"""SynFlow (Tanaka et al. 2020; zero-cost form of Abdelfattah et al. 2021): Σ |θ ⊙ ∂R/∂θ| with
R = Σ outputs of the network whose parameters are replaced by |θ| (sign linearisation), run in
float64 on an all-ones input. Data- and label-free.

Computed with `torch.func.functional_call` on |θ| copies, so the model's weights are never written.
CTR adaptation: dense (floating) inputs become ones; categorical ids (a KeyedJaggedTensor) are kept
from the first batch, and the score is divided by the batch size (per-sample SynFlow; for image
inputs every row is identical, so this equals the usual batch-of-one score). Eval mode (the
zero-cost code drops BatchNorm; eval-mode BN is the closest sign-preserving stand-in).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.func import functional_call

from ctrnas.proxies.base import Proxy, flat_params, register, select_groups


def _ones_like_inputs(inputs: tuple, dtype) -> tuple:
    return tuple(torch.ones_like(x, dtype=dtype) if torch.is_tensor(x) and x.is_floating_point() else x
                 for x in inputs)


@register("synflow")
@dataclass(frozen=True)
class SynFlow(Proxy):
    needs_labels = False
    modules: str = "ctr"
    embeddings: bool = False
    double: bool = True

    def _compute(self, model, batches, loss_fn):
        self._set_mode(model, "eval")
        chosen = flat_params(select_groups(model, self.modules, self.embeddings))
        try:
            total, out, dtype = self._flow(model, batches, chosen, torch.float64 if self.double else torch.float32)
        except RuntimeError:
            # Models that build float32 tensors inside forward cannot run in float64: fall back.
            total, out, dtype = self._flow(model, batches, chosen, torch.float32)
        n = int(out.shape[0]) if out.ndim else 1
        return total / n, {"synflow": total / n}, {"params": [n_ for n_, _ in chosen], "batch_size": n,
                                                   "dtype": str(dtype)}

    @staticmethod
    def _flow(model, batches, chosen, dtype):
        chosen_ids = {id(p) for _, p in chosen}
        lin = {n: p.detach().abs().to(dtype).requires_grad_(id(p) in chosen_ids)
               for n, p in model.named_parameters()}
        bufs = {n: (b.to(dtype) if b.is_floating_point() else b) for n, b in model.named_buffers()}
        out = functional_call(model, (lin, bufs), _ones_like_inputs(batches[0][0], dtype))
        names = [n for n, _ in chosen]
        gs = torch.autograd.grad(out.sum(), [lin[n] for n in names], allow_unused=True)
        total = sum(float((lin[n] * g).abs().sum().detach()) for n, g in zip(names, gs) if g is not None)
        return total, out, dtype
