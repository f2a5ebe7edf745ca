"""PNG plots of a search: best-so-far curve, proxy score vs true metric, cost vs metric with Pareto front.

Figures are built with `matplotlib.figure.Figure` and its Agg canvas directly, so no pyplot global state
or display backend is touched (safe in worker processes and on headless machines).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ctrnas.search.history import History


def _figure(width: float = 5.0, height: float = 3.6):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=120)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def _hlines(ax, lines: Mapping[str, float] | None) -> None:
    """Dashed horizontal reference lines (e.g. the baselines' test log loss), one legend entry each."""
    for k, (label, y) in enumerate((lines or {}).items()):
        ax.axhline(y, linestyle="--", linewidth=1, color=f"C{k + 1}", label=label)


def pareto_front(costs: Sequence[float], metrics: Sequence[float], minimize_metric: bool = True) -> np.ndarray:
    """Indices of the points no other point beats on both cost (lower) and metric, sorted by cost.

    Non-finite points are ignored; among equal (cost, metric) points the first is kept.
    """
    c, m = np.asarray(costs, dtype=float), np.asarray(metrics, dtype=float)
    if not minimize_metric:
        m = -m
    finite = np.flatnonzero(np.isfinite(c) & np.isfinite(m))
    order = finite[np.lexsort((finite, m[finite], c[finite]))]  # by cost, then metric, then index
    front, best = [], np.inf
    for i in order:
        if m[i] < best:  # strictly better than every cheaper-or-equal point
            front.append(i)
            best = m[i]
    return np.asarray(front, dtype=int)


def plot_best_so_far(
    histories: Mapping[str, History], path: str | Path, maximize: bool, ylabel: str = "fitness"
) -> Path:
    """Best-so-far fitness against the number of evaluations, one line per labelled search."""
    fig, ax = _figure()
    for label, history in histories.items():
        curve = history.best_so_far(maximize)
        ax.step(np.arange(1, len(curve) + 1), curve, where="post", label=label)
    ax.set_xlabel("evaluations")
    ax.set_ylabel(f"best {ylabel} so far")
    ax.grid(alpha=0.3)
    if len(histories) > 1:
        ax.legend()
    return _save(fig, path)


def plot_score_vs_metric(
    scores: Sequence[float],
    metrics: Sequence[float],
    path: str | Path,
    xlabel: str = "proxy score",
    ylabel: str = "test log loss",
    title: str | None = None,
    lines: Mapping[str, float] | None = None,
) -> Path:
    """Scatter of proxy score against the true metric; the title carries Kendall tau and Spearman rho;
    `lines`: horizontal reference lines {label: metric}."""
    from ctrnas.search.ranking import rank_correlations

    fig, ax = _figure()
    x, y = np.asarray(scores, dtype=float), np.asarray(metrics, dtype=float)
    ax.scatter(x, y, s=14, alpha=0.8)
    corr = rank_correlations(x, y, n_boot=0)
    stat = f"Kendall τ = {corr['kendall'].estimate:.3f}, Spearman ρ = {corr['spearman'].estimate:.3f}"
    ax.set_title(f"{title}\n{stat}" if title else stat, fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if lines:
        _hlines(ax, lines)
        ax.legend(fontsize=8)
    return _save(fig, path)


def plot_pareto(
    costs: Sequence[float],
    metrics: Sequence[float],
    path: str | Path,
    xlabel: str = "parameters",
    ylabel: str = "test log loss",
    minimize_metric: bool = True,
    lines: Mapping[str, float] | None = None,
) -> Path:
    """Cost (params or FLOPs) against the metric, with the Pareto front drawn as a step line; `lines`:
    horizontal reference lines {label: metric}."""
    fig, ax = _figure()
    c, m = np.asarray(costs, dtype=float), np.asarray(metrics, dtype=float)
    ax.scatter(c, m, s=14, alpha=0.6, label="candidates")
    front = pareto_front(c, m, minimize_metric)
    if len(front):
        ax.step(c[front], m[front], where="post", color="C3", marker="o", ms=4, label="Pareto front")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if np.all(c[np.isfinite(c)] > 0) and np.nanmax(c) / max(np.nanmin(c), 1e-12) > 100:
        ax.set_xscale("log")  # params span orders of magnitude across a NASRec space
    _hlines(ax, lines)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)
