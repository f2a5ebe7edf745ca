"""SiGeo (Zheng et al. 2023, Definition 1 / Eq. 7) with the choices of docs/proxies.md (A1-A13).

    SiGeo = λ1 · Σ_m log ‖μ_m ⊘ σ_m‖₁  +  λ2 · log( (1/k) Σ_i (θᵀ g_i)² )  −  λ3 · ℓ

- g_i: gradient of the batch-mean loss on batch i at the *inherited* weights θ (no update between the
  k batches, A3; `update_lr` optionally takes SGD steps instead, weights restored after); μ, σ:
  element-wise mean |g| and population std over the k batches (A2), float64.
- Term 1 (ZiCo) sums over modules only (A1); elements with σ = 0 are masked and modules whose ratio
  sum is 0 skipped, exactly as ZiCo's code (A4). Modules by policy (A5): "ctr" (weights of ndim ≥ 2,
  embeddings optional), "zico" (Conv2d/Linear weights), "all".
- Term 2, the Fisher–Rao norm with the empirical Fisher from batch-mean gradients (App. E, A7), over
  all trainable parameters of the subnet (A6); parameters that receive no gradient contribute 0.
  fr = 0 gives NaN (rank last) unless `fr_floor` is set (A4).
- Term 3: mean of the k batch losses (A8; `loss_reduce="last"` for the paper's D_k notation).
Presets (App. E): zero_shot (1, 1, 0), warmup_recsys (1, 1, 1), warmup_cv (1, 50, 1), zico (1, 0, 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ctrnas.errors import CtrnasError
from ctrnas.proxies.base import (Proxy, batch_count_message, check_choice, register, select_groups,
                                 trainable_params)
from ctrnas.proxies.gradstats import NORMALISE, collect, zico_term

PRESETS = {
    "zero_shot": (1.0, 1.0, 0.0),
    "warmup_recsys": (1.0, 1.0, 1.0),
    "warmup_cv": (1.0, 50.0, 1.0),
    "zico": (1.0, 0.0, 0.0),
}


@register("sigeo")
@dataclass(frozen=True)
class SiGeo(Proxy):
    """SiGeo score (higher is better); terms: zico (term 1), fr (log FR norm) and fr_raw (only when
    λ2 ≠ 0, to save the pass), loss. Meta: modules, contributing modules, parameters of each term, and
    `unused_params` (selected parameters that got no gradient: off this subnet's path)."""

    preset: str = "zero_shot"
    lam1: float | None = None
    lam2: float | None = None
    lam3: float | None = None
    k: int = 4
    modules: str = "ctr"
    embeddings: bool = False          # embedding tables in term 1
    fr_embeddings: bool = False       # embedding tables in the FR term (touched rows only contribute)
    variant: str = "module"           # "module" (Eq. 7) | "neuron" (§3.5: one log over all elements)
    loss_reduce: str = "mean"         # "mean" of the k losses (A8) | "last"
    accumulate: bool = False          # True reproduces ZiCo's official gradient accumulation (A11)
    update_lr: float | None = None    # SGD step between batches (A3; off: all g_i at the inherited θ)
    fr_floor: float | None = None     # None: log(0) -> NaN; else log(max(fr, fr_floor))
    sigma_rel_eps: float | None = None
    normalise: str = "none"           # term 1 only: "modules" | "elements" | "both" (gradstats.zico_term)
    mode: str = "train"

    batch_option: ClassVar[str | None] = "k"

    @classmethod
    def warmup_options(cls, options: dict, warmed_up: bool, domain: str = "ctr") -> dict:
        """Without a `preset`, the one that fits the warm-up (SiGeo App. E: the loss term only carries
        information once the supernet has been warmed up; the CV presets weigh the FR term more)."""
        if "preset" in options:
            return options
        return {**options, "preset": ("warmup_recsys" if domain == "ctr" else "warmup_cv") if warmed_up
                else "zero_shot"}

    def lambdas(self) -> tuple[float, float, float]:
        check_choice(self.name, "preset", self.preset, list(PRESETS))
        base = PRESETS[self.preset]
        given = (self.lam1, self.lam2, self.lam3)
        return tuple(float(b if g is None else g) for b, g in zip(base, given))

    @property
    def writes_weights(self) -> bool:
        return self.update_lr is not None  # SGD steps between batches, in place

    def _compute(self, model, batches, loss_fn):
        lam1, lam2, lam3 = self.lambdas()
        check_choice(self.name, "variant", self.variant, ["module", "neuron"])
        check_choice(self.name, "loss_reduce", self.loss_reduce, ["mean", "last"])
        check_choice(self.name, "normalise", self.normalise, list(NORMALISE))
        if self.k < 2 or len(batches) < self.k:
            raise CtrnasError(batch_count_message(self.name, self.k, len(batches)))
        self._set_mode(model)
        groups = select_groups(model, self.modules, embeddings=self.embeddings)
        fr_params = trainable_params(model, embeddings=self.fr_embeddings) if lam2 != 0 else []
        stats = collect(model, batches[: self.k], loss_fn, groups, fr_params, accumulate=self.accumulate,
                        update_lr=self.update_lr)
        term1, contributing = zico_term(stats, self.variant == "neuron", self.sigma_rel_eps, self.normalise)
        terms = {"zico": term1}
        warnings = []
        if lam2 != 0:
            fr = sum(d * d for d in stats.fr_dots) / len(stats.fr_dots)
            if fr > 0:
                log_fr = math.log(fr if self.fr_floor is None else max(fr, self.fr_floor))
            elif self.fr_floor is not None:
                log_fr = math.log(self.fr_floor)
                warnings.append("FR norm is 0; floored")
            else:
                log_fr = float("nan")
                warnings.append("FR norm is 0; score is NaN (rank last)")
            terms.update(fr=log_fr, fr_raw=fr)
        else:
            log_fr = 0.0
        loss = sum(stats.losses) / len(stats.losses) if self.loss_reduce == "mean" else stats.losses[-1]
        terms["loss"] = loss
        value = lam1 * term1 + lam2 * log_fr - lam3 * loss
        used = set(stats.used_params)
        meta = {
            "k": self.k,
            "lambdas": (lam1, lam2, lam3),
            "modules": list(groups),
            "modules_contributing": contributing,
            "term1_params": [n for ps in stats.group_params.values() for n in ps],
            "fr_params": [n for n, p in fr_params if n in used],
            "unused_params": sorted(({n for n, _ in fr_params}
                                     | {n for ps in stats.group_params.values() for n in ps}) - used),
            "batch_losses": stats.losses,
            "warnings": warnings,
        }
        return value, terms, meta


@register("sigeo_norm")
@dataclass(frozen=True)
class SiGeoNorm(SiGeo):
    """SiGeo with term 1 averaged over modules and over each module's elements (docs/proxies.md, A14): the one
    normalised variant that ranked the demo's subnets better than `params` after every warm-up tried."""

    normalise: str = "both"
