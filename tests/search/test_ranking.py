"""Rank correlations against scipy and by hand; bootstrap intervals are seeded and bracket the estimate."""

import math

import numpy as np
import pytest
from scipy import stats

from ctrnas.search.ranking import rank_correlation, rank_correlations


def test_hand_computed_kendall_and_spearman():
    # 4 items, one discordant swap: pairs = 6, concordant 5, discordant 1 -> tau = 4/6;
    # rank differences d = (0, 0, 1, -1) -> rho = 1 - 6 * 2 / (4 * 15) = 0.8.
    x, y = [1, 2, 3, 4], [10, 20, 40, 30]
    assert rank_correlation(x, y, "kendall", n_boot=0).estimate == pytest.approx(4 / 6)
    assert rank_correlation(x, y, "spearman", n_boot=0).estimate == pytest.approx(0.8)


def test_matches_scipy_with_ties_ranks_failed_scores_last_and_drops_unknown_metrics():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, size=40).astype(float)
    y = x + rng.normal(0, 2, size=40)
    # a failed score (NaN, -inf, +inf alike) ranks below every finite one; an unknown metric drops its pair
    x_bad, y_bad = np.append(x, [np.nan, np.inf, 1.0]), np.append(y, [0.0, -3.0, np.inf])
    res = rank_correlations(x_bad, y_bad, n_boot=200, seed=1)
    assert res["kendall"].n == res["spearman"].n == 42
    x_last = np.append(x, [-1.0, -1.0])  # below the lowest finite score (0), tied with each other
    y_kept = np.append(y, [0.0, -3.0])
    assert res["kendall"].estimate == pytest.approx(stats.kendalltau(x_last, y_kept).statistic)
    assert res["spearman"].estimate == pytest.approx(stats.spearmanr(x_last, y_kept).statistic)


def test_a_failed_score_on_the_worst_item_keeps_a_perfect_ranking():
    # by hand: scores 3 > 2 > failed against metrics 30 > 20 > 10 is the same order: rho = tau = 1
    r = rank_correlations([3.0, 2.0, np.nan], [30.0, 20.0, 10.0], n_boot=0)
    assert r["spearman"].estimate == pytest.approx(1.0) and r["kendall"].estimate == pytest.approx(1.0)
    # the failed score on the middle item: rank differences (0, -1, 1) -> rho = 1 - 6 * 2 / 24 = 0.5;
    # one discordant pair of 3 -> tau = (2 - 1) / 3
    r = rank_correlations([2.0, np.nan, 1.0], [30.0, 20.0, 10.0], n_boot=0)
    assert r["spearman"].estimate == pytest.approx(0.5) and r["kendall"].estimate == pytest.approx(1 / 3)


def test_vectorised_bootstrap_spearman_equals_scipy_per_resample():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=15), rng.normal(size=15)
    r = rank_correlation(x, y, "spearman", n_boot=50, seed=9)
    idx = np.random.default_rng(9).integers(0, 15, size=(50, 15))
    ref = np.array([stats.spearmanr(x[i], y[i]).statistic for i in idx])
    ref = ref[np.isfinite(ref)]
    assert r.low == pytest.approx(np.quantile(ref, 0.025)) and r.high == pytest.approx(np.quantile(ref, 0.975))


@pytest.mark.parametrize("method", ["kendall", "spearman"])
def test_bootstrap_interval_is_seeded_and_contains_the_estimate(method):
    rng = np.random.default_rng(0)
    x = rng.normal(size=60)
    y = x + rng.normal(size=60)  # population rho ~ 0.69
    a = rank_correlation(x, y, method, n_boot=300, seed=4)
    b = rank_correlation(x, y, method, n_boot=300, seed=4)
    c = rank_correlation(x, y, method, n_boot=300, seed=5)
    assert a == b and (a.low, a.high) != (c.low, c.high)
    assert a.low < a.estimate < a.high
    assert 0 < a.low  # a clear positive relation: the 95% interval excludes 0


def test_degenerate_inputs_give_nan_not_errors():
    assert math.isnan(rank_correlation([1, 1, 1, 1], [1, 2, 3, 4]).estimate)
    assert math.isnan(rank_correlation([1.0], [2.0]).low)
    with pytest.raises(ValueError):
        rank_correlation([1, 2], [1, 2, 3])


def test_feature_correlations_match_scipy_and_skip_constant_features():
    from ctrnas.search.ranking import feature_correlations

    rng = np.random.default_rng(3)
    m = np.column_stack([rng.integers(0, 3, 30), np.ones(30), rng.normal(size=30)])
    loss = rng.normal(size=30)
    score = rng.normal(size=30)
    score[4] = np.nan  # a diverged proxy drops that pair only
    rows = feature_correlations(["a", "const", "b"], m.tolist(), {"loss": loss, "score": score})
    assert {r["feature"] for r in rows} == {"a", "b"} and len(rows) == 4
    for r in rows:
        col = m[:, 0 if r["feature"] == "a" else 2]
        y = loss if r["target"] == "loss" else score
        keep = np.isfinite(y)
        ref = stats.spearmanr(col[keep], y[keep])
        assert r["spearman"] == pytest.approx(ref.statistic) and r["p"] == pytest.approx(ref.pvalue)
        assert r["n"] == keep.sum()
