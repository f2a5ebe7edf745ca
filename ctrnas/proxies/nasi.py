"""NASI (thesis Ch. 6): the NTK-trace approximation T̃ = ‖(1/b) Σ_x ∇θ L_x‖² (Eq. 6.7) on a mini-batch,
and its constrained fitness R = T̃ − μ·max(0, T̃ − ν) (Eq. 6.8).

Labels may be random (label-agnostic, Prop. 6.2). With `nu=None` the value is T̃; otherwise R.
`AdaptiveNu` is NASI-ADA's running ν (Eq. 6.15); NASI-FIX's ν is the mean T̃ of 50 random architectures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ctrnas.proxies.base import Proxy, loss_grads, register, trainable_params


def constrained_fitness(t: float, mu: float, nu: float) -> float:
    """R(A) = T̃ − μ·max(0, T̃ − ν) (Eq. 6.8)."""
    return t - mu * max(0.0, t - nu)


@dataclass
class AdaptiveNu:
    """ν_t = (ν₀ + Σ_{τ<t} T̃_τ) / t (Eq. 6.15): call `value()` before, `update(T̃)` after each step."""

    nu0: float
    seen: list[float] = field(default_factory=list)

    def value(self) -> float:
        return (self.nu0 + sum(self.seen)) / (len(self.seen) + 1)

    def update(self, t: float) -> None:
        self.seen.append(float(t))


@register("nasi")
@dataclass(frozen=True)
class Nasi(Proxy):
    num_batches: int = 1
    mu: float = 1.0
    nu: float | None = None
    embeddings: bool = False
    mode: str = "train"

    def _compute(self, model, batches, loss_fn):
        self._set_mode(model)
        params = trainable_params(model, embeddings=self.embeddings)
        ts = []
        for batch in batches[: self.num_batches]:
            _, gs = loss_grads(model, batch, loss_fn, [p for _, p in params])
            ts.append(sum(float((g.double() ** 2).sum()) for g in gs))
        t = sum(ts) / len(ts)
        terms = {"trace_approx": t}
        value = t
        if self.nu is not None:
            value = constrained_fitness(t, self.mu, self.nu)
            terms["fitness"] = value
        return value, terms, {"params": [n for n, _ in params], "batches": len(ts)}
