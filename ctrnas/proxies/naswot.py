"""NASWOT (Mellor et al. 2021, v2): log|det K_H| where K_H = Σ_layers [c cᵀ + (1−c)(1−c)ᵀ] and c is the
binary ReLU activation code of each sample (the Hamming-similarity kernel). Label-free.

Codes come from forward hooks on `nn.ReLU` modules (input > 0, as the official code). A model with
no ReLU *modules* (e.g. one calling `F.relu`) falls back to the sign codes of the outputs of
Linear/Conv layers (the pre-activations a following ReLU would threshold); `meta["units"]` says which.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ctrnas.proxies.base import Proxy, forward, register


@register("naswot")
@dataclass(frozen=True)
class Naswot(Proxy):
    needs_labels = False
    mode: str = "train"

    def _compute(self, model, batches, loss_fn):
        self._set_mode(model)
        relus = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.ReLU)]
        units = "relu"
        if not relus:
            relus = [(n, m) for n, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
            units = "linear_preactivation"
        K = {}
        used = []

        def hook_for(name, pre):
            def hook(mod, inp, out):
                x = (inp[0] if pre else out).detach()
                c = (x.reshape(x.shape[0], -1) > 0).double()
                k = c @ c.T + (1 - c) @ (1 - c).T
                K["k"] = K.get("k", 0) + k
                used.append(name)
            return hook

        handles = [m.register_forward_hook(hook_for(n, units == "relu")) for n, m in relus]
        try:
            with torch.no_grad():
                forward(model, batches[0])
        finally:
            for h in handles:
                h.remove()
        if "k" not in K:
            return float("nan"), {"naswot": float("nan")}, {"units": units, "layers": []}
        sign, logdet = torch.linalg.slogdet(K["k"])
        v = float(logdet) if float(sign) > 0 else float("-inf")
        return v, {"naswot": v}, {"units": units, "layers": used, "batch_size": int(K["k"].shape[0])}
