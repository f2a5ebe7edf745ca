"""Rank correlations with seeded bootstrap intervals (the statistics of SiGeo Tables 2-3), in the shape the
NB201 harness reports; computed by the one rank-correlation module, `ctrnas.search.ranking` (failed scores
rank last, cells with an unknown accuracy are left out)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ctrnas.search.ranking import rank_correlations, rank_last, score_pairs

fill_non_finite = rank_last  # NaN / ±inf scores rank below every finite score


@dataclass(frozen=True)
class Correlation:
    """Spearman ρ and Kendall τ-b with percentile bootstrap intervals."""

    n: int
    spearman: float
    kendall: float
    spearman_ci: tuple[float, float]
    kendall_ci: tuple[float, float]


def correlate(scores, truth, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> Correlation:
    """Spearman / Kendall of `scores` against `truth`, with a `level` percentile bootstrap over architectures."""
    c = rank_correlations(scores, truth, n_boot=n_boot, confidence=level, seed=seed)
    rho, tau = c["spearman"], c["kendall"]
    return Correlation(rho.n, rho.estimate, tau.estimate, (rho.low, rho.high), (tau.low, tau.high))


def spearman_difference(a, b, truth, n_boot: int = 1000, seed: int = 0, level: float = 0.95):
    """ρ(a, truth) − ρ(b, truth) on the same cells, with a paired percentile bootstrap interval (the same
    resampled cells for both), e.g. a proxy after warm-up against itself at 0%, or SiGeo against ZiCo.

    Returns (difference, (lo, hi), share of resamples with a difference > 0).
    """
    x1, y = score_pairs(a, truth)
    x2, _ = score_pairs(b, truth)
    n = len(y)
    if n < 3:
        nan = float("nan")
        return nan, (nan, nan), nan

    def rho(x, t):
        with warnings.catch_warnings():
            # a bootstrap resample of few cells can be constant; its NaN is dropped by nanpercentile
            warnings.simplefilter("ignore", stats.ConstantInputWarning)
            return stats.spearmanr(x, t).statistic

    d = rho(x1, y) - rho(x2, y)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        boots.append(rho(x1[idx], y[idx]) - rho(x2[idx], y[idx]))
    b = np.asarray(boots, dtype=float)
    lo, hi = np.nanpercentile(b, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(d), (float(lo), float(hi)), float(np.nanmean(b > 0))
