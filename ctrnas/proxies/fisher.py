"""Fisher (Theis et al. 2018 / Turner et al., zero-cost form of Abdelfattah et al. 2021): for each
selected layer's output activation a with loss gradient ∂L/∂a, per sample and channel
g = Σ_{dims ≥ 2} a ⊙ ∂L/∂a, and the layer's score is Σ_channels ½·mean_batch g²; the value sums layers.
Layers: Linear/Conv (the zero-cost code's), or any module owning a selected ≥2-D weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ctrnas.proxies.base import Proxy, batch_loss, register, select_groups


@register("fisher")
@dataclass(frozen=True)
class Fisher(Proxy):
    num_batches: int = 1
    modules: str = "ctr"
    mode: str = "train"

    def _compute(self, model, batches, loss_fn):
        self._set_mode(model)
        names = list(select_groups(model, self.modules, embeddings=False))
        mods = dict(model.named_modules())
        scores = []
        for batch in batches[: self.num_batches]:
            acts = {}

            def hook_for(name):
                def hook(mod, inp, out):
                    if torch.is_tensor(out) and out.requires_grad:
                        out.retain_grad()
                        acts[name] = out
                return hook

            handles = [mods["" if n == "<root>" else n].register_forward_hook(hook_for(n)) for n in names]
            try:
                loss = batch_loss(model, batch, loss_fn)
            finally:
                for hd in handles:
                    hd.remove()
            loss.backward()
            total = 0.0
            for a in acts.values():
                if a.grad is None:
                    continue
                g = (a.detach() * a.grad).double()
                if g.ndim > 2:
                    g = g.sum(dim=tuple(range(2, g.ndim)))
                total += float(g.pow(2).mean(0).mul(0.5).sum())
            scores.append(total)
            model.zero_grad(set_to_none=True)
        v = sum(scores) / len(scores)
        return v, {"fisher": v}, {"layers": names, "batches": len(scores)}
