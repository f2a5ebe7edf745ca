"""PNG plots of a search: best-so-far curve (per rung of a multi-fidelity search), proxy score vs true
metric, cost vs metric with Pareto front.

Figures are built with `matplotlib.figure.Figure` and its Agg canvas directly, so no pyplot global state
or display backend is touched (safe in worker processes and on headless machines).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ctrnas.search.history import History


def _figure(width: float = 5.0, height: float = 3.6) -> tuple[Any, Any]:
    fig, axes = _figures(1, width, height)
    return fig, axes[0]


def _figures(n: int, width: float = 5.0, height: float = 3.6) -> tuple[Any, list[Any]]:
    """A figure of `n` panels stacked over one shared x axis."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height if n == 1 else 0.6 * height * n), dpi=120)
    FigureCanvasAgg(fig)
    return fig, list(fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0])


def _save(fig: Any, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def _hlines(ax: Any, lines: Mapping[str, float] | None) -> None:
    """Dashed horizontal reference lines (e.g. the baselines' test log loss), one legend entry each."""
    for k, (label, y) in enumerate((lines or {}).items()):
        ax.axhline(y, linestyle="--", linewidth=1, color=f"C{k + 1}", label=label)


def pareto_front(costs: Sequence[float] | np.ndarray, metrics: Sequence[float] | np.ndarray,
                 minimize_metric: bool = True) -> np.ndarray:
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


def best_so_far_by_rung(
    history: History, maximize: bool, rung_maximize: Sequence[bool] | None = None
) -> dict[int | None, tuple[np.ndarray, np.ndarray]]:
    """{rung: (evaluation numbers, best-so-far)}: each rung's curve over its own records only, since the
    fitness of different rungs are different quantities (SiGeo, a fine-tuned log loss, ...); rung None for a
    single-fidelity search. With rung directions (`rung_maximize`) every rung, else only the top rung, whose
    direction is the search's (`maximize`)."""
    rungs = sorted({r.rung for r in history if r.rung is not None})
    if not rungs:
        curve = history.best_so_far(maximize)
        return {None: (np.arange(1, len(curve) + 1), curve)}
    out: dict[int | None, tuple[np.ndarray, np.ndarray]] = {}
    for rung in rungs if rung_maximize is not None else rungs[-1:]:
        at = [i for i, r in enumerate(history) if r.rung == rung]
        direction = rung_maximize[rung] if rung_maximize is not None else maximize
        out[rung] = (np.asarray(at) + 1, History(history[i] for i in at).best_so_far(direction))
    return out


def plot_best_so_far(
    histories: Mapping[str, History], path: str | Path, maximize: bool, ylabel: str = "fitness",
    rung_maximize: Sequence[bool] | None = None, rung_names: Sequence[str] | None = None,
    marks: Mapping[str, Mapping[int | None, float]] | None = None,
) -> Path:
    """Best-so-far fitness against the number of evaluations, one line per labelled search; a multi-fidelity
    search gets one panel per rung (`best_so_far_by_rung`), named by `rung_names` (with their units).
    `marks`: {label: {rung: value}} dashed reference lines per panel, e.g. the seeded baselines' own scores
    (rung None: a single-fidelity search)."""
    curves = {label: best_so_far_by_rung(h, maximize, rung_maximize) for label, h in histories.items()}
    panels = sorted({k for c in curves.values() for k in c}, key=lambda k: -1 if k is None else k)
    fig, axes = _figures(len(panels))
    for ax, rung in zip(axes, panels):
        for label, by_rung in curves.items():
            if rung in by_rung:
                x, y = by_rung[rung]
                ax.step(x, y, where="post", label=label)
        name = rung_names[rung] if rung_names is not None and rung is not None else ylabel
        ax.set_ylabel("best so far" if rung is not None else f"best {name} so far")
        if rung is not None:
            ax.set_title(f"rung {rung}: {name}", fontsize=9)
        ax.grid(alpha=0.3)
        here = {label: v[rung] for label, v in (marks or {}).items() if rung in v and np.isfinite(v[rung])}
        _hlines(ax, here)
        if len(histories) > 1 or here:
            ax.legend(fontsize=8)
    axes[-1].set_xlabel("evaluations")
    return _save(fig, path)


MIN_CORRELATION_POINTS = 4  # fewer points give no rank correlation worth printing


def correlation_text(scores: Sequence[float] | np.ndarray, metrics: Sequence[float] | np.ndarray,
                     lower_is_better: bool = True) -> str:
    """n, and Kendall tau / Spearman rho of the score against the model's quality (the negated metric when
    lower is better, as the ranking study's table computes them: positive = the score ranks models well)."""
    from ctrnas.search.ranking import rank_correlations

    x, y = np.asarray(scores, dtype=float), np.asarray(metrics, dtype=float)
    n = int((np.isfinite(x) & np.isfinite(y)).sum())
    if n < MIN_CORRELATION_POINTS:
        return f"n = {n}: too few models for a rank correlation"
    corr = rank_correlations(x, -y if lower_is_better else y, n_boot=0)
    return (f"n = {n}, Kendall τ = {corr['kendall'].estimate:.3f}, Spearman ρ = {corr['spearman'].estimate:.3f}\n"
            "(positive: a higher score, a better model)")


def plot_score_vs_metric(
    scores: Sequence[float],
    metrics: Sequence[float],
    path: str | Path,
    xlabel: str = "proxy score",
    ylabel: str = "test log loss",
    title: str | None = None,
    lines: Mapping[str, float] | None = None,
    lower_is_better: bool = True,
) -> Path:
    """Scatter of proxy score against the true metric; the title carries n and, from 4 points on, Kendall
    tau and Spearman rho of the score against the quality (`correlation_text`); `lines`: horizontal
    reference lines {label: metric}."""
    fig, ax = _figure()
    x, y = np.asarray(scores, dtype=float), np.asarray(metrics, dtype=float)
    ax.scatter(x, y, s=14, alpha=0.8)
    stat = correlation_text(x, y, lower_is_better)
    ax.set_title(f"{title}\n{stat}" if title else stat, fontsize=8)
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
    points: Mapping[str, tuple[float, float]] | None = None,
) -> Path:
    """Cost (params or FLOPs) against the metric, with the Pareto front drawn as a step line; `lines`:
    horizontal reference lines {label: metric}; `points`: labelled points {label: (cost, metric)}, e.g. the
    found model and the baselines."""
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
    else:
        from matplotlib.ticker import EngFormatter

        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 20k, 1.5M: no run-together long numbers
    _hlines(ax, lines)
    for k, (label, (x, y)) in enumerate((points or {}).items()):
        if np.isfinite(x) and np.isfinite(y):
            ax.scatter([x], [y], s=46, marker="*D^sv<>"[k % 7], color=f"C{(k + 4) % 10}", zorder=3, label=label)
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)
