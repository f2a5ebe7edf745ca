"""jacov (Mellor et al. 2021, v1; zero-cost form of Abdelfattah et al. 2021): with J the per-sample
Jacobian of Σ outputs w.r.t. the input and Σ_J its correlation matrix over the batch,
score = −Σ_i [log(λ_i + k) + 1/(λ_i + k)], k = 1e-5, λ_i the eigenvalues of Σ_J. Label-free.

CTR: the input is the continuous part, dense features plus pooled embeddings (`continuous.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ctrnas.proxies.base import Proxy, register
from ctrnas.proxies.continuous import ContinuousInputs, flatten_per_sample


def input_jacobian(model, batch) -> tuple[torch.Tensor, list[str]]:
    """[B, D] gradient of Σ outputs w.r.t. each sample's continuous inputs (as zero-cost `get_batch_jacobian`)."""
    ci = ContinuousInputs(model, batch[0])
    reps = [r.clone().requires_grad_(True) for r in ci.capture()]
    out = ci.run(reps)
    gs = torch.autograd.grad(out.sum(), reps, allow_unused=True)
    return flatten_per_sample([torch.zeros_like(r) if g is None else g for r, g in zip(reps, gs)]), ci.names


def jacov_score(J: np.ndarray, k: float = 1e-5) -> float:
    corrs = np.corrcoef(J)
    v = np.linalg.eigvalsh(corrs)
    return float(-np.sum(np.log(v + k) + 1.0 / (v + k)))


@register("jacov")
@dataclass(frozen=True)
class Jacov(Proxy):
    needs_labels = False
    mode: str = "train"

    def _compute(self, model, batches, loss_fn):
        self._set_mode(model)
        J, names = input_jacobian(model, batches[0])
        v = jacov_score(J.detach().double().cpu().numpy())
        return v, {"jacov": v}, {"inputs": names, "batch_size": int(J.shape[0])}
