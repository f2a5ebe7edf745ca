"""ZiCo (Li et al., ICLR 2023): Σ_m log Σ_j mean_i|g_ij| / std_i(g_ij), SiGeo's first term.

Follows SLDGroup/ZiCo `compute_zico.py` (docs/proxies.md, A5): `.weight` of Conv2d/Linear by default
(`modules="ctr"` adds other ≥2-D weights such as attention in-projections), population std, elements
with std 0 dropped, modules with ratio sum 0 skipped, natural log. Per-batch gradients by default;
`official_accumulate=True` reproduces the official code, which never zeroes `.grad`, so batch i's
"gradient" is the running sum (docs/proxies.md, A11). Statistics in float64 (the official code uses float32 numpy).
k = 4 batches by default, as SiGeo's comparisons; the official search script pre-loads 2 (`--maxbatch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ctrnas.errors import CtrnasError
from ctrnas.proxies.base import Proxy, batch_count_message, check_choice, register, select_groups
from ctrnas.proxies.gradstats import NORMALISE, collect, zico_term


@register("zico")
@dataclass(frozen=True)
class ZiCo(Proxy):
    """ZiCo score (higher is better); terms: zico, loss."""

    k: int = 4
    modules: str = "zico"
    embeddings: bool = False
    official_accumulate: bool = False
    sigma_rel_eps: float | None = None
    normalise: str = "none"           # "modules" | "elements" | "both" (gradstats.zico_term)
    mode: str = "train"

    batch_option: ClassVar[str | None] = "k"

    def _compute(self, model, batches, loss_fn):
        if self.k < 2 or len(batches) < self.k:
            raise CtrnasError(batch_count_message(self.name, self.k, len(batches)))
        check_choice(self.name, "normalise", self.normalise, list(NORMALISE))
        self._set_mode(model)
        groups = select_groups(model, self.modules, embeddings=self.embeddings)
        stats = collect(model, batches[: self.k], loss_fn, groups, None, accumulate=self.official_accumulate)
        value, contributing = zico_term(stats, False, self.sigma_rel_eps, self.normalise)
        meta = {"k": self.k, "modules": list(groups), "modules_contributing": contributing,
                "params": [n for ps in stats.group_params.values() for n in ps],
                "unused_params": [n for ps in stats.group_params.values() for n in ps if n not in stats.used_params]}
        return value, {"zico": value, "loss": sum(stats.losses) / len(stats.losses)}, meta
