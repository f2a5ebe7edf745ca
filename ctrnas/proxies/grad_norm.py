"""grad-norm (Abdelfattah et al. 2021): Σ over layers of ‖∇_W L‖₂, or the thesis's M_Grad (Eq. 7.2),
the global ‖∇θ L‖₂ (`reduce="global"`). The mean over `num_batches` per-batch scores."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ctrnas.proxies.base import Proxy, check_choice, flat_params, mean_grad_score, register, select_groups


@register("grad_norm")
@dataclass(frozen=True)
class GradNorm(Proxy):
    num_batches: int = 1
    modules: str = "ctr"
    embeddings: bool = False
    reduce: str = "layer_sum"     # "layer_sum" (zero-cost-proxies code) | "global" (M_Grad)
    mode: str = "train"

    def _compute(self, model, batches, loss_fn):
        check_choice(self.name, "reduce", self.reduce, ["layer_sum", "global"])
        self._set_mode(model)
        params = flat_params(select_groups(model, self.modules, self.embeddings))
        def score(ps, gs):
            gs = [g.double() for g in gs]
            if self.reduce == "layer_sum":
                return sum(float(g.norm()) for g in gs)
            return float(torch.sqrt(sum((g * g).sum() for g in gs)))

        v, n = mean_grad_score(model, batches, loss_fn, params, self.num_batches, score)
        return v, {"grad_norm": v}, {"params": [n_ for n_, _ in params], "batches": n}
