"""Rank correlation between proxy scores and true metrics, with seeded bootstrap confidence intervals.

The one implementation for the CTR proxy-ranking study and the vision harness (`vision.stats`); SiGeo
Tables 2-3 report Kendall tau and Spearman rho. The correlation is reported as is: a proxy that predicts a
low log loss well correlates *negatively* with log loss, so callers that want "higher = better ranking"
pass the negated loss.

Failed scores: a NaN or infinite score ranks below every finite score (`rank_last`): a proxy that fails
on an architecture calls it the worst, and that call is judged like any other. A non-finite *metric*
(the truth is unknown, e.g. a training that diverged) drops its pair; `n` counts the pairs used. Fewer
than 2 pairs, or a constant side, give NaN; the interval needs at least 3 pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Sequence, Union

import numpy as np
from scipy import stats

Method = Literal["kendall", "spearman"]


@dataclass(frozen=True)
class Correlation:
    """A point estimate with a percentile bootstrap interval; `n` counts the finite pairs used."""

    method: str
    estimate: float
    low: float
    high: float
    n: int
    confidence: float
    n_boot: int


Values = Union[Sequence[float], np.ndarray]  # a list of numbers or a 1-D array


def rank_last(values: Sequence[float]) -> np.ndarray:
    """The values with NaN / ±inf replaced by one value below every finite one (they tie for last);
    all non-finite: all tied."""
    v = np.asarray(values, dtype=float).copy()
    bad = ~np.isfinite(v)
    if bad.all():
        return np.zeros_like(v)
    v[bad] = v[~bad].min() - 1.0
    return v


def _check(scores: Any, metrics: Any) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(scores, dtype=float), np.asarray(metrics, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"scores and metrics must be 1-D of equal length, got shapes {x.shape} and {y.shape}")
    return x, y


def score_pairs(scores: Values, metrics: Values) -> tuple[np.ndarray, np.ndarray]:
    """The pairs a correlation uses: those with a finite metric, failed scores ranked last."""
    x, y = _check(scores, metrics)
    keep = np.isfinite(y)
    return rank_last(x[keep]), y[keep]


def _finite_pairs(a: Values, b: Values) -> tuple[np.ndarray, np.ndarray]:
    # feature correlations: a feature against a metric or a score, only where both are known
    x, y = _check(a, b)
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def _point(x: np.ndarray, y: np.ndarray, method: Method) -> float:
    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    if method == "kendall":
        return float(stats.kendalltau(x, y).statistic)  # tau-b: handles ties
    if method == "spearman":
        return float(stats.spearmanr(x, y).statistic)
    raise ValueError(f"method must be 'kendall' or 'spearman', got {method!r}")


def point_correlation(a: Sequence[float], b: Sequence[float], method: Method = "kendall") -> float:
    """Kendall tau-b or Spearman rho of the pairs where both are finite, without an interval (NaN when one
    side is constant or fewer than 2 pairs are left)."""
    x, y = _finite_pairs(a, b)
    return _point(x, y, method)


def _spearman_rows(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Spearman rho of each row pair at once: Pearson correlation of average ranks."""
    rx = stats.rankdata(xs, axis=1)
    ry = stats.rankdata(ys, axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rx * ry).sum(axis=1) / den, np.nan)


def rank_correlation(
    scores: Values,
    metrics: Values,
    method: Method = "kendall",
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Correlation:
    """Kendall tau-b or Spearman rho of `scores` vs `metrics`, with a percentile bootstrap CI over pairs
    (failed scores rank last, unknown metrics drop their pair: see the module docstring)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x, y = score_pairs(scores, metrics)
    estimate = _point(x, y, method)
    n = len(x)
    if n < 3 or n_boot < 1 or math.isnan(estimate):
        return Correlation(method, estimate, math.nan, math.nan, n, confidence, n_boot)
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    if method == "spearman":
        boot = _spearman_rows(x[idx], y[idx])
    else:
        boot = np.array([_point(x[i], y[i], method) for i in idx])
    # Resamples where one side is constant have no correlation; they are left out of the percentiles.
    boot = boot[np.isfinite(boot)]
    alpha = (1 - confidence) / 2
    low, high = (np.quantile(boot, [alpha, 1 - alpha]) if len(boot) else (math.nan, math.nan))
    return Correlation(method, estimate, float(low), float(high), n, confidence, n_boot)


def rank_correlations(
    scores: Values, metrics: Values, *, n_boot: int = 1000,
    confidence: float = 0.95, seed: int = 0,
) -> dict[str, Correlation]:
    """Both Kendall tau and Spearman rho (the pair SiGeo reports), with the same bootstrap seed."""
    return {
        m: rank_correlation(scores, metrics, m, n_boot=n_boot, confidence=confidence, seed=seed)
        for m in ("kendall", "spearman")
    }


def feature_correlations(names: Sequence[str], matrix: Sequence[Sequence[float]],
                         targets: dict[str, Sequence[float]]) -> list[dict[str, Any]]:
    """Spearman rho (with its p-value) of every feature column of `matrix` (one row per item) against every
    target (a metric or a proxy score per item): what the targets follow. Constant features are left out."""
    x = np.asarray(matrix, dtype=float).reshape(len(matrix), len(names))
    rows = []
    for j, name in enumerate(names):
        col = x[:, j]
        if np.all(col == col[0]):
            continue
        for target, vals in targets.items():
            a, b = _finite_pairs(col, vals)
            rho = _point(a, b, "spearman")
            p = float(stats.spearmanr(a, b).pvalue) if math.isfinite(rho) else math.nan
            rows.append({"feature": name, "target": target, "spearman": rho, "p": p, "n": len(a)})
    return rows
