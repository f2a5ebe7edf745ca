"""Pareto front against a brute-force check; best-so-far per rung by hand; plots write valid PNGs."""

import math

import numpy as np

from ctrnas.search.history import History, HistoryRecord
from ctrnas.search.plots import best_so_far_by_rung, pareto_front, plot_best_so_far, plot_pareto, plot_score_vs_metric

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


def _ladder_history():
    """Rung 0 a score to maximize (5, 3, 7), rung 1 a log loss to minimize (0.5, 0.6, 0.4), interleaved."""
    scored = [(0, 5.0), (0, 3.0), (1, 0.5), (0, 7.0), (1, 0.6), (1, 0.4)]
    return History(HistoryRecord(i, 0, f"k{i}", {}, v, rung=r) for i, (r, v) in enumerate(scored))


def test_best_so_far_of_a_multi_fidelity_search_keeps_each_rung_to_its_own_records():
    h = _ladder_history()
    curves = best_so_far_by_rung(h, maximize=False, rung_maximize=[True, False])
    assert [list(curves[0][0]), list(curves[0][1])] == [[1, 2, 4], [5.0, 5.0, 7.0]]
    assert [list(curves[1][0]), list(curves[1][1])] == [[3, 5, 6], [0.5, 0.5, 0.4]]
    # without the rung directions: the top rung alone, in the search's direction
    top = best_so_far_by_rung(h, maximize=False)
    assert list(top) == [1] and list(top[1][1]) == [0.5, 0.5, 0.4]
    # one curve over all rungs would compare a score of 3 with log losses: 5, 3, 0.5, 0.5, 0.5, 0.4
    assert list(h.best_so_far(False)) == [5.0, 3.0, 0.5, 0.5, 0.5, 0.4]
    single = History(HistoryRecord(i, 0, f"k{i}", {}, v) for i, v in enumerate([0.3, 0.5, 0.4]))
    assert {k: list(v[1]) for k, v in best_so_far_by_rung(single, maximize=True).items()} == {None: [0.3, 0.5, 0.5]}


def test_the_best_so_far_plot_of_a_multi_fidelity_search_has_a_panel_per_rung(tmp_path):
    path = plot_best_so_far({"ladder": _ladder_history()}, tmp_path / "best.png", maximize=False,
                            rung_maximize=[True, False], rung_names=["sigeo", "oneshot"])
    from PIL import Image

    one = plot_best_so_far({"ladder": _ladder_history()}, tmp_path / "top.png", maximize=False)
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert Image.open(path).size[1] > Image.open(one).size[1]  # two stacked panels are taller than one


def test_correlation_text_gives_n_and_the_sign_of_the_study_table():
    from ctrnas.search.plots import correlation_text
    from ctrnas.search.ranking import rank_correlations

    assert correlation_text([0.5, 0.6, 0.7], [0.44, 0.43, 0.42]) == "n = 3: too few models for a rank correlation"
    scores, loss = [1.0, 2.0, 3.0, 4.0, 5.0], [0.46, 0.45, 0.47, 0.43, 0.42]
    text = correlation_text(scores, loss)
    # the study's table: tau of the score against the negated log loss (higher = ranks better)
    tau = rank_correlations(scores, [-v for v in loss], n_boot=0)["kendall"].estimate
    assert tau == 0.6 and text.startswith(f"n = 5, Kendall τ = {tau:.3f}")  # 8 of 10 pairs agree
    assert correlation_text(scores, [-v for v in loss], lower_is_better=False) == text
    assert correlation_text([1, 2, 3, 4, math.nan], [0.4, 0.3, 0.2, 0.1, 0.5]).startswith("n = 4, Kendall τ = 1.000")
