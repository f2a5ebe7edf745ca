"""SNIP (Lee et al. 2019, as in Abdelfattah et al. 2021): Σ |θ ⊙ ∇θ L| over the selected weights;
`form="inner"` gives the thesis's M_SNIP (Eq. 7.3), |θᵀ ∇θ L|. Mean over `num_batches` batches."""

from __future__ import annotations

from dataclasses import dataclass

from ctrnas.proxies.base import Proxy, check_choice, flat_params, mean_grad_score, register, select_groups


@register("snip")
@dataclass(frozen=True)
class Snip(Proxy):
    num_batches: int = 1
    modules: str = "ctr"
    embeddings: bool = False
    form: str = "elementwise"     # "elementwise" Σ|θ⊙g| | "inner" |θᵀg|
    mode: str = "train"

    def _compute(self, model, batches, loss_fn):
        check_choice(self.name, "form", self.form, ["elementwise", "inner"])
        self._set_mode(model)
        params = flat_params(select_groups(model, self.modules, self.embeddings))
        def score(ps, gs):
            prods = [(p.detach().double() * g.double()) for (_, p), g in zip(ps, gs)]
            if self.form == "elementwise":
                return sum(float(x.abs().sum()) for x in prods)
            return abs(sum(float(x.sum()) for x in prods))

        v, n = mean_grad_score(model, batches, loss_fn, params, self.num_batches, score)
        return v, {"snip": v}, {"params": [n_ for n_, _ in params], "batches": n}
