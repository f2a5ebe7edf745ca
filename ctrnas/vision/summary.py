"""Summaries of a correlation CSV (`ctrnas.vision.correlate`): metric values per cell, rank correlations with
bootstrap intervals, a markdown table and scatter plots against NB201's accuracies."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctrnas.errors import RecipeError
from ctrnas.vision.space import NB201Cell, NB201Table
from ctrnas.vision.stats import Correlation, correlate


def metric_values(rows: list[dict], metric: str, warmup: float) -> dict[str, float]:
    """arch -> value of `metric` at a warm-up level.

    `proxy` reads the score, `proxy.term` one of its terms (e.g. `sigeo.zico`), and `sigeo@l1,l2,l3`
    recombines SiGeo's stored terms with other λ (Eq. 7: l1·zico + l2·fr − l3·loss) at no extra cost.
    `sigeo_ps@l1,l2,l3` does the same with the FR term of the per-sample Fisher (`frnorm.fr_sample`)
    in place of App. E's batch-mean one; cells without both rows are left out.
    """
    if metric.startswith("sigeo_ps@"):
        lams = [float(v) for v in metric.partition("@")[2].split(",")]
        if len(lams) != 3:
            raise RecipeError("metric", metric, "expected three λ after '@'")
        sig = {r["arch"]: json.loads(r["terms"]) for r in rows
               if r["proxy"] == "sigeo" and float(r["warmup"]) == warmup}
        frs = metric_values(rows, "frnorm.fr_sample", warmup)
        return {a: lams[0] * t["zico"] + lams[1] * frs[a] - lams[2] * t["loss"] for a, t in sig.items() if a in frs}
    lams = None
    if "@" in metric:
        metric, _, spec = metric.partition("@")
        lams = [float(v) for v in spec.split(",")]
        if len(lams) != 3:
            raise RecipeError("metric", metric, f"expected three λ after '@', got {spec!r}")
    proxy, _, term = metric.partition(".")
    out = {}
    for r in rows:
        if r["proxy"] == proxy and float(r["warmup"]) == warmup:
            if lams is not None:
                t = json.loads(r["terms"])
                out[r["arch"]] = lams[0] * t["zico"] + lams[1] * t.get("fr", 0.0) - lams[2] * t["loss"]
            else:
                out[r["arch"]] = float(json.loads(r["terms"])[term]) if term else float(r["value"])
    return out


@dataclass(frozen=True)
class SummaryRow:
    metric: str
    warmup: float
    subset: str
    corr: Correlation


def summarize(
    rows: list[dict], table: NB201Table, metrics: list[str], warmups: list[float], truth: str = "cifar10",
    archs: set[str] | None = None, subset: str = "all", n_boot: int = 1000, seed: int = 0,
) -> list[SummaryRow]:
    """Spearman / Kendall with bootstrap intervals per (metric, warm-up level), optionally on a subset of cells."""
    out = []
    for w in warmups:
        for m in metrics:
            vals = metric_values(rows, m, w)
            keys = sorted(k for k in vals if archs is None or k in archs)
            if not keys:
                continue
            acc = [table.accuracy(NB201Cell.from_str(k), truth) for k in keys]
            out.append(SummaryRow(m, w, subset, correlate([vals[k] for k in keys], acc, n_boot, seed)))
    return out


def format_markdown(summary: list[SummaryRow], paper: dict | None = None) -> str:
    """A markdown table; `paper` maps (metric, warmup) -> (Spearman, Kendall) published values."""
    lines = ["| metric | warm-up | cells | Spearman ρ [95% CI] | Kendall τ [95% CI] | paper ρ / τ |", "|---|---|---|---|---|---|"]
    for s in summary:
        c = s.corr
        ref = (paper or {}).get((s.metric, s.warmup))
        lines.append(
            f"| {s.metric} | {s.warmup:g} | {c.n} ({s.subset}) | {c.spearman:.3f} [{c.spearman_ci[0]:.3f}, {c.spearman_ci[1]:.3f}] "
            f"| {c.kendall:.3f} [{c.kendall_ci[0]:.3f}, {c.kendall_ci[1]:.3f}] | "
            + (f"{ref[0]:.2f} / {ref[1]:.2f} |" if ref else "– |")
        )
    return "\n".join(lines)


def plot_scatter(rows: list[dict], table: NB201Table, metrics: list[str], warmup: float, truth: str, path: str | Path) -> Path:
    """One panel per metric: proxy score against NB201 test accuracy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.0), squeeze=False)
    for ax, m in zip(axes[0], metrics):
        vals = metric_values(rows, m, warmup)
        x = np.array(list(vals.values()), dtype=float)
        y = [table.accuracy(NB201Cell.from_str(k), truth) for k in vals]
        if m.startswith("synflow") or m.startswith("params"):
            x = np.log10(np.maximum(x, 1e-300))
            m = f"log10 {m}"
        ax.scatter(x, y, s=4, alpha=0.6)
        ax.set_xlabel(m)
        ax.set_ylabel(f"{truth} test acc (%)")
    fig.suptitle(f"NB201, warm-up {warmup:g}")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
