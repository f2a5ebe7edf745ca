"""HNAS (thesis Ch. 7, Eq. 7.7): minimise κ(A)/M(A) + μ·(M(A)² − ν)², with M = M_Trace =
sqrt(trace(Θ)/m) (Eq. 7.4) and κ = λ_max/λ_min of the m×m NTK on a batch (b = 64).

The value is the *negative* objective (higher is better, like every proxy); terms keep κ, M and the
penalty. μ = 0 gives the realizable-case ranking by κ/M (Cor. 7.1/7.2). The BO over (μ, ν) belongs to
the search layer: `objective(kappa, m, mu, nu)` evaluates the pool vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctrnas.proxies.base import register
from ctrnas.proxies.ntk import NtkTrace


def objective(kappa, m, mu: float = 0.0, nu: float = 0.0):
    """κ/M + μ(M² − ν)² (Eq. 7.7 with F(x) = x², t = 1); works on numpy arrays of a pool."""
    kappa, m = np.asarray(kappa, dtype=float), np.asarray(m, dtype=float)
    return kappa / m + mu * (m * m - nu) ** 2


@register("hnas")
@dataclass(frozen=True)
class Hnas(NtkTrace):
    """HNAS fitness: minus κ/M + μ(M² − ν)² of the empirical NTK (higher is better).

    The NTK options (num_samples, method, embeddings, max_jacobian_mb, mode) come from NtkTrace."""

    mu: float = 0.0
    nu: float = 0.0

    def _compute(self, model, batches, loss_fn):
        K, spec, names = self._kernel(model, batches)
        m = float(np.sqrt(spec["trace"] / K.shape[0]))
        obj = float(objective(spec["cond"], m, self.mu, self.nu))
        terms = {"kappa": spec["cond"], "m_trace": m, "penalty": self.mu * (m * m - self.nu) ** 2,
                 "objective": obj, "lambda_min": spec["lambda_min"]}
        return -obj, terms, {"params": names, "rows": int(K.shape[0]), "batches": 1}
