"""plain (Mellor et al. / Abdelfattah et al. 2021): Σ θ ⊙ ∇θ L over the selected weights (no abs)."""

from __future__ import annotations

from dataclasses import dataclass

from ctrnas.proxies.base import Proxy, flat_params, loss_grads, register, select_groups


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
        scores = []
        for batch in batches[: self.num_batches]:
            _, gs = loss_grads(model, batch, loss_fn, [p for _, p in params])
            scores.append(sum(float((p.detach().double() * g.double()).sum()) for (_, p), g in zip(params, gs)))
        v = sum(scores) / len(scores)
        return v, {"plain": v}, {"params": [n for n, _ in params], "batches": len(scores)}
