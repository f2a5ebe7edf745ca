"""Pareto front against a brute-force check; plots write valid PNGs."""

import math

import numpy as np

from ctrnas.search.history import History, HistoryRecord
from ctrnas.search.plots import pareto_front, plot_best_so_far, plot_pareto, plot_score_vs_metric

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def brute_force_front(c, m):
    keep = []
    for i in range(len(c)):
        if not (math.isfinite(c[i]) and math.isfinite(m[i])):
            continue
        dominated = any(
            math.isfinite(c[j]) and math.isfinite(m[j]) and c[j] <= c[i] and m[j] <= m[i]
            and (c[j] < c[i] or m[j] < m[i] or j < i)
            for j in range(len(c)) if j != i
        )
        if not dominated:
            keep.append(i)
    return sorted(keep, key=lambda i: c[i])


def test_pareto_front_matches_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(20):
        c = rng.integers(0, 10, size=30).astype(float)
        m = rng.integers(0, 10, size=30).astype(float)
        c[rng.integers(30)] = np.nan
        assert list(pareto_front(c, m)) == brute_force_front(c, m)


def test_pareto_front_for_a_metric_to_maximize():
    # cost, AUC: (1, .70) (2, .80) (3, .75) (4, .85) -> front 0, 1, 3
    assert list(pareto_front([1, 2, 3, 4], [0.70, 0.80, 0.75, 0.85], minimize_metric=False)) == [0, 1, 3]


def test_plots_write_png_files(tmp_path):
    h = History(HistoryRecord(i, 0, f"k{i}", {}, v) for i, v in enumerate([0.3, math.nan, 0.5, 0.4]))
    paths = [
        plot_best_so_far({"evolution": h, "random": h}, tmp_path / "best.png", maximize=True),
        plot_score_vs_metric([1, 2, 3, 4], [0.45, 0.44, 0.46, 0.43], tmp_path / "sub" / "scatter.png", title="SiGeo"),
        plot_pareto([1e3, 1e4, 1e6, 5e5], [0.45, 0.44, 0.46, 0.43], tmp_path / "pareto.png"),
    ]
    for p in paths:
        assert p.read_bytes()[:8] == PNG_MAGIC and p.stat().st_size > 1000
