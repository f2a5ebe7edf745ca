"""plain (Mellor et al. / Abdelfattah et al. 2021): Σ θ ⊙ ∇θ L over the selected weights (no abs)."""

from __future__ import annotations

from dataclasses import dataclass

from ctrnas.proxies.base import Proxy, flat_params, mean_grad_score, register, select_groups


@register("plain")
@dataclass(frozen=True)
class Plain(Proxy):
    num_batches: int = 1
    modules: str = "ctr"
    embeddings: bool = False
    mode: str = "train"

    def _compute(self, model, batches, loss_fn):
        self._set_mode(model)
        params = flat_params(select_groups(model, self.modules, self.embeddings))
        v, n = mean_grad_score(model, batches, loss_fn, params, self.num_batches, lambda ps, gs: sum(
            float((p.detach().double() * g.double()).sum()) for (_, p), g in zip(ps, gs)))
        return v, {"plain": v}, {"params": [n_ for n_, _ in params], "batches": n}
