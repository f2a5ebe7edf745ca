"""Zen-score (Lin et al. 2021): log E‖f(x) − f(x + γε)‖₁ + Σ_BN log sqrt(mean σ²_BN), with x, ε ~ N(0, I),
γ = 1e-2, f the pre-classifier feature map, in train mode. Label-free.

- f: the output of `feature_module`, or by default the *input* of the last nn.Linear (the pre-GAP map
  of Zen-NAS's CNNs is not identifiable in a generic module; the post-pool features are used).
- The BN term uses each BatchNorm's batch variance on the unperturbed pass (the running variance of a
  momentum-1 BN, as in Zen-NAS's own networks).
- The weights are *not* re-initialised (Zen-NAS redraws Gaussian weights; we score the given ones).
- CTR: x is the continuous input (dense features and pooled embeddings, `continuous.py`); with
  `gaussian_input=False` the first batch's values are used instead of Gaussian x.
Random draws (documented so a test can repeat them): a torch.Generator seeded with `seed` draws x for
each continuous input in order (if `gaussian_input`), then ε for each, all `torch.randn(shape)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ctrnas.errors import CtrnasError
from ctrnas.proxies.base import Proxy, register
from ctrnas.proxies.continuous import ContinuousInputs


def feature_hook(model: nn.Module, feature_module: str | None, store: dict):
    """Register a hook that stores the feature map in store["f"]; returns the handle."""
    if feature_module is not None:
        mod = dict(model.named_modules()).get(feature_module)
        if mod is None:
            raise CtrnasError(f"feature_module '{feature_module}' is not a module of the model")
        return mod.register_forward_hook(lambda m, i, o: store.__setitem__("f", o))
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise CtrnasError("the model has no nn.Linear; pass feature_module")
    return linears[-1].register_forward_pre_hook(lambda m, i: store.__setitem__("f", i[0]))


@register("zen")
@dataclass(frozen=True)
class Zen(Proxy):
    needs_labels = False
    mixup_gamma: float = 1e-2
    seed: int = 0
    gaussian_input: bool = True
    feature_module: str | None = None
    mode: str = "train"

    def _compute(self, model, batches, loss_fn):
        self._set_mode(model)
        ci = ContinuousInputs(model, batches[0][0])
        reps = ci.capture()
        g = torch.Generator().manual_seed(self.seed)
        # Drawn on the CPU (a CPU generator), then moved: the same draws on every device.
        x = [torch.randn(r.shape, generator=g, dtype=r.dtype).to(r.device) for r in reps] if self.gaussian_input \
            else reps
        eps = [torch.randn(r.shape, generator=g, dtype=r.dtype).to(r.device) for r in reps]
        x2 = [a + self.mixup_gamma * e for a, e in zip(x, eps)]
        store, bn_var = {}, []
        bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]

        def bn_hook(m, inp):
            if store.get("second"):   # only the unperturbed (first) pass
                return
            t = inp[0].detach()
            dims = [0] + list(range(2, t.ndim))
            bn_var.append(t.var(dim=dims, unbiased=False).double().mean())

        handles = [feature_hook(model, self.feature_module, store)] + [b.register_forward_pre_hook(bn_hook)
                                                                      for b in bns]
        try:
            with torch.no_grad():
                ci.run(x)
                f1 = store["f"]
                store["second"] = True
                ci.run(x2)
                f2 = store["f"]
        finally:
            for h in handles:
                h.remove()
        delta = float((f1 - f2).abs().double().reshape(f1.shape[0], -1).sum(1).mean())
        bn_term = sum(0.5 * math.log(float(v)) for v in bn_var)
        v = (math.log(delta) if delta > 0 else float("-inf")) + bn_term
        return v, {"zen": v, "log_delta": math.log(delta) if delta > 0 else float("-inf"), "bn": bn_term}, \
            {"inputs": ci.names, "bn_layers": len(bn_var)}
