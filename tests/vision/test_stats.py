"""Rank correlations against hand-computed values; bootstrap intervals seeded and sensible."""

import math

import numpy as np
import pytest

from ctrnas.vision.stats import correlate, fill_non_finite


def test_spearman_and_kendall_by_hand():
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    y = [2.0, 1.0, 4.0, 3.0, 5.0]
    # Spearman without ties: 1 - 6 * sum d^2 / (n (n^2 - 1)); d = (1,-1,1,-1,0) -> 1 - 24/120
    # Kendall: 10 pairs, discordant (1,2) and (3,4) -> (8 - 2) / 10
    c = correlate(x, y, n_boot=200, seed=0)
    assert c.spearman == pytest.approx(1 - 6 * 4 / 120)
    assert c.kendall == pytest.approx(0.6)
    assert c.n == 5


def test_perfect_and_reversed_orders():
    x = np.arange(20.0)
    up, down = correlate(x, x**2, n_boot=100), correlate(x, -x, n_boot=100)
    assert up.spearman == pytest.approx(1) and up.kendall == pytest.approx(1)
    assert up.spearman_ci == pytest.approx((1.0, 1.0))
    assert down.spearman == pytest.approx(-1) and down.kendall_ci == pytest.approx((-1.0, -1.0))


def test_non_finite_scores_rank_last():
    filled = fill_non_finite([3.0, float("nan"), 1.0, float("-inf"), float("inf")])
    assert filled[0] == 3.0 and filled[2] == 1.0 and filled[1] < 1.0 and filled[3] < 1.0 and filled[4] < 1.0
    # the NaN cell is the worst by truth, so ranking it last keeps the order perfect
    c = correlate([3.0, 2.0, float("nan")], [30.0, 20.0, 10.0], n_boot=50)
    assert c.spearman == pytest.approx(1.0)


def test_bootstrap_is_seeded_and_covers_estimate():
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    y = x + rng.normal(size=200)
    a, b, c = correlate(x, y, 300, seed=1), correlate(x, y, 300, seed=1), correlate(x, y, 300, seed=2)
    assert a == b and a.spearman_ci != c.spearman_ci
    assert a.spearman_ci[0] < a.spearman < a.spearman_ci[1]
    assert a.kendall_ci[0] < a.kendall < a.kendall_ci[1]
    # for a bivariate normal with r = 1/sqrt(2): Spearman = (6/pi) asin(r/2) ~ 0.683
    assert abs(a.spearman - 6 / math.pi * math.asin(1 / math.sqrt(2) / 2)) < 0.1


def test_too_few_cells_give_no_interval():
    two = correlate([1.0, 2.0], [1.0, 2.0])
    # an estimate from 2 cells, an interval from 3
    assert two.spearman == pytest.approx(1.0) and math.isnan(two.spearman_ci[0])
    assert math.isnan(correlate([1.0], [1.0]).spearman)


def test_the_ctr_study_and_the_vision_harness_give_the_same_numbers():
    from ctrnas.search.ranking import rank_correlations

    rng = np.random.default_rng(5)
    scores, truth = rng.normal(size=30), rng.normal(size=30)
    scores[[3, 7]] = [np.nan, -np.inf]
    ours = correlate(scores, truth, n_boot=100, seed=2)
    ctr = rank_correlations(scores, truth, n_boot=100, seed=2)
    assert (ours.spearman, ours.spearman_ci) == (ctr["spearman"].estimate, (ctr["spearman"].low, ctr["spearman"].high))
    assert (ours.kendall, ours.kendall_ci) == (ctr["kendall"].estimate, (ctr["kendall"].low, ctr["kendall"].high))


def test_spearman_difference_is_paired():
    import numpy as np

    from ctrnas.vision.stats import spearman_difference

    rng = np.random.default_rng(0)
    y = rng.normal(size=60)
    good, noisy = y + 0.1 * rng.normal(size=60), y + 2.0 * rng.normal(size=60)
    d, (lo, hi), share = spearman_difference(good, good, y, n_boot=200)
    assert d == 0.0 and lo == hi == 0.0 and share == 0.0  # same scores: every resample differs by exactly 0
    d, (lo, hi), share = spearman_difference(good, noisy, y, n_boot=200)
    from scipy.stats import spearmanr
    assert d == pytest.approx(spearmanr(good, y).statistic - spearmanr(noisy, y).statistic)
    assert 0 < lo < d < hi and share > 0.95
