"""GraSP (Wang et al. 2020, zero-cost form of Abdelfattah et al. 2021): Σ −θ ⊙ (H g) over the selected
weights, where g = ∇θ L and H g the Hessian–vector product (double backprop); that sum is −θᵀHg.
`form="thesis"` gives M_GraSP (thesis Eq. 7.3), |θᵀ H g|. Mean over `num_batches` batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ctrnas.proxies.base import (Proxy, check_choice, flat_params, loss_grads, math_attention, register,
                                select_groups)


@register("grasp")
@dataclass(frozen=True)
class Grasp(Proxy):
    num_batches: int = 1
    modules: str = "ctr"
    embeddings: bool = False
    form: str = "zero_cost"      # "zero_cost": −θᵀHg | "thesis": |θᵀHg|
    mode: str = "train"

    def _compute(self, model, batches, loss_fn):
        check_choice(self.name, "form", self.form, ["zero_cost", "thesis"])
        self._set_mode(model)
        params = [p for _, p in flat_params(select_groups(model, self.modules, self.embeddings))]
        scores = []
        for batch in batches[: self.num_batches]:
            with math_attention():
                _, g = loss_grads(model, batch, loss_fn, params, create_graph=True)
            z = sum((gi * gi.detach()).sum() for gi in g if gi.requires_grad)
            if not torch.is_tensor(z) or not z.requires_grad:
                scores.append(0.0)
                continue
            hg = torch.autograd.grad(z, params, allow_unused=True)
            thg = sum(float((p.detach().double() * h.double()).sum()) for p, h in zip(params, hg) if h is not None)
            scores.append(-thg if self.form == "zero_cost" else abs(thg))
        v = sum(scores) / len(scores)
        return v, {"grasp": v}, {"batches": len(scores)}
