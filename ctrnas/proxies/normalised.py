"""Size- and depth-normalised SiGeo and ZiCo (not in the papers; tried in benchmarks/rungs.py).

SiGeo's and ZiCo's first term sums one log per module, and each log is of a sum over the module's
elements, so subnets with more blocks and wider layers score higher whatever they learn. These variants
take the mean instead of the sum (`normalise` of the base proxies, `gradstats.zico_term`):
`*_mmean` over modules, `*_emean` over each module's elements, `*_norm` both.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctrnas.proxies.base import register
from ctrnas.proxies.sigeo import SiGeo
from ctrnas.proxies.zico import ZiCo


@register("zico_mmean")
@dataclass(frozen=True)
class ZiCoModuleMean(ZiCo):
    normalise: str = "modules"


@register("zico_emean")
@dataclass(frozen=True)
class ZiCoElementMean(ZiCo):
    normalise: str = "elements"


@register("zico_norm")
@dataclass(frozen=True)
class ZiCoNorm(ZiCo):
    normalise: str = "both"


@register("sigeo_mmean")
@dataclass(frozen=True)
class SiGeoModuleMean(SiGeo):
    normalise: str = "modules"


@register("sigeo_emean")
@dataclass(frozen=True)
class SiGeoElementMean(SiGeo):
    normalise: str = "elements"


@register("sigeo_norm")
@dataclass(frozen=True)
class SiGeoNorm(SiGeo):
    normalise: str = "both"
