"""l2-norm (Abdelfattah et al. 2021): Σ over layers of ‖W‖₂ (data-free)."""

from __future__ import annotations

from dataclasses import dataclass

from ctrnas.proxies.base import Proxy, flat_params, register, select_groups


@register("l2_norm")
@dataclass(frozen=True)
class L2Norm(Proxy):
    needs_labels = False
    modules: str = "ctr"
    embeddings: bool = False

    def _compute(self, model, batches, loss_fn):
        params = flat_params(select_groups(model, self.modules, self.embeddings))
        v = sum(float(p.detach().double().norm()) for _, p in params)
        return v, {"l2_norm": v}, {"params": [n for n, _ in params], "batches": 0}
