"""Streaming metrics against scikit-learn on known arrays."""

from __future__ import annotations

import numpy as np
import torch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import log_loss, roc_auc_score

import json
import math

from ctrnas.train.metrics import (MetricResult, StreamingMetrics, constant_logloss, exact_auc, histogram_auc,
                                  strict_json)


def _feed(m: StreamingMetrics, z: np.ndarray, y: np.ndarray, chunk: int) -> None:
    for i in range(0, len(z), chunk):
        m.update(z[i:i + chunk], y[i:i + chunk])


def test_hand_computed_example():
    # p = sigmoid(z) = [0.5, 0.8, 0.2, 0.5]; labels [1, 1, 0, 0].
    z = np.array([0.0, np.log(4.0), -np.log(4.0), 0.0])
    y = np.array([1.0, 1.0, 0.0, 0.0])
    m = StreamingMetrics()
    m.update(z, y)
    r = m.result()
    expected_ll = -(np.log(0.5) + np.log(0.8) + np.log(0.8) + np.log(0.5)) / 4
    assert r.logloss == pytest.approx(expected_ll, abs=1e-12)
    # pairs (pos, neg): (0.5,0.2)=1, (0.5,0.5)=0.5, (0.8,0.2)=1, (0.8,0.5)=1 -> 3.5/4
    assert r.auc == pytest.approx(0.875, abs=1e-12)
    assert r.auc_max_error == 0.0
    assert r.ctr == 0.5 and r.mean_prediction == pytest.approx(0.5)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 400), st.integers(1, 64))
def test_exact_mode_equals_sklearn(seed, n, chunk):
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 2, n)
    y = (rng.random(n) < 0.3).astype(np.float64)
    y[0], y[1] = 0.0, 1.0
    m = StreamingMetrics()
    _feed(m, z, y, chunk)
    r = m.result()
    p = 1 / (1 + np.exp(-z))
    assert r.logloss == pytest.approx(log_loss(y, p, labels=[0, 1]), rel=1e-9)
    assert r.auc == pytest.approx(roc_auc_score(y, p), abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 400), st.integers(1, 6))
def test_exact_auc_counts_tied_scores_half_as_sklearn(seed, n, levels):
    rng = np.random.default_rng(seed)
    p = rng.integers(0, levels, n) / levels  # few distinct scores: most pairs tied
    y = (rng.random(n) < 0.4).astype(np.float64)
    y[0], y[1] = 0.0, 1.0
    assert exact_auc(y, p) == pytest.approx(roc_auc_score(y, p), abs=1e-12)


def test_exact_auc_by_hand_and_without_sklearn():
    # positives 0.3, 0.3, 0.9; negatives 0.1, 0.3: pairs won 1, 0.5, 1, 0.5, 1, 1 -> 5 of 6
    assert exact_auc(np.array([1, 0, 1, 1, 0]), np.array([0.3, 0.1, 0.3, 0.9, 0.3])) == pytest.approx(5 / 6)
    import subprocess
    import sys

    code = "import sys, ctrnas.train.metrics; print('sklearn' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_histogram_mode_within_its_reported_bound_of_sklearn():
    rng = np.random.default_rng(1)
    n = 50_000
    z = rng.normal(-1.5, 1.5, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(np.float64)
    m = StreamingMetrics(exact_limit=1000, bins=1 << 12)  # small limit and coarse bins force the fallback
    _feed(m, z, y, 777)
    r = m.result()
    p = 1 / (1 + np.exp(-z))
    truth = roc_auc_score(y, p)
    assert r.auc_max_error > 0
    assert abs(r.auc - truth) <= r.auc_max_error + 1e-12
    assert abs(r.auc - truth) < 1e-3
    assert r.logloss == pytest.approx(log_loss(y, p), rel=1e-9)


def test_histogram_auc_is_exact_when_scores_fall_in_distinct_bins():
    # positives in bins 1 and 3, negatives in 0 and 2: concordant pairs (1>0), (3>0), (3>2) -> 3 of 4.
    pos = np.array([0, 1, 0, 1])
    neg = np.array([1, 0, 1, 0])
    auc, err = histogram_auc(pos, neg)
    assert auc == pytest.approx(0.75) and err == 0.0


def test_constant_logloss_is_label_entropy():
    y = np.array([1, 0, 0, 0, 1, 0, 0, 0, 0, 0], dtype=float)
    assert constant_logloss(y.mean()) == pytest.approx(log_loss(y, np.full(10, y.mean())), rel=1e-12)


def _no_constants(name):
    raise ValueError(f"non-strict JSON constant {name}")


@pytest.mark.parametrize("exact_limit", [10**6, 4])  # the exact AUC path and the histogram path
def test_non_finite_predictions_give_no_metrics_and_a_reason(exact_limit):
    m = StreamingMetrics(exact_limit=exact_limit, bins=64)
    m.update(np.array([0.5, -1.0, 2.0]), np.array([1.0, 0.0, 1.0]))
    m.update(np.array([np.nan, np.inf, 3.0, -2.0]), np.array([1.0, 0.0, 1.0, 0.0]))  # sklearn would raise
    r = m.result()
    assert r.rows == 7 and math.isnan(r.logloss) and math.isnan(r.auc)
    assert r.reason == "non-finite predictions on 2 of 7 rows"
    d = json.loads(strict_json(r.to_dict()), parse_constant=_no_constants)
    assert d["logloss"] is None and d["auc"] is None and d["reason"] == r.reason


def test_huge_finite_logits_keep_exact_log_loss():
    # softplus(z) - y z for z = +-800: 800 for a wrong sign, 0 for a right one (no overflow to inf)
    m = StreamingMetrics()
    m.update(np.array([800.0, -800.0, 800.0]), np.array([0.0, 0.0, 1.0]))
    r = m.result()
    assert r.logloss == pytest.approx(800.0 / 3) and r.reason is None
    assert r.mean_prediction == pytest.approx(2 / 3)


def test_strict_json_turns_every_non_finite_number_into_null():
    obj = {"a": math.nan, "b": [1.5, math.inf, {"c": -math.inf}], "d": np.float32("nan"), "e": np.int64(3),
           "f": MetricResult.missing("diverged").to_dict()}
    got = json.loads(strict_json(obj), parse_constant=_no_constants)
    assert got["a"] is None and got["b"] == [1.5, None, {"c": None}] and got["d"] is None and got["e"] == 3
    assert got["f"]["logloss"] is None and got["f"]["reason"] == "diverged"


def test_single_class_split_has_null_auc_with_a_reason():
    """A KDD12 sample whose labels are all 0: log loss is defined, AUC is not; JSON stays strict."""
    m = StreamingMetrics()
    m.update(torch.tensor([-2.0, 0.5, -1.0]), torch.zeros(3))
    r = m.result()
    assert math.isnan(r.auc) and "all 3 labels are 0" in r.reason
    assert r.logloss == pytest.approx(float(np.mean(np.logaddexp(0.0, [-2.0, 0.5, -1.0]))))
    d = json.loads(strict_json(r.to_dict()), parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    assert d["auc"] is None and d["logloss"] == pytest.approx(r.logloss)
