"""Rank correlations with seeded bootstrap intervals (the statistics of SiGeo Tables 2-3)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats


def fill_non_finite(values) -> np.ndarray:
    """NaN / ±inf scores rank below every finite score (a proxy that fails on a cell calls it worst)."""
    v = np.asarray(values, dtype=float).copy()
    bad = ~np.isfinite(v)
    if bad.all():
        return np.zeros_like(v)
    v[bad] = v[~bad].min() - 1.0
    return v


@dataclass(frozen=True)
class Correlation:
    """Spearman ρ and Kendall τ-b with percentile bootstrap intervals."""

    n: int
    spearman: float
    kendall: float
    spearman_ci: tuple[float, float]
    kendall_ci: tuple[float, float]


def _rho_tau(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    with warnings.catch_warnings():
        # A bootstrap resample of few cells can be constant; its NaN is dropped by nanpercentile.
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        rho = stats.spearmanr(x, y).statistic
        tau = stats.kendalltau(x, y).statistic  # tau-b: ties in either variable are corrected for
    return float(rho), float(tau)


def correlate(scores, truth, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> Correlation:
    """Spearman / Kendall of `scores` against `truth`, with a `level` percentile bootstrap over architectures."""
    x, y = fill_non_finite(scores), np.asarray(truth, dtype=float)
    n = len(x)
    if n < 3:
        nan = float("nan")
        return Correlation(n, nan, nan, (nan, nan), (nan, nan))
    rho, tau = _rho_tau(x, y)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        boots.append(_rho_tau(x[idx], y[idx]))
    b = np.asarray(boots, dtype=float)
    lo, hi = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    ci = lambda col: tuple(float(v) for v in np.nanpercentile(b[:, col], [lo, hi]))  # noqa: E731
    return Correlation(n, rho, tau, ci(0), ci(1))


def spearman_difference(a, b, truth, n_boot: int = 1000, seed: int = 0, level: float = 0.95):
    """ρ(a, truth) − ρ(b, truth) on the same cells, with a paired percentile bootstrap interval (the same
    resampled cells for both), e.g. a proxy after warm-up against itself at 0%, or SiGeo against ZiCo.

    Returns (difference, (lo, hi), share of resamples with a difference > 0).
    """
    x1, x2, y = fill_non_finite(a), fill_non_finite(b), np.asarray(truth, dtype=float)
    n = len(y)
    if n < 3:
        nan = float("nan")
        return nan, (nan, nan), nan
    rho = lambda x, t: _rho_tau(x, t)[0]  # noqa: E731
    d = rho(x1, y) - rho(x2, y)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.ConstantInputWarning)
            boots.append(stats.spearmanr(x1[idx], y[idx]).statistic - stats.spearmanr(x2[idx], y[idx]).statistic)
    b = np.asarray(boots, dtype=float)
    lo, hi = np.nanpercentile(b, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(d), (float(lo), float(hi)), float(np.nanmean(b > 0))
